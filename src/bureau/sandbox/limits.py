"""How a sandbox's `Limits` are enforced on this machine, and by which kernel mechanism.

| limit | mechanism | scope |
|---|---|---|
| memory_mb | RLIMIT_AS (address space) | each process |
| memory_mb, again | a memory cgroup, swap included (`cgroups`); else `MemoryWatch` | sandbox |
| max_processes | RLIMIT_NPROC of the sandbox's own uid, and the cgroup's `pids.max` | sandbox |
| cpu_time_s | RLIMIT_CPU | each process |
| max_file_mb | RLIMIT_FSIZE | each file written |
| storage_mb | a tmpfs of that size over the trial folder (root); else a watcher | sandbox |
| storage_mb, again | SysV shared memory (`shmall`) in the command's ipc namespace | command |
| cpus | the cgroup's CPU quota (`cpu.cfs_quota_us` or `cpu.max`) | sandbox |

Every sandbox runs as a uid of its own (see `UidLease`), so RLIMIT_NPROC, which the kernel
counts per uid, is a per-sandbox process limit even without cgroups. Without a memory cgroup
(no root, or none offered to this process), `MemoryWatch` sums the anonymous memory of the
sandbox's processes and kills the largest while the sum is over the limit; it is polled, so a
fast writer can overshoot it between two polls, which the kernel's cgroup cannot.
The tmpfs is a hard, instant storage limit (the writer gets
ENOSPC) and also caps inodes; its pages live in RAM, which is the price of that precision.
Without the right to mount, `StorageWatcher` polls the folder's size and kills the sandbox's
processes when it passes the limit: it can overshoot by what is written between two polls.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bureau.sandbox.base import Limits

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2


def rlimits(limits: Limits) -> dict[str, int]:
    """The rlimits of a sandboxed process, by `prlimit`'s option names (soft = hard)."""
    return {
        "as": limits.memory_mb * MIB,
        "nproc": limits.max_processes,
        "cpu": limits.cpu_time_s,
        "fsize": limits.max_file_mb * MIB,
        "core": 0,
    }


IPC_SEGMENTS, IPC_QUEUES = 64, 16


