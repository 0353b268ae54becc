"""Run one command to completion with a deadline and bounded output capture.

A sandboxed command may print without end (`yes`, `cat /dev/zero`) or never exit. Output is
drained continuously, so a chatty command never blocks on a full pipe, but only the first and
last `cap_bytes / 2` of each stream are kept, with a note of how much was cut in between. At the
deadline the caller's `kill` ends the whole command (for bubblewrap: `BwrapProcess.kill`, which
ends the command's pid namespace); `wait_for_namespace_end` then waits for that teardown, so
that nothing of a killed command still runs when `exec` returns.

A bubblewrap command is two processes on the host: bwrap, our child, and the command it forks
as pid 1 of a new pid namespace (`--as-pid-1`). Killing bwrap first would orphan that pid 1 to
the machine's init, which reaps it when it gets to it (seconds, on some machines). Killing pid 1
first lets the kernel end the namespace and bwrap reap its child and exit: every process is
reaped by its own parent, at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from bureau.sandbox.base import ExecResult

DEFAULT_CAP_BYTES = 4 * 1024 * 1024
_KILL_GRACE_S = 5.0


class CappedBuffer:
    """Keeps the head and the tail of a byte stream, and counts what it dropped."""

    def __init__(self, cap_bytes: int) -> None:
        self.half = max(1, cap_bytes // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        if len(self.tail) > 2 * self.half:
            cut = len(self.tail) - self.half
            self.dropped += cut
            del self.tail[:cut]

    def text(self) -> str:
        tail = self.tail
        if len(tail) > self.half:
            self.dropped += len(tail) - self.half
            tail = tail[-self.half :]
            self.tail = bytearray(tail)
        head = self.head.decode("utf-8", errors="replace")
        rest = bytes(tail).decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped} bytes cut ...]\n{rest}"
        return head + rest


def run_captured(
    proc: subprocess.Popen[bytes],
    *,
    timeout_s: float,
    kill: Callable[[], None],
    stdin: bytes | None = None,
    cap_bytes: int = DEFAULT_CAP_BYTES,
) -> ExecResult:
    """Wait for `proc` (started with stdout and stderr piped) until `timeout_s`, then `kill`."""
    started = time.monotonic()
    deadline = started + timeout_s
    if stdin is not None and proc.stdin is not None:
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    buffers = {"stdout": CappedBuffer(cap_bytes), "stderr": CappedBuffer(cap_bytes)}
    selector = selectors.DefaultSelector()
    for name in buffers:
        stream = getattr(proc, name)
        if stream is not None:
            selector.register(stream, selectors.EVENT_READ, name)
    timed_out = False
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                if not timed_out:
                    timed_out = True
                    kill()
                    # After the kill only the pipes' leftovers remain; give them a short while.
                    deadline = now + _KILL_GRACE_S
                else:
                    break
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                data = os.read(key.fd, 65536)
                if data:
                    buffers[key.data].add(data)
                else:
                    selector.unregister(key.fileobj)
        remaining = deadline - time.monotonic()
        try:
            returncode = proc.wait(timeout=max(0.0, remaining))
        except subprocess.TimeoutExpired:
            timed_out = True
            kill()
            returncode = proc.wait(timeout=_KILL_GRACE_S)
    finally:
        selector.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return ExecResult(
        returncode=returncode,
        stdout=buffers["stdout"].text(),
        stderr=buffers["stderr"].text(),
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
    )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group that `proc` leads (it was started with start_new_session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    # A command that exits without reading its input closes the pipe under us: not an error.
    with contextlib.suppress(OSError, ValueError):
        pipe.write(data)
        pipe.close()


class BwrapStatus:
    """What bwrap writes to `--json-status-fd`: `{"child-pid": N}` once the command's pid 1
    exists (N is its host pid), `{"exit-code": N}` when it ended. Owns and closes `fd`."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.text = ""
        os.set_blocking(fd, False)

    def _read(self) -> bool:
        """Take what the pipe holds now; False at its end."""
        while self.fd is not None:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return True
            if not data:
                return False
            self.text += data.decode(errors="replace")
        return False

    def child_pid(self, wait_s: float = 1.0) -> int | None:
        """The host pid of the command's pid 1, waiting up to `wait_s` for bwrap to say it."""
        deadline = time.monotonic() + wait_s
        while True:
            match = re.search(r'"child-pid":\s*(\d+)', self.text)
            if match is not None:
                return int(match.group(1))
            if not self._read() or time.monotonic() >= deadline:
                if match := re.search(r'"child-pid":\s*(\d+)', self.text):
                    return int(match.group(1))
                return None
            time.sleep(0.002)

    def final(self) -> str:
        """Everything bwrap wrote, once it has exited (its end of the pipe is closed)."""
        self._read()
        self.close()
        return self.text

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class BwrapProcess(subprocess.Popen[bytes]):
    """A bwrap command started with `start_new_session` and a `status`: `kill` ends its pid 1,
    so that bwrap reaps it (see the module docstring); the process group goes only when that
    is not possible or did not work (a second `kill`)."""

    status: BwrapStatus | None = None
    _kills = 0

    def kill(self) -> None:
        if self.poll() is not None:
            return
        self._kills += 1
        child = self.status.child_pid() if self.status is not None and self._kills == 1 else None
        if child is None or not signal_child(child, self.pid):
            kill_group(self)

    terminate = kill


def signal_child(pid: int, parent: int, signum: int = signal.SIGKILL) -> bool:
    """Send `signum` to `pid` if it is still a child of `parent`; a pidfd pins the process
    while its parent is checked (the number may have gone to another process since)."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if int(stat.rsplit(")", 1)[1].split()[1]) != parent:
            return False
        signal.pidfd_send_signal(handle, signum)
        return True
    except (OSError, ValueError, IndexError):
        return False
    finally:
        os.close(handle)


def read_line(fd: int, *, timeout_s: float) -> str:
    """One line from a pipe (or what came before EOF), waiting at most `timeout_s`; the pipe
    stays open. TimeoutError if nothing whole came in time."""
    deadline = time.monotonic() + timeout_s
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise TimeoutError(f"no line within {timeout_s} s (got {data[:200]!r})")
            chunk = os.read(fd, 1)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace")


def read_available(fd: int) -> str:
    """Whatever a pipe holds now, without waiting for more; closes `fd`."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def wait_for_namespace_end(status: str, timeout_s: float = 5.0) -> None:
    """After a kill, wait until the command's pid namespace is torn down.

    Killing the outer bwrap only starts the teardown: its init (`child-pid` in the status) gets
    its parent-death signal and the kernel then kills and reaps everything in the namespace. The
    init is gone, or a zombie, once nothing of the command is left.
    """
    match = re.search(r'"child-pid":\s*(\d+)', status)
    if match is None:
        return
    stat_file = Path(f"/proc/{match.group(1)}/stat")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = stat_file.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.005)
