"""A fork server for sandboxed Python servers: import once, fork a ready process per sandbox.

Every trial's MCP tool server is a Python process that imports the MCP SDK (about 1.1 s of CPU
for its pydantic models alone) and holds about 65 MiB of heap that is the same in every copy.
Started with `exec` in each sandbox, every trial pays both. The zygote is one process, started
once per runtime, that has imported those modules; for each sandbox it forks a child that joins
the sandbox and runs the module. The child shares the zygote's pages copy-on-write (they are
frozen out of the garbage collector's reach, so a collection does not dirty them), and starts
in milliseconds.

Joining a sandbox gives the child exactly what `bwrap` + `prlimit` + `setpriv` give a command
started the usual way (`LocalSandbox.wrap` with `tool_server=True`):

1. The sandbox runs a *holder*: the usual bwrap command (its own mount, pid, net, ipc and uts
   namespaces, seccomp filter, the sandbox's uid without capabilities) running `cat` on a pipe.
   Its bwrap init is the `ns_pid` of the request.
2. The zygote forks an intermediate process, which joins the sandbox's cgroups and then its
   namespaces (`setns`, mount last), changes to the working directory inside, and forks the
   child, which is thereby born in the sandbox's pid namespace; the intermediate exits.
3. The child starts a session, lowers the rlimits, keeps in its bounding set only the
   capabilities asked for, switches to the sandbox's uid and gid with no supplementary groups,
   holds exactly those capabilities (effective, permitted, inheritable and ambient, as
   `setpriv --ambient-caps` does), sets `no_new_privs`, installs the same seccomp filter, closes
   every descriptor but its stdio and the holder's pipe, replaces its environment, and runs the
   module as `python -P -m module argv` would.
4. The holder reads the pipe whose only writer is the child: when the child dies, the holder
   exits, and with it bwrap, so the process the host sees (`proc.poll()`) ends when the server
   ends. Killing the holder's pid 1 tears down the pid namespace and the child with it. When
   the intermediate exits, the kernel re-parents the child to the zygote, a child subreaper,
   which reaps it the moment it ends (the machine's init might take seconds, and the holder's
   namespace is not torn down until the child is reaped).

What the child inherits from the zygote is only memory that holds no secret: the zygote starts
with the sandbox's environment (never the host's), imports modules, and receives requests that
carry argv, environment, paths and ids of sandboxes. It keeps no thread, so `fork` is safe.

Protocol, over a SOCK_SEQPACKET socket pair: a request is one JSON message with four descriptors
(the child's stdin, stdout, stderr and the holder's pipe); the answer is `{"pid": N}` (the
child's pid on the host) or `{"error": "..."}`.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import resource
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

CAPS = {"chown": 0, "dac_override": 1, "fowner": 3, "kill": 5, "setgid": 6, "setuid": 7}
"""The capabilities a child may keep, by their kernel numbers."""
NAMESPACES = ("ipc", "uts", "net", "pid", "mnt")
"""Joined in this order: the mount namespace last, since /proc paths resolve through it."""
_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
}
_PR_SET_KEEPCAPS, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 8, 24, 38
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 2, 4
_CAP_VERSION_3 = 0x20080522
_MAX_MESSAGE = 1 << 20
_READY_TIMEOUT_S = 20.0


# -- the zygote process ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """`python -P -m bureau.sandbox.zygote FD MODULE...`: import the modules and those each
    lists in its `ZYGOTE_PRELOAD`, run each one's `zygote_warm()` if it has one, then serve
    requests until the socket closes."""
    args = list(sys.argv[1:] if argv is None else argv)
    sock = socket.socket(fileno=int(args[0]))
    for module in args[1:]:
        for name in [module, *getattr(importlib.import_module(module), "ZYGOTE_PRELOAD", ())]:
            importlib.import_module(name)
        warm = getattr(sys.modules[module], "zygote_warm", None)
        if warm is not None:
            warm()
    # Objects that exist now are never collected: a collection in a child then leaves the
    # pages they share with the zygote untouched.
    gc.collect()
    gc.freeze()
    # Tool servers outlive the intermediate that forked them and are re-parented here.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    sock.send(b"ready")
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            _reap()
        if sock.fileno() not in readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 4)
        except OSError:
            return
        if not message:
            return
        try:
            answer = _fork(json.loads(message), fds, sock)
        except Exception as exc:  # a bad request is the requester's error, not the zygote's end
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        sock.send(json.dumps(answer).encode())


def _reap() -> None:
    """Reap every child that has ended: tool servers, and intermediates already waited for."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork(request: dict[str, Any], fds: list[int], sock: socket.socket) -> dict[str, Any]:
    if len(fds) != 4:
        raise ValueError(f"expected 4 descriptors, got {len(fds)}")
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(report_r)
            sock.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _intermediate(request, fds, report_w)
        except BaseException as exc:
            code = 1
            with contextlib.suppress(OSError):
                os.write(report_w, f"error {type(exc).__name__}: {exc}\n".encode())
        os._exit(code)
    os.close(report_w)
    try:
        report = _read_report(report_r, time.monotonic() + _READY_TIMEOUT_S)
    finally:
        os.close(report_r)
        os.waitpid(pid, 0)
    lines = report.splitlines()
    errors = [line[6:] for line in lines if line.startswith("error ")]
    if errors:
        return {"error": errors[0]}
    pids = [int(line[4:]) for line in lines if line.startswith("pid ")]
    if not pids or "ready" not in lines:
        return {"error": f"the child did not start: {report.strip()!r}"}
    return {"pid": pids[0]}