def ipc_limits(limits: Limits) -> dict[str, int]:
    """The SysV IPC limits of a sandbox's ipc namespace (files in /proc/sys/kernel): shared
    memory at most `storage_mb` in all (it lives in RAM, as the storage tmpfs does), in at most
    64 segments, and at most 16 message queues (16 KiB each by default)."""
    total = limits.storage_mb * MIB
    page = os.sysconf("SC_PAGE_SIZE")
    return {"shmmax": total, "shmall": total // page, "shmmni": IPC_SEGMENTS, "msgmni": IPC_QUEUES}


def ipc_limit_argv(limits: Limits) -> list[str]:
    """A prefix that sets `ipc_limits` in the command's own ipc namespace (each bwrap command
    has one; a write there changes no other), run as root before privileges are dropped.

    The shell stays, as the namespace's pid 1, and waits for the command: a pid 1 that ran as
    root since bwrap forked it keeps bwrap's parent-death signal, which the command loses when
    it changes uid (and a process of another uid could not be sent it anyway), so the death
    of bwrap still ends the namespace; its exit is the command's (128 + n after signal n)."""
    script = "".join(f"echo {v} > /proc/sys/kernel/{k} && " for k, v in ipc_limits(limits).items())
    return ["/bin/sh", "-c", script + '"$@"; exit $?', "sh"]


def rlimit_argv(limits: Limits, prlimit: str) -> list[str]:
    """A `prlimit` prefix that lowers the rlimits of the command it runs (limits only go down)."""
    return [prlimit, *(f"--{name}={value}" for name, value in rlimits(limits).items()), "--"]


class UidLease:
    """A uid that no other live sandbox on this machine uses, held until `release`.

    The lease is an abstract unix socket named after the uid: binding it fails while another
    process holds it, and the kernel frees it when the holder dies, so a crash leaks nothing.
    The uids are above any real account's (no /etc/passwd entry) and unique per sandbox, which
    makes RLIMIT_NPROC per sandbox and keeps sandboxes from signalling each other.
    """

    FIRST, LAST = 1_100_000, 1_900_000

    def __init__(self) -> None:
        for _ in range(64):
            uid = random.randrange(self.FIRST, self.LAST)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(f"\0bureau-sandbox-uid-{uid}")
            except OSError:
                sock.close()
                continue
            self.uid, self._sock = uid, sock
            return
        raise RuntimeError("no free sandbox uid after 64 tries")

    def release(self) -> None:
        self._sock.close()


# A sandbox's tool server runs agent code as a second uid, this far above the sandbox's own.
CODE_UID_OFFSET = 1_000_000


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` on the machine, whatever pid namespace it is in.

    kill(-1) from a process running as `uid` reaches exactly the processes of that uid; the
    helper runs in the host pid namespace, so it sees them all.
    """
    import subprocess

    offset = CODE_UID_OFFSET
    if not (
        UidLease.FIRST <= uid < UidLease.LAST
        or UidLease.FIRST + offset <= uid < UidLease.LAST + offset
    ):
        # Never a real account's uid: kill(-1) as this user would take down the host's processes.
        raise ValueError(f"uid {uid} is not a sandbox uid")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; true"],
            user=uid,
            group=uid,
            extra_groups=[],
            env={},
            timeout=10,
            check=False,
        )


def processes_of_uid(uid: int) -> list[int]:
    """Host pids whose real uid is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:"):
                if int(line.split()[1]) == uid:
                    found.append(int(entry.name))
                break
    return found


_libc = ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(path: Path, *, size_mb: int, mode: int = 0o700) -> bool:
    """Mount a tmpfs of `size_mb` (and a matching inode budget) on `path`; False if not allowed."""
    inodes = max(4096, size_mb * 256)
    options = f"size={size_mb}m,nr_inodes={inodes},mode={mode:o}".encode()
    flags = _MS_NOSUID | _MS_NODEV
    if _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, options) == 0:
        return True
    log.debug("tmpfs mount on %s refused: %s", path, os.strerror(ctypes.get_errno()))
    return False


def unmount(path: Path) -> None:
    """Detach a mount; lazy, so a process still holding a file there cannot block teardown."""
    if _libc.umount2(os.fsencode(path), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):
            log.warning("umount %s: %s", path, os.strerror(err))


def is_mountpoint(path: Path) -> bool:
    target = os.fsencode(os.path.realpath(path))
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", "rb") as mounts:
        return any(line.split()[4] == target for line in mounts)
    return False


def disk_usage(path: Path) -> int:
    """Bytes allocated under `path`, not following symlinks."""
    total = 0
    stack = [str(path)]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
    return total


class StorageWatcher:
    """Polls a folder's size and calls `on_exceeded` once it passes `limit_mb`."""

    def __init__(
        self, path: Path, limit_mb: int, on_exceeded: Callable[[], None], interval_s: float = 0.2
    ) -> None:
        self.path, self.limit_bytes, self.interval_s = path, limit_mb * MIB, interval_s
        self.on_exceeded = on_exceeded
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"storage-{path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if disk_usage(self.path) > self.limit_bytes:
                self.exceeded = True
                self.on_exceeded()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


@dataclass(frozen=True)
class ProcessInfo:
    ppid: int
    uid: int
    anon_bytes: int  # resident, not file-backed or shared: what RLIMIT_AS cannot sum


def process_table(uids: frozenset[int] | None = None) -> dict[int, ProcessInfo]:
    """Processes of this pid namespace's view: parent, real uid and anonymous resident memory
    (statm's resident minus shared pages). With `uids`, only processes of those uids: a stat
    of each /proc entry skips the rest without reading anything."""
    table: dict[int, ProcessInfo] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{name}").st_uid
            if uids is not None and uid not in uids:
                continue
            with open(f"/proc/{name}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{name}/statm", "rb") as statm:
                fields = statm.read().split()
        except (OSError, ValueError, IndexError):
            continue  # gone since the listing
        anon_pages = max(0, int(fields[1]) - int(fields[2]))
        table[int(name)] = ProcessInfo(ppid, uid, anon_pages * _PAGE)
    return table


_PAGE = os.sysconf("SC_PAGE_SIZE")


def descendants(table: dict[int, ProcessInfo], roots: set[int]) -> set[int]:
    """`roots` (those still alive) and every process below them."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    found, stack = set(), [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, ()))
    return found


def kill_if_same(pid: int, uid: int) -> bool:
    """SIGKILL `pid` only if it is still a process of `uid`. The pid was read from /proc a
    moment ago: it may have exited since and its number gone to another process (the watch
    runs as root and must not kill that one). A pidfd pins the number while it is checked."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False  # gone
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return False
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


@dataclass
class _Watched:
    limit_bytes: int
    select: Callable[[dict[int, ProcessInfo]], set[int]]
    on_kill: Callable[[int, int], None]
    first_uid: int | None = None  # killed before any other: the agent's code uid
    uids: frozenset[int] | None = None  # the uids its processes run as, when known


class MemoryWatch:
    """The sum of a sandbox's anonymous memory, bounded where no memory cgroup can be made:
    RLIMIT_AS caps each process at memory_mb, but a sandbox runs up to max_processes of them.
    One thread polls the process table for every registered
    sandbox and, when a sandbox's processes hold more than its limit, kills its largest
    processes until the rest fit: the agent's memory hog goes first, not its tool server
    (whose own size RLIMIT_AS already caps). The bound is polled: between two polls a
    sandbox can overshoot by what it allocates in `interval_s` (longer when so many sandboxes
    run that a poll would take more than `cpu_share` of a core).
    """

    _shared: MemoryWatch | None = None
    _shared_lock = threading.Lock()

    def __init__(self, interval_s: float = 0.05, cpu_share: float = 0.05) -> None:
        self.interval_s = interval_s
        self.cpu_share = cpu_share  # a poll that takes longer stretches the interval
        self._watched: dict[str, _Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @classmethod
    def shared(cls) -> MemoryWatch:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def register(
        self,
        key: str,
        limit_mb: int,
        select: Callable[[dict[int, ProcessInfo]], set[int]],
        on_kill: Callable[[int, int], None],
        first_uid: int | None = None,
        uids: frozenset[int] | None = None,
    ) -> None:
        """Watch the processes `select` picks from the table; `on_kill(pid, bytes)` is told
        of each process killed. Processes of `first_uid` (the code the agent runs through
        its tools) go before any other, so that the agent's code, not the tool server that
        ran it, pays for the memory it took. `uids`, when every process of the sandbox runs
        as one of them, lets the poll skip the machine's other processes cheaply."""
        with self._lock:
            self._watched[key] = _Watched(limit_mb * MIB, select, on_kill, first_uid, uids)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memory-watch", daemon=True)
                self._thread.start()

    def unregister(self, key: str) -> None:
        with self._lock:
            self._watched.pop(key, None)

    def _run(self) -> None:
        took = 0.0
        while True:
            # Many sandboxes make a poll slower: the interval grows so that the watch keeps
            # to `cpu_share` of one core (32 sandboxes: 1.6 ms a poll, bench/memory_watch.py).
            time.sleep(max(self.interval_s, took / self.cpu_share))
            started = time.perf_counter()
            with self._lock:
                watched = list(self._watched.values())
                if not watched:
                    self._thread = None
                    return
            wanted = [entry.uids for entry in watched]
            everyone = any(uids is None for uids in wanted)
            table = process_table(None if everyone else frozenset().union(*filter(None, wanted)))
            for entry in watched:
                try:
                    self.enforce(entry, table)
                except Exception:  # never let one sandbox stop the watch of the others
                    log.exception("memory watch")
            took = time.perf_counter() - started

    @staticmethod
    def enforce(entry: _Watched, table: dict[int, ProcessInfo]) -> None:
        pids = entry.select(table)
        total = sum(table[pid].anon_bytes for pid in pids)

        def order(pid: int) -> tuple[bool, int]:
            return table[pid].uid != entry.first_uid, -table[pid].anon_bytes

        for pid in sorted(pids, key=order):
            if total <= entry.limit_bytes:
                return
            if kill_if_same(pid, table[pid].uid):
                entry.on_kill(pid, table[pid].anon_bytes)
            total -= table[pid].anon_bytes
