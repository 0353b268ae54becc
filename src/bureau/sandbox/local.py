"""The local runtime: one bubblewrap invocation per command over a per-trial host folder.

A sandbox is a folder (see `folder`) plus an identity: a uid of its own (`UidLease`) and, where
the machine allows, a tmpfs the size of its storage limit (`limits`) and cgroups for its memory,
process count and CPU share (`cgroups`). Nothing runs between commands. Each `exec` or `spawn`
starts bubblewrap afresh, which builds a new mount, pid, net, ipc and uts namespace for that one
command:

- a read-only root built from pieces: /usr (and the /bin, /lib, /sbin links into it), a few
  /etc files (never shadow or resolv.conf), the Python installation and the project's venv,
  and of the `bureau` package only what runs inside (`SANDBOX_PACKAGE_ENTRIES`, so an agent
  cannot read the graders or the world generator); no /root home, no /sys, no other trials;
- private /proc and /dev, no network but a loopback of its own;
- the trial's folders at the task's workdir, /logs/agent, /logs/verifier, /tests, /solution and
  /tmp, each bound or not, writable or not, by the command's phase (the table in `base`).

The command's pid 1 (bwrap's `--as-pid-1`: no reaper of bwrap's own) joins the sandbox's
cgroups before it runs (`cgroups`: bwrap waits on `--block-fd` meanwhile). Inside, a shell sets
the SysV IPC limits of the command's own ipc namespace (shared memory at most `storage_mb`, 64
segments, 16 message queues; `limits.ipc_limits`), `prlimit` lowers the rlimits and `setpriv`
drops to the sandbox's uid with no
capabilities, an empty bounding set and `no_new_privs` before the command runs. Uid 0 without
capabilities is not enough: root may still write /proc/sys and /proc/sysrq-trigger by file
permission alone. A seccomp filter (`seccomp`) keeps the command from making user namespaces,
in which it could mount a tmpfs that no storage limit sees, and memfds, memory that no limit
counts; POSIX shared memory (/dev/shm) is the sandbox's /tmp folder, inside the storage limit.
When the command's pid 1 dies
(its end, a timeout, `stop`), the kernel kills its whole pid namespace, daemons and `setsid`
escapees included, and bwrap reaps it and exits (`process.BwrapProcess`); when this Python
process dies, `--die-with-parent` does the same. `stop` ends all of a sandbox's processes at
once through its cgroup (`cgroup.kill` or the freezer). A spawned process dies
with the thread that spawned it (bwrap's parent-death signal follows the thread), so spawn
long-running servers from a long-lived thread.

The tool server is the exception to "bwrap afresh" when running as root: `spawn` with
`tool_server=True` of `python3 -P -m MODULE` starts a holder in a fresh bwrap command as above,
and the runtime's zygote (`bureau.sandbox.zygote`) forks the server into the holder's
namespaces with the same uid, capabilities, rlimits, cgroups and seccomp filter. The server then
shares the zygote's imported modules (25-36 MiB of PSS per warm sandbox instead of 82-85) and
starts without paying the imports again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import posixpath
import secrets
import shutil
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox import cgroups, cleanup, seccomp
from bureau.sandbox.base import (
    ExecResult,
    Limits,
    Phase,
    Runtime,
    Sandbox,
    inside_path,
    path_env,
)
from bureau.sandbox.bwrap import (
    SYSTEM_PATH,
    check_workdir,
    default_root,
    find_tool,
    sandbox_python,
    shadowed_args,
    system_args,
)
from bureau.sandbox.cgroups import CgroupSupport, SandboxCgroups, domain_of
from bureau.sandbox.folder import (
    TMP_FOLDERS,
    TMP_MODE,
    TrialFolder,
    normalize_inside,
    phase_mounts,
    provide_image,
    task_workdir,
    verifier_extra,
    verifier_workdir,
)
from bureau.sandbox.limits import (
    CODE_UID_OFFSET,
    MIB,
    MemoryWatch,
    ProcessInfo,
    StorageWatcher,
    UidLease,
    descendants,
    ipc_limit_argv,
    kill_uid,
    mount_tmpfs,
    rlimit_argv,
    rlimits,
    unmount,
)
from bureau.sandbox.process import (
    DEFAULT_CAP_BYTES,
    BwrapProcess,
    BwrapStatus,
    kill_group,
    read_line,
    run_captured,
    wait_for_namespace_end,
)
from bureau.sandbox.zygote import Zygote, ZygoteError
from bureau.tasks.taskdir import TaskDir

__all__ = ["LocalRuntime", "LocalSandbox", "sandbox_python"]

log = logging.getLogger(__name__)


# The tool server's capabilities (see `wrap`); its code uid is CODE_UID_OFFSET above the
# sandbox's uid (sandbox uids lie in 1.1M-1.9M, so code uids in 2.1M-2.9M never collide).
TOOL_SERVER_CAPS = ("chown", "dac_override", "fowner", "kill", "setgid", "setuid")
_HOLDER_TIMEOUT_S = 30.0
VERIFIER_FOLDERS = ("vtmp", "logs/verifier", "tests")
VERIFIER_STORAGE_MB = 256
VERIFIER_WRITABLE = ("vtmp", "logs/verifier")  # what the verifier phase writes (tests: the host)


class LocalRuntime(Runtime):
    """Sandboxes built with bubblewrap on this machine; see the module docstring."""

    name = "local"
    supports_separate_verifier = True

    def __init__(
        self,
        root: Path | None = None,
        *,
        limits: Limits | None = None,
        bwrap: str | None = None,
        storage: str = "auto",
        output_cap_bytes: int = DEFAULT_CAP_BYTES,
        zygote: bool | None = None,
        use_cgroups: bool = True,
    ) -> None:
        """`limits` overrides every task's; `storage` is "auto", "tmpfs" or "watch"; `zygote`
        (default: when running as root) forks tool servers from a process that has imported
        them (`bureau.sandbox.zygote`) instead of starting Python in each sandbox;
        `use_cgroups=False` leaves the machine's cgroups alone (memory is then polled)."""
        self.bwrap = find_tool("bwrap", bwrap)
        self.prlimit = find_tool("prlimit")
        self.setpriv = find_tool("setpriv")
        self.root = (root or default_root()).absolute()
        self.limits = limits
        self.output_cap_bytes = output_cap_bytes
        self.privileged = os.geteuid() == 0
        self.seccomp = seccomp.program()
        if storage not in ("auto", "tmpfs", "watch"):
            raise ValueError(f"storage must be auto, tmpfs or watch, not {storage!r}")
        self.storage = storage
        self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
        cleanup.sweep_stale(self.root, _remove_stale)
        if self.privileged and use_cgroups:
            self.cgroups = cgroups.support()
        else:
            why = "not running as root" if not self.privileged else "turned off"
            self.cgroups = CgroupSupport.none(why)
        self.use_zygote = self.privileged if zygote is None else zygote
        if self.use_zygote and not self.privileged:
            raise ValueError("the zygote joins sandboxes' namespaces, which needs root")
        self._zygotes: dict[str, Zygote] = {}
        self._zygote_lock = threading.Lock()

    @property
    def enforcement(self) -> str:
        """How this runtime's sandboxes are held to their limits, in one line."""
        memory = (
            f"memory by {self.cgroups.memory.label} (kernel)"
            if self.cgroups.memory
            else f"memory by a polled watch ({self.cgroups.missing.get('memory', '?')})"
        )
        if self.storage == "watch" or not self.privileged:
            storage = "storage by a polled watch"
        else:
            storage = "storage by tmpfs"
        rest = self.cgroups.describe().split("; ", 1)[1]
        return f"{memory}; {rest}; {storage}"

    def zygote_for(self, module: str) -> Zygote:
        """The zygote that has imported `module` (and what it lists in `ZYGOTE_PRELOAD`)."""
        with self._zygote_lock:
            if module not in self._zygotes:
                env = {"PATH": f"{Path(sys.prefix) / 'bin'}:{SYSTEM_PATH}", "LANG": "C.UTF-8"}
                env |= {"HOME": "/", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
                self._zygotes[module] = Zygote(sandbox_python(), [module], env)
            return self._zygotes[module]

    def close(self) -> None:
        with self._zygote_lock:
            zygotes, self._zygotes = list(self._zygotes.values()), {}
        for zygote in zygotes:
            zygote.close()

    def start(self, task: TaskDir, *, timeout_s: float, verifier: bool = False) -> LocalSandbox:
        deadline = time.monotonic() + timeout_s
        workdir = check_workdir(verifier_workdir(task) if verifier else task_workdir(task))
        extra = verifier_extra(task) if verifier else ()
        for inside in extra:
            check_workdir(inside)
        limits = self.limits or Limits.from_task(task)
        sandbox = LocalSandbox(self, task, workdir, limits, extra)
        try:
            sandbox._setup(task, deadline, verifier)
        except BaseException as exc:
            sandbox.stop()
            if isinstance(exc, TimeoutError):
                raise BureauSystemError(
                    SystemErrorKind.sandbox_start_timeout, f"not ready in {timeout_s} s: {exc}"
                ) from exc
            if isinstance(exc, OSError):
                raise BureauSystemError(
                    SystemErrorKind.sandbox_start_failed, f"{type(exc).__name__}: {exc}"
                ) from exc
            raise
        return sandbox


def _empty(folder: Path) -> None:
    """Remove what `folder` holds (symlinks are removed, never followed)."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _python_module(cmd: Sequence[str]) -> tuple[str, list[str]] | None:
    """(module, args) when `cmd` is `python3 -P -m module args` with the sandbox's Python."""
    if len(cmd) >= 4 and cmd[0] in ("python3", sandbox_python()) and list(cmd[1:3]) == ["-P", "-m"]:
        return cmd[3], list(cmd[4:])
    return None


def _remove_stale(folder: Path, fields: dict[str, str]) -> None:
    if fields.get("cgroups"):
        cgroups.remove_stale(Path(p) for p in json.loads(fields["cgroups"]))
    uid = int(fields["uid"]) if fields.get("uid", "").isdigit() else None
    if uid is not None and UidLease.FIRST <= uid < UidLease.LAST:
        kill_uid(uid)
        kill_uid(uid + CODE_UID_OFFSET)
    if fields.get("mounted") == "1":
        unmount(folder)


class LocalSandbox(Sandbox):
    def __init__(
        self,
        runtime: LocalRuntime,
        task: TaskDir,
        workdir: str,
        limits: Limits,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.runtime, self.limits, self.workdir = runtime, limits, workdir
        self.id = f"sbx-{secrets.token_hex(6)}"
        self.path = runtime.root / self.id
        self._lease = UidLease() if runtime.privileged else None
        self.uid = self._lease.uid if self._lease else os.getuid()
        owner = (self.uid, self.uid) if self._lease else None
        self.folder = TrialFolder(self.path, workdir, owner, extra)
        self._procs: set[BwrapProcess] = set()
        self._lock = threading.RLock()
        self._stopped = False
        self._mounted = False
        self._cgroups: SandboxCgroups | None = None
        self._watcher: StorageWatcher | None = None
        self._prefix: list[str] = []
        self._image_env: dict[str, str] = {}
        self._watch_kills = 0

    def _setup(self, task: TaskDir, deadline: float, verifier: bool = False) -> None:
        self.path.mkdir(mode=0o700)
        if self.runtime.privileged and self.runtime.storage != "watch":
            self._mounted = mount_tmpfs(self.path, size_mb=self.limits.storage_mb)
            if not self._mounted and self.runtime.storage == "tmpfs":
                raise OSError(f"cannot mount a tmpfs on {self.path}")
        self._write_stamp()
        cleanup.register(self)
        support = self.runtime.cgroups
        if support.hierarchies():
            # Each memory domain may also fill the tmpfs it can write (see `cgroups`).
            writable = self.limits.storage_mb if self._mounted else 0
            own = len(VERIFIER_WRITABLE) * VERIFIER_STORAGE_MB if self._mounted else 0
            verifier_mb = writable + own
            self._cgroups = SandboxCgroups(
                support,
                self.id,
                max_processes=self.limits.max_processes,
                cpus=self.limits.cpus,
                memory_bytes={
                    "agent": (self.limits.memory_mb + writable) * MIB,
                    "verifier": (self.limits.memory_mb + verifier_mb) * MIB,
                },
            )
            self._write_stamp()
        self.folder.create()
        if self._mounted:
            # The verifier's folders get storage of their own: an agent that fills its disk or
            # its inodes must not keep the tests from arriving or the reward from being
            # written (a system error, masked from training, instead of the agent's 0).
            for sub in VERIFIER_FOLDERS:
                target = self.folder.host_dir(sub)
                mode = TMP_MODE if sub in TMP_FOLDERS else 0o755
                if mount_tmpfs(target, size_mb=VERIFIER_STORAGE_MB, mode=mode) and self._lease:
                    os.chown(target, self.uid, self.uid)
        (self.path / "etc").mkdir()
        (self.path / "etc" / "passwd").write_text(
            f"root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:{self.uid}:{self.uid}::/tmp:/bin/bash\n"
        )
        (self.path / "etc" / "group").write_text(f"root:x:0:\nagent:x:{self.uid}:\n")
        if not self._mounted:
            self._watcher = StorageWatcher(self.path, self.limits.storage_mb, self._kill_all)
        if self._cgroups is None or not self._cgroups.enforces_memory:
            MemoryWatch.shared().register(
                self.id,
                self.limits.memory_mb,
                self._own_processes,
                self._memory_killed,
                first_uid=self.code_uid if self._lease is not None else None,
                uids=frozenset((self.uid, self.code_uid)) if self._lease is not None else None,
            )
        self._prefix = system_args(self.workdir, self.folder.extra)
        self._image_env = provide_image(self.folder, task, deadline, verifier=verifier)
        if time.monotonic() > deadline:
            raise TimeoutError("copying the workspace took too long")

    def _write_stamp(self) -> None:
        dirs = [str(d) for d in self._cgroups.dirs] if self._cgroups else []
        stamp = f"owner={cleanup.owner_stamp()}\nuid={self.uid}\nmounted={int(self._mounted)}\n"
        stamp += f"cgroups={json.dumps(dirs)}\n"
        (self.path / cleanup.OWNER_FILE).write_text(stamp)

    @property
    def memory_kills(self) -> int:
        """Processes killed because the sandbox's processes together held over their limit:
        by the kernel's OOM killer in its memory cgroup, or by the polled watch."""
        return self._watch_kills + (self._cgroups.oom_kills() if self._cgroups else 0)

    def memory_peak_bytes(self, domain: str = "agent") -> int | None:
        """The most the memory cgroup of `domain` ("agent" or "verifier") held at once."""
        return self._cgroups.peak_bytes(domain) if self._cgroups else None

    def _own_processes(self, table: dict[int, ProcessInfo]) -> set[int]:
        """This sandbox's processes: those of its two uids, or (sharing the host's uid)
        everything below the processes it started."""
        if self._lease is not None:
            uids = (self.uid, self.code_uid)
            return {pid for pid, info in table.items() if info.uid in uids}
        with self._lock:
            roots = {proc.pid for proc in self._procs}
        return descendants(table, roots)

    def _memory_killed(self, pid: int, size: int) -> None:
        self._watch_kills += 1
        log.info("%s: killed pid %d holding %d MiB (memory_mb %d)", self.id, pid, size >> 20,
                 self.limits.memory_mb)  # fmt: skip

    @property
    def code_uid(self) -> int:
        """The second uid, for agent code run by the tool server: unique as `uid` is."""
        return self.uid + CODE_UID_OFFSET

    # -- commands ---------------------------------------------------------------------------

    def wrap(
        self,
        cmd: Sequence[str],
        *,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        status_fd: int | None = None,
        seccomp_fd: int | None = None,
        tool_server: bool = False,
        block_fd: int | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The host argv and environment that run `cmd` in this sandbox.

        `seccomp_fd` must be a fresh pipe holding `seccomp.program()` (bwrap reads it to the
        end); `exec` and `spawn` make one for every command. `block_fd`: bwrap waits until it
        can read it before the command runs (`_start` moves the command into its cgroups).
        """
        if not cmd:
            raise ValueError("empty command")
        args = list(self._prefix)
        args += ["--ro-bind", str(self.path / "etc/passwd"), "/etc/passwd"]
        args += ["--ro-bind", str(self.path / "etc/group"), "/etc/group"]
        mounts = phase_mounts(phase, self.workdir, self.folder.extra)
        for mount in mounts:
            flag = "--bind" if mount.writable else "--ro-bind"
            args += [flag, str(self.folder.host_dir(mount.sub)), mount.inside]
            if mount.inside == "/tmp":
                args += ["--bind", str(self.folder.host_dir(mount.sub)), "/dev/shm"]
        args += shadowed_args([m.inside for m in mounts])
        args += ["--remount-ro", "/", "--unshare-pid", "--unshare-net", "--unshare-ipc"]
        args += ["--unshare-uts", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        args += ["--as-pid-1"]
        # A relative cwd is taken from the workdir, as a shell started there would.
        args += ["--chdir", normalize_inside(posixpath.join(self.workdir, cwd or "."))]
        if status_fd is not None:
            args += ["--json-status-fd", str(status_fd)]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if block_fd is not None:
            args += ["--block-fd", str(block_fd)]
        inner = rlimit_argv(self.limits, self.runtime.prlimit)
        extra_env: dict[str, str] = {}
        if self.runtime.privileged:
            inner = [*ipc_limit_argv(self.limits), *inner]
            inner += [self.runtime.setpriv, f"--reuid={self.uid}", f"--regid={self.uid}"]
            if tool_server:
                # Just the powers to run agent code as the sandbox's second uid and keep
                # serving files that code now owns; nothing else, and never more after exec.
                caps = ",".join(f"+{c}" for c in TOOL_SERVER_CAPS)
                inner += ["--clear-groups", f"--bounding-set=-all,{caps}"]
                inner += [f"--inh-caps=-all,{caps}", f"--ambient-caps=-all,{caps}"]
                extra_env["BUREAU_CODE_UID"] = str(self.code_uid)
            else:
                inner += ["--clear-groups", "--bounding-set=-all", "--inh-caps=-all"]
            inner += ["--no-new-privs", "--"]
        else:
            args.insert(0, "--unshare-user")
        argv = [self.runtime.bwrap, *args, "--", *inner, *cmd]
        return argv, self._env({**extra_env, **(env or {})})

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        threads = str(max(1, math.ceil(self.limits.cpus)))
        env = {
            "PATH": f"{Path(sys.prefix) / 'bin'}:{SYSTEM_PATH}",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "USER": "agent",
            "LOGNAME": "agent",
            "LANG": "C.UTF-8",
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            **self._image_env,
            **path_env(inside_path(self.workdir)),
        }
        env.update(extra or {})
        return env

    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout_s: float,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> ExecResult:
        self._require_running()
        if phase == "verifier":
            # Nothing the agent started may run alongside the verifier.
            self._kill_all()
        proc = self._start(cmd, phase, env, cwd, stdin is not None)
        try:
            done = run_captured(
                proc,
                timeout_s=timeout_s,
                kill=proc.kill,
                stdin=stdin.encode() if stdin is not None else None,
                cap_bytes=self.runtime.output_cap_bytes,
            )
        finally:
            with self._lock:
                self._procs.discard(proc)
        assert proc.status is not None
        status = proc.status.final()
        if done.timed_out:
            wait_for_namespace_end(status)
        stderr = done.stderr
        if self._watcher is not None and self._watcher.exceeded:
            stderr += f"\n[bureau] storage limit of {self.limits.storage_mb} MiB exceeded"
        elif not done.timed_out and '"exit-code"' not in status:
            what = "the sandbox was stopped" if self._stopped else "bubblewrap failed"
            raise BureauSystemError(
                SystemErrorKind.sandbox_crashed,
                f"{what} (exit {done.returncode}): {stderr.strip()[-2000:]}",
            )
        return dataclasses.replace(done, stderr=stderr)

    def spawn(
        self,
        cmd: Sequence[str],
        *,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        tool_server: bool = False,
    ) -> subprocess.Popen[bytes]:
        self._require_running()
        if tool_server and cwd is None:
            cwd = "/"  # outside the workspace: nothing the agent writes is in the server's cwd
        module = _python_module(cmd)
        if tool_server and module is not None and self.runtime.use_zygote:
            return self._spawn_forked(module[0], module[1], phase, env, cwd)
        return self._start(cmd, phase, env, cwd, True, tool_server=tool_server)

    def _spawn_forked(
        self,
        module: str,
        argv: Sequence[str],
        phase: Phase,
        env: Mapping[str, str] | None,
        cwd: str | None,
    ) -> subprocess.Popen[bytes]:
        """`python3 -P -m module argv` as the tool server, forked by the runtime's zygote into
        a holder started in this sandbox (see `bureau.sandbox.zygote`)."""
        ours: list[int] = []  # descriptors this process closes, whatever happens
        theirs: list[int] = []  # the child's ends, handed to the zygote

        def pipe() -> tuple[int, int]:
            r, w = os.pipe()
            ours.extend((r, w))
            return r, w

        try:
            ready_r, ready_w = pipe()
            life_r, life_w = pipe()
            in_r, in_w = pipe()
            out_r, out_w = pipe()
            err_r, err_w = pipe()
            theirs = [in_r, out_w, err_w, life_w]
            holder = ["/bin/sh", "-c", "echo ready && exec cat >/dev/null"]
            proc = self._start(holder, phase, None, cwd, False, stdio=(life_r, ready_w, err_w))
            for fd in (ready_w, life_r):
                os.close(fd)
                ours.remove(fd)
            try:
                assert proc.status is not None
                ns_pid = proc.status.child_pid(wait_s=_HOLDER_TIMEOUT_S)
                ready = read_line(ready_r, timeout_s=_HOLDER_TIMEOUT_S)
                if ns_pid is None or ready.strip() != "ready":
                    raise ZygoteError(f"the holder did not start: {proc.status.text!r} {ready!r}")
                request = {
                    "module": module,
                    "argv": list(argv),
                    "env": self._env({"BUREAU_CODE_UID": str(self.code_uid), **(env or {})}),
                    "cwd": normalize_inside(posixpath.join(self.workdir, cwd or ".")),
                    "ns_pid": ns_pid,
                    "cgroups": [str(d) for d in self._join_dirs(phase)],
                    "uid": self.uid,
                    "gid": self.uid,
                    "caps": list(TOOL_SERVER_CAPS),
                    "rlimits": rlimits(self.limits),
                    "seccomp": self.runtime.seccomp.hex() if self.runtime.seccomp else None,
                }
                self.runtime.zygote_for(module).fork(request, theirs)
            except (ZygoteError, OSError, TimeoutError) as exc:
                proc.kill()
                proc.wait()
                raise BureauSystemError(
                    SystemErrorKind.tool_server_failed, f"forking {module} into {self.id}: {exc}"
                ) from exc
            proc.stdin = os.fdopen(in_w, "wb")
            proc.stdout = os.fdopen(out_r, "rb")
            proc.stderr = os.fdopen(err_r, "rb")
            for fd in (in_w, out_r, err_r):
                ours.remove(fd)
            return proc
        finally:
            for fd in ours:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _join_dirs(self, phase: Phase) -> list[Path]:
        return self._cgroups.join_dirs(domain_of(phase)) if self._cgroups else []

    def _start(
        self,
        cmd: Sequence[str],
        phase: Phase,
        env: Mapping[str, str] | None,
        cwd: str | None,
        pipe_stdin: bool,
        tool_server: bool = False,
        stdio: tuple[int, int, int] | None = None,
    ) -> BwrapProcess:
        """Start `cmd` under bwrap, with bwrap's status pipe read into `proc.status`. `stdio`:
        descriptors for its stdin, stdout and stderr instead of pipes."""
        opened: list[int] = []
        try:
            status_r, status_w = os.pipe()
            opened += [status_r, status_w]
            pass_fds = [status_w]
            filter_r = None
            if self.runtime.seccomp is not None:
                filter_r, filter_w = os.pipe()
                opened.append(filter_r)
                os.write(filter_w, self.runtime.seccomp)
                os.close(filter_w)
                pass_fds.append(filter_r)
            block_w = None
            if self._cgroups is not None:
                block_r, block_w = os.pipe()
                opened += [block_r, block_w]
                pass_fds.append(block_r)
            argv, full_env = self.wrap(
                cmd,
                phase=phase,
                env=env,
                cwd=cwd,
                status_fd=status_w,
                seccomp_fd=filter_r,
                tool_server=tool_server,
                block_fd=pass_fds[-1] if block_w is not None else None,
            )
            if stdio is None:
                stdin: int = subprocess.PIPE if pipe_stdin else subprocess.DEVNULL
                streams = (stdin, subprocess.PIPE, subprocess.PIPE)
            else:
                streams = stdio
            try:
                proc = BwrapProcess(
                    argv, env=full_env, stdin=streams[0], stdout=streams[1], stderr=streams[2],
                    start_new_session=True, pass_fds=tuple(pass_fds),
                )  # fmt: skip
            except OSError as exc:
                raise BureauSystemError(
                    SystemErrorKind.sandbox_crashed, f"cannot start {argv[0]}: {exc}"
                ) from exc
            opened.remove(status_r)
            proc.status = BwrapStatus(status_r)
            weakref.finalize(proc, proc.status.close)
            for fd in pass_fds:  # bwrap's now: its end of the status pipe must close with it
                os.close(fd)
                opened.remove(fd)
            if block_w is not None:
                self._join(proc, domain_of(phase), block_w)
            with self._lock:
                self._procs = {p for p in self._procs if p.poll() is None}
                self._procs.add(proc)
            return proc
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _join(self, proc: BwrapProcess, domain: str, block_w: int) -> None:
        """Move the command's pid 1 into the sandbox's cgroups, then let bwrap run it."""
        assert proc.status is not None and self._cgroups is not None
        child = proc.status.child_pid(wait_s=_HOLDER_TIMEOUT_S)
        if child is not None:  # None: bwrap failed before it forked; its exit says why
            try:
                self._cgroups.join(child, domain)
            except OSError as exc:
                proc.kill()
                proc.wait()
                raise BureauSystemError(
                    SystemErrorKind.sandbox_crashed, f"joining the sandbox's cgroups: {exc}"
                ) from exc
        with contextlib.suppress(OSError):  # bwrap may be gone already
            os.write(block_w, b"x")

    def _require_running(self) -> None:
        if self._stopped:
            raise BureauSystemError(SystemErrorKind.sandbox_crashed, f"{self.id} is stopped")

    # -- files ------------------------------------------------------------------------------

    def upload(self, src: Path, dest: str) -> None:
        """Copy a host file to `dest`, or a folder's contents into `dest`.

        `dest` must lie under the workdir, /logs, /tests or /solution; anything else is an
        `upload_failed` error. A missing `src` is FileNotFoundError.
        """
        self._require_running()
        self.folder.copy_in(Path(src), dest)

    def download(self, src: str, dest: Path) -> None:
        """Copy a file to `dest`, or a folder's contents into `dest`; symlinks are skipped."""
        self._require_running()
        self.folder.copy_out(src, Path(dest))

    def host_path(self, inside: str) -> Path:
        """The host path behind an inside path (read it only once the sandbox is idle)."""
        root, parts = self.folder.resolve(inside)
        return root.joinpath(*parts)

    def begin_verification(self) -> None:
        """Before a verifier that runs in this sandbox after the agent (Harbor's phases): kill
        everything the agent started, and empty the verifier's own /tmp, its /tests and the
        reward files, so nothing of the agent's is where the verifier runs or reads."""
        self._require_running()
        self._kill_all()
        for sub in ("vtmp", "tests"):
            _empty(self.folder.host_dir(sub))
        for name in ("reward.txt", "reward.json"):
            with contextlib.suppress(FileNotFoundError):
                (self.folder.host_dir("logs/verifier") / name).unlink()

    # -- teardown ---------------------------------------------------------------------------

    def _kill_all(self) -> None:
        """End every process of the sandbox, then reap the bwrap commands that ran them.

        With a cgroup kill, the kernel ends them all at once (nothing can fork meanwhile);
        bwrap, outside the cgroup, then reaps its pid 1 and exits. Without, each command's
        pid 1 is killed, and the sandbox's uids are swept for what escaped into no command."""
        with self._lock:
            procs = list(self._procs)
        ended = self._cgroups is not None and self._cgroups.kill()
        if not ended:
            for proc in procs:
                proc.kill()
            if self._lease is not None:
                kill_uid(self.uid)
                kill_uid(self.code_uid)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)

    def stop(self) -> None:
        """Kill everything, unmount and remove the folder; each step is safe to repeat."""
        with self._lock:
            self._stopped = True
            MemoryWatch.shared().unregister(self.id)
            self._kill_all()
            if self._watcher is not None:
                self._watcher.stop()
            if self._mounted:
                unmount(self.path)
            shutil.rmtree(self.path, ignore_errors=True)
            if self._cgroups is not None:
                self._cgroups.remove()
            if self._lease is not None:
                self._lease.release()
            cleanup.unregister(self)
