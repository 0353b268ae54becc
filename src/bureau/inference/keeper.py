"""Keeps an engine server's process group from outliving the process that launched it.

Run as a script (`python -I -S keeper.py ARGV...`, no imports beyond the standard library)
by `bureau.inference.launch.ManagedServer`, as the leader of a new process group: it runs
ARGV as its child in that group and waits. Its stdin is the read end of a pipe whose write end
only the owner holds, so when the owner dies, however it dies (SIGKILL from `ray.kill`, a crash,
a worker thread that exits), the pipe reads end-of-file; the keeper's parent changing says the
same. The keeper then ends the whole group: SIGTERM, then SIGKILL after `GRACE_S`. vLLM's
API server forks its engine core and workers into the group, so they go too. When the child
exits by itself, the keeper kills what it left in the group and exits with its status, so the
owner sees the server's own exit code. As group leader for the group's whole life, the keeper
also keeps the group id from being reused while anything of the group could still run.

When the environment names a scratch folder (`BUREAU_SERVER_SCRATCH`: the server's log, sockets
and temporary files) and the owner dies, the keeper removes it once the group is gone (a live
owner removes it itself, after reading the log).

The owner stops a server by signalling the group (the keeper ignores SIGTERM and waits for
its child like everyone else's parent would), then SIGKILL.

The server dies with the keeper (Linux's parent-death signal, SIGKILL): a keeper killed during
its grace period, as Ray's raylet kills what a dead worker left behind, would otherwise leave
an API server whose graceful shutdown hangs without its engine core, orphaned, holding its port
and memory. (Seen once after a 20-step run on two vLLM engines ended.)
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import time

GRACE_S = 10.0
POLL_S = 0.2


def _others_in_group() -> list[int]:
    group, me = os.getpgid(0), os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # fields after the name: state, ppid, pgrp, ...
            found.append(int(name))
    return found


def _kill_others(signum: int) -> None:
    for pid in _others_in_group():
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def _reap(child: int) -> int | None:
    """The child's exit status if it has exited (others of the group are reaped too)."""
    status = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status if status is not None else 0
        if pid == 0:
            return status
        if pid == child:
            status = os.waitstatus_to_exitcode(code)


def _end_group(child: int) -> None:
    _kill_others(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and _others_in_group():
        _reap(child)
        time.sleep(POLL_S)
    _kill_others(signal.SIGKILL)
    _reap(child)


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when `parent` dies (kept across exec; Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not fatal: the keeper's own watch still ends the group
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _remove_scratch() -> None:
    scratch = os.environ.get("BUREAU_SERVER_SCRATCH")
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: keeper.py ARGV...", file=sys.stderr)
        return 2
    owner = os.getppid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the owner's stop signals the whole group
    keeper = os.getpid()
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent(keeper)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    while True:
        status = _reap(child)
        if status is not None:
            _kill_others(signal.SIGKILL)  # what the server left behind in its group
            return 128 - status if status < 0 else status
        readable, _, _ = select.select([0], [], [], POLL_S)
        if (readable and not os.read(0, 4096)) or os.getppid() != owner:
            _end_group(child)
            _remove_scratch()  # nobody else will: the owner is gone
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