def _read_report(fd: int, deadline: float) -> str:
    chunks = []
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            break
        data = os.read(fd, 4096)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def _intermediate(request: dict[str, Any], fds: list[int], report_w: int) -> None:
    for group in request.get("cgroups", []):
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    ns_pid = int(request["ns_pid"])
    handles = [os.open(f"/proc/{ns_pid}/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC) for ns in NAMESPACES]
    for handle in handles:
        _setns(handle)
        os.close(handle)
    os.chdir(request["cwd"])
    pid = os.fork()
    if pid:
        os.write(report_w, f"pid {pid}\n".encode())  # the child's pid on the host
        return
    try:
        _become(request, fds, report_w)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.write(report_w, f"error {type(exc).__name__}: {exc}\n".encode())
        os._exit(1)
    code = _run(request["module"], request["argv"])
    os._exit(code)


def _become(request: dict[str, Any], fds: list[int], report_w: int) -> None:
    """Steps 3 of the module docstring, in the order the kernel requires."""
    os.setsid()
    for name, value in request.get("rlimits", {}).items():
        kind = _RLIMITS[name]
        _, hard = resource.getrlimit(kind)
        value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        resource.setrlimit(kind, (value, value))
    keep = [CAPS[name] for name in request.get("caps", [])]
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep:
            _prctl(_PR_CAPBSET_DROP, cap)
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    _prctl(_PR_SET_KEEPCAPS, 1)
    uid, gid = int(request["uid"]), int(request["gid"])
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _capset(keep)
    for cap in keep:
        _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, cap)
    _prctl(_PR_SET_KEEPCAPS, 0)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if request.get("seccomp"):
        _seccomp(bytes.fromhex(request["seccomp"]))
    stdin, stdout, stderr, life = fds
    for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(fd, target)
    moved = os.dup(life)  # above 2, and not inherited by what the server executes
    os.set_inheritable(moved, False)
    os.write(report_w, b"ready\n")
    keep_fds = {0, 1, 2, moved}
    for fd in _open_fds():
        if fd not in keep_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    import tempfile

    tempfile.tempdir = None


def _open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


def _run(module: str, argv: Sequence[str]) -> int:
    """Run `module` as `python -m module argv` would, and return its exit status."""
    sys.argv = [module, *argv]
    # The standard streams the zygote had point at descriptors now replaced; reopen them.
    sys.stdin = open(0, encoding="utf-8", errors="strict", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


# -- the kernel calls Python 3.11 lacks -----------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(
        _libc.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ),
        f"prctl({option}, {arg})",
    )  # fmt: skip


def _setns(fd: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(0)), "setns")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _capset(caps: Sequence[int]) -> None:
    mask = [0, 0]
    for cap in caps:
        mask[cap // 32] |= 1 << (cap % 32)
    data = (_CapData * 2)(*[_CapData(m, m, m) for m in mask])
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(program: bytes) -> None:
    if len(program) % 8:
        raise ValueError("a seccomp program is a whole number of 8-byte instructions")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog))


# -- the host side --------------------------------------------------------------------------


class ZygoteError(RuntimeError):
    """The zygote could not fork a child into the sandbox."""


class Zygote:
    """One zygote process that has imported `modules`, started on first use.

    `fork` is thread-safe; a zygote that died is started again on the next request.
    """

    def __init__(
        self, python: str, modules: Sequence[str], env: Mapping[str, str], *, timeout_s: float = 60
    ) -> None:
        self.python, self.modules, self.env = python, list(modules), dict(env)
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [self.python, "-P", "-m", __name__, str(theirs.fileno()), *self.modules],
                env=self.env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        ours.settimeout(self.timeout_s)
        try:
            hello = ours.recv(16)
        except OSError as exc:
            self._stop()
            raise ZygoteError(f"the zygote did not start: {exc}") from exc
        if hello != b"ready":
            self._stop()
            raise ZygoteError(f"the zygote did not start (exit {self._proc.poll()})")
        self._sock = ours
        return ours

    def fork(self, request: dict[str, Any], fds: Sequence[int]) -> int:
        """Fork a child for `request` (see `main`) with `fds`; its host pid."""
        with self._lock:
            sock = self._sock
            if sock is None or self._proc is None or self._proc.poll() is not None:
                self._stop()
                sock = self._start()
            try:
                socket.send_fds(sock, [json.dumps(request).encode()], list(fds))
                answer = json.loads(sock.recv(_MAX_MESSAGE) or b'{"error": "zygote exited"}')
            except (OSError, ValueError) as exc:
                self._stop()
                raise ZygoteError(f"the zygote failed: {exc}") from exc
        if "error" in answer:
            raise ZygoteError(answer["error"])
        return int(answer["pid"])

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._stop()


if __name__ == "__main__":
    main()
