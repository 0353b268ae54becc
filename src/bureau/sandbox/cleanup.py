"""The last line of defence: sandboxes still alive when the process ends are stopped.

Every sandbox registers here when it starts and leaves when `stop()` finishes. Three exits are
covered:

- a normal exit (or an uncaught exception, or Ctrl-C): an `atexit` hook stops what is left;
- SIGTERM or SIGHUP: a handler stops every sandbox first (which also ends the commands that
  worker threads are waiting on), then raises `SystemExit` so `finally` blocks and `atexit`
  still run. It is installed only where the signal still has its default action, so an
  application's own handler is never replaced;
- SIGKILL, which no handler sees: the sandbox's processes die with it (bubblewrap's
  `--die-with-parent`), and the trial folder left behind carries an `.owner` file naming the
  dead process, so the next runtime on that root removes it (`sweep_stale`).

The handler may run while the main thread is itself inside `stop()`; stops are therefore
re-entrant and made of idempotent steps, and the registry is read as a snapshot, never locked.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Protocol

log = logging.getLogger(__name__)

OWNER_FILE = ".owner"


class Stoppable(Protocol):
    id: str

    def stop(self) -> None: ...


_live: dict[str, Stoppable] = {}
_installed = False


def register(sandbox: Stoppable) -> None:
    _install_once()
    _live[sandbox.id] = sandbox


def unregister(sandbox: Stoppable) -> None:
    _live.pop(sandbox.id, None)


def live() -> list[Stoppable]:
    return list(_live.values())


def stop_all() -> None:
    """Stop every registered sandbox; one failure does not keep the others alive."""
    for sandbox in list(_live.values()):
        try:
            sandbox.stop()
        except Exception:
            log.exception("stopping sandbox %s at exit failed", sandbox.id)
        _live.pop(sandbox.id, None)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    stop_all()
    raise SystemExit(128 + signum)


def _install_once() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _on_signal)


def owner_stamp() -> str:
    """This process, as `pid start-time`: a pid alone can be reused after a crash."""
    return f"{os.getpid()} {_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # Field 22 (starttime); the command name (field 2) may hold spaces, so split after it.
    return stat.rsplit(")", 1)[1].split()[19]


def owner_alive(stamp: str) -> bool:
    parts = stamp.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return False
    return _start_time(int(parts[0])) == parts[1]


def sweep_stale(root: Path, remove: Callable[[Path, dict[str, str]], None]) -> list[Path]:
    """Remove trial folders under `root` whose owning process is gone.

    `remove(folder, fields)` tears one down (unmount, kill its uid, drop cgroups); `fields` are
    the key=value lines of its owner file. Folders without an owner file are left alone: they
    may be starting right now.
    """
    swept: list[Path] = []
    if not root.is_dir():
        return swept
    for folder in root.iterdir():
        owner = folder / OWNER_FILE
        try:
            lines = owner.read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split("=", 1) for line in lines if "=" in line)
        if owner_alive(fields.get("owner", "")):
            continue
        try:
            remove(folder, fields)
        except Exception:
            log.exception("removing stale sandbox folder %s failed", folder)
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
        swept.append(folder)
    return swept
