"""Running the agent's code so that it cannot reach the tool server that started it.

Each run is a child process in its own session (so its own process group), with no stdin from
the server's MCP pipe, output written to unlinked temporary files, a scrubbed environment, lowered
rlimits (CPU time, address space, file size, no core dumps) and `no_new_privs`, so setuid
programs cannot raise its privileges.

Separation from the server depends on who the server runs as:

- **root** (the case inside a bureau sandbox): the code runs as `ToolSettings.code_uid`
  (65534 by default), with its own gid and no supplementary groups, and RLIMIT_NPROC applies to
  that uid. Signals to and ptrace of a process of another uid need privileges the code does not
  have, and `/proc/<server>/mem`, `environ` and `fd/` are closed to it. Before each run the
  workspace's folders and its files with a single link are given to that uid so the code can
  write them, and after it (every process of it gone) back to the workspace's owner, so the
  agent's own commands can still write what the code made; files with several hard links are
  left alone, because their owner is shared with files outside the workspace (the code can
  still replace them, since it owns the folder).
  RLIMIT_NPROC counts every process of the uid on the machine, so trials that share a code uid
  share that budget; a runtime that wants them apart passes each sandbox its own `--code-uid`.
- **any other uid** (or root without CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_KILL, or
  `code_uid=None`): the code keeps the server's uid. The server marks itself non-dumpable
  (`protect_server`), which closes its `/proc` files and ptrace to same-uid processes, but the
  code can still signal it. The sandbox's pid namespace then bounds the damage: a killed
  server ends that trial only, and the harness reports `tool_server_failed`.

Nothing outlives a run. The server is a child subreaper while a run lasts, so processes that
daemonize (double fork, `setsid`) are re-parented to it instead of init; after the run, on exit
or timeout, the process group is killed and then every remaining descendant, repeatedly until
none is left (the process limit bounds a fork bomb), and reaped; what a sweep that ran out of
time left behind is swept before the next run. A caller that was not a subreaper before the run
is not one after it: a process that adopted orphans it never reaps would collect zombies. Runs
of one server are serialized.

The code's processes are the first the kernel's OOM killer takes (`oom_score_adj` 1000, which
needs no privilege to raise): when a sandbox's memory cgroup is full, the agent's code pays for
it, not the tool server that ran it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bureau.tools.core import FailureKind, ToolFailure, ToolSettings

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

# Loaded before any fork: the child may only call what is already in memory.
_libc = ctypes.CDLL(None, use_errno=True)
_RUN_LOCK = threading.Lock()


def protect_server() -> None:
    """Make the calling (server) process non-dumpable and a subreaper for its descendants."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    run_as_uid: int


# Switching to the code uid, giving it the workspace, still writing files it then owns and
# killing its processes take these.
_CAP_CHOWN, _CAP_DAC_OVERRIDE, _CAP_FOWNER, _CAP_KILL, _CAP_SETGID, _CAP_SETUID = 0, 1, 3, 5, 6, 7


@contextlib.contextmanager
def _subreaper() -> Iterator[None]:
    """This process as a child subreaper for the block, as it was after it."""
    was = ctypes.c_int(0)
    _libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        if not was.value:
            _libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _has_capabilities(*caps: int) -> bool:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            line = next(x for x in fh if x.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    effective = int(line.split()[1], 16)
    return all(effective >> cap & 1 for cap in caps)


def code_uid(settings: ToolSettings) -> int | None:
    """The uid code runs as, or None when it keeps the server's: no code uid is configured,
    or the server lacks the capabilities the switch needs (bureau's sandbox grants them to
    its tool server, as a non-root uid, through ambient capabilities)."""
    if settings.code_uid is None or settings.code_uid in (0, os.geteuid()):
        return None
    if not _has_capabilities(
        _CAP_CHOWN, _CAP_DAC_OVERRIDE, _CAP_FOWNER, _CAP_KILL, _CAP_SETGID, _CAP_SETUID
    ):
        return None
    return settings.code_uid


def run_isolated(
    argv: list[str],
    *,
    cwd: Path,
    settings: ToolSettings,
    timeout_s: float,
    stdin_data: bytes | None,
    max_chars: int,
) -> RunResult:
    """Run `argv` in `cwd` as described in the module docstring; one run at a time."""
    uid = code_uid(settings)
    with _RUN_LOCK, _subreaper():
        owner = cwd.stat()
        if uid is not None:
            _check_reachable(cwd, uid)
            _grant_tree(cwd, uid, uid)
        limits = _limits(settings, timeout_s, uid)
        # Output goes through pipes, not temporary files: files would count against the
        # sandbox's storage, and code that fills the disk would silence its own error messages.
        with tempfile.TemporaryFile() as stdin:
            if stdin_data is not None:
                stdin.write(stdin_data)
                stdin.seek(0)
            # Children of the code uid at this point are what an earlier run's sweep left when
            # its time ran out (runs are serialized): they are swept now, before they can hold
            # the uid's process limit against this run, and never counted as the server's own.
            before, leftovers = _own_children(uid)
            if leftovers:
                _sweep(before, uid)
            start = time.monotonic()
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=stdin if stdin_data is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=_child_env(cwd, argv[0]),
                    start_new_session=True,
                    close_fds=True,
                    umask=0o022,
                    preexec_fn=_child_setup(limits, uid),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise ToolFailure(
                    FailureKind.code_runner_failed,
                    f"could not start {argv[0]} as uid {uid if uid is not None else os.getuid()}: "
                    f"{getattr(exc, 'strerror', None) or exc}",
                ) from exc
            assert proc.stdout is not None and proc.stderr is not None
            out, err = _Capture(proc.stdout, max_chars), _Capture(proc.stderr, max_chars)
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc.pid)
                proc.wait()
                _sweep(before, uid)
                if uid is not None and owner.st_uid != uid:
                    # Nothing of the run is left: the workspace goes back to its owner (the
                    # agent's uid), with what the code made, so the agent can still write it.
                    _grant_tree(cwd, owner.st_uid, owner.st_gid)
            duration = time.monotonic() - start
            return RunResult(
                exit_code=proc.returncode,
                stdout=out.text(),
                stderr=err.text(),
                timed_out=timed_out,
                duration_s=duration,
                run_as_uid=uid if uid is not None else os.getuid(),
            )


class _Capture:
    """Reads a pipe on a thread, keeping only its head and tail (memory stays bounded)."""

    def __init__(self, pipe: IO[bytes], max_chars: int) -> None:
        self.pipe = pipe
        self.half = max(1, max_chars // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.size = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with self.pipe:
            for chunk in iter(lambda: self.pipe.read1(65536), b""):  # type: ignore[attr-defined]
                self.size += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                if len(self.tail) > self.half:
                    del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        # Grandchildren that escaped the kill could hold the pipe open: wait, but not forever.
        self.thread.join(5)
        if self.size <= 2 * self.half:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        return _join_head_tail(bytes(self.head), bytes(self.tail), self.size, self.half)


# -- the child -------------------------------------------------------------------------------
def _limits(settings: ToolSettings, timeout_s: float, uid: int | None) -> list[tuple[int, int]]:
    mib = 1024 * 1024
    limits = [
        (resource.RLIMIT_CPU, int(timeout_s) + 2),
        (resource.RLIMIT_FSIZE, settings.code_max_file_mb * mib),
        (resource.RLIMIT_CORE, 0),
    ]
    if settings.code_memory_mb is not None:
        limits.append((resource.RLIMIT_AS, settings.code_memory_mb * mib))
    if uid is not None:
        # Per uid: only meaningful when the code has a uid of its own.
        limits.append((resource.RLIMIT_NPROC, settings.code_max_processes))
    # Only lower: a limit the sandbox already set lower stays.
    lowered = []
    for which, value in limits:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        lowered.append((which, value))
    return lowered


def _child_setup(limits: list[tuple[int, int]], uid: int | None) -> Callable[[], None]:
    def setup() -> None:
        # Runs in the child after fork, before exec. The OOM score first: raising it needs no
        # privilege, but the file is writable only before the uid switch.
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        # A server given ambient capabilities would pass them on through exec: clear them,
        # so the code starts with none (with no_new_privs, no file can grant any back).
        _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return setup


def _child_env(cwd: Path, program: str) -> dict[str, str]:
    """A fresh environment: nothing of the server's leaks, the interpreter's folder first on
    PATH so that `python` in a shell is the one with the document libraries."""
    bin_dirs = [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]
    if os.path.isabs(program):  # after the interpreter's: `/bin/sh` must not bring /bin first
        bin_dirs.insert(1, os.path.dirname(program))
    tmp = os.environ.get("TMPDIR", "/tmp")
    return {
        "PATH": ":".join(dict.fromkeys(bin_dirs)),
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "BUREAU_WORKSPACE": str(cwd),
    }


# -- workspace ownership ---------------------------------------------------------------------
def _check_reachable(cwd: Path, uid: int) -> None:
    for folder in [cwd, *cwd.parents]:
        st = folder.stat()
        if st.st_uid == uid or st.st_mode & stat.S_IXOTH:
            continue
        raise ToolFailure(
            FailureKind.code_runner_failed,
            f"code runs as uid {uid}, which cannot enter {folder} (mode "
            f"{stat.filemode(st.st_mode)}); the sandbox must make the workspace's parents "
            "searchable",
        )


def _grant_tree(root: Path, uid: int, gid: int) -> None:
    """Give `root`'s folders and single-link files to `uid` (so code running as it can write,
    and back to the agent after the run)."""
    for folder, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode) or st.st_uid == uid:
                continue
            if stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
                os.lchown(path, uid, gid)


# -- leftovers -------------------------------------------------------------------------------
def _proc_entry(pid: int) -> tuple[int, int, int, str] | None:
    """(pid, ppid, uid, state) of one process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        return pid, int(fields["PPid"]), int(fields["Uid"].split()[0]), fields["State"].split()[0]
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _proc_table() -> Iterator[tuple[int, int, int, str]]:
    """(pid, ppid, uid, state) of every visible process."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (row := _proc_entry(int(entry.name))) is not None:
            yield row


def _own_children(uid: int | None) -> tuple[set[int], bool]:
    """The server's children that are not the code's (what a sweep must leave alone), and
    whether any child is the code's."""
    me = os.getpid()
    children = [(p, owner) for p, ppid, owner, _ in _proc_table() if ppid == me]
    own = {p for p, owner in children if uid is None or owner != uid}
    return own, len(own) < len(children)


def _reread_ppids(table: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """`table` with each process read again whose parent is not in it.

    A scan of /proc is not a snapshot: a process read early may name a parent that exited
    before the scan reached it. The kernel re-parents children before their parent's entry
    goes, so reading such a process again gives its parent now (a subreaper: us). Parent 0
    (init, kernel threads) is never in the table and never changes, so it is not read again.
    """
    seen = {p for p, _, _, _ in table}
    return [
        (_proc_entry(row[0]) or row) if row[1] != 0 and row[1] not in seen else row for row in table
    ]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


SWEEP_S = 10.0


def _sweep(known_children: set[int], uid: int | None) -> None:
    """Kill what the run left: new children of ours (re-parented orphans) and their trees."""
    me = os.getpid()
    # Until nothing is left, for a few seconds at most: a fork bomb on a loaded machine can
    # outlast any fixed number of passes, and what it leaves would hold the code uid's process
    # limit for every later run.
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        table = _reread_ppids(list(_proc_table()))
        doomed = {p for p, ppid, _, _ in table if ppid == me and p not in known_children}
        grew = True
        while grew:
            grew = False
            for p, ppid, _, _ in table:
                if ppid in doomed and p not in doomed:
                    doomed.add(p)
                    grew = True
        # With a code uid, only its processes are touched: nothing the code starts can change
        # its uid, and the server's other children (if any) are left alone.
        targets = [
            (p, ppid, state)
            for p, ppid, owner, state in table
            if p in doomed and (uid is None or owner == uid)
        ]
        for p, _, state in targets:
            if state != "Z":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
        for p, ppid, _ in targets:
            if ppid == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(p, os.WNOHANG)
        if not targets:
            return
        time.sleep(0.005)


def _join_head_tail(head: bytes, tail: bytes, size: int, half: int) -> str:
    # Cut at line ends when one is close, so the kept lines are whole.
    end = head.rfind(b"\n", half * 4 // 5)
    head = head[: end + 1] if end >= 0 else head
    start = tail.find(b"\n", 0, half // 5)
    tail = tail[start + 1 :] if start >= 0 else tail
    cut = size - len(head) - len(tail)
    text = head.decode("utf-8", errors="replace")
    if not text.endswith("\n"):
        text += "\n"
    note = f"[... {cut:,} of {size:,} bytes cut here ...]"
    return f"{text}{note}\n{tail.decode('utf-8', errors='replace')}"
