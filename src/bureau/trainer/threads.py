"""Torch's intra-op threads sized to the cores a process really gets.

Torch starts as many intra-op threads as the process may run on, and they meet at a barrier
after every operator. When another process holds one of those cores, each barrier waits for a
thread the kernel has descheduled: a tiny model's steps, a few milliseconds of work between
barriers, then run many times slower than on the one core left (the demo's copy pretraining
took 17.9 minutes beside other work against 1.6 alone). `CoreShare` measures, from
`/proc/stat` and this process's own CPU time, how many cores the rest of the machine keeps
busy, and sets torch's threads to the cores left (at least one), again every `every_s`
seconds while a loop runs, so a stage follows the load as it comes and goes.

Off Linux, or where `/proc` cannot be read, it leaves torch's threads as they are.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class CpuSample:
    """Jiffies since boot: the machine's busy and total (all CPUs) and this process's own."""

    busy: int
    total: int
    own: int


def cpu_sample(proc: Path = Path("/proc")) -> CpuSample | None:
    """The counters now, or None where `/proc` does not have them."""
    try:
        fields = (proc / "stat").read_text().splitlines()[0].split()
        mine = (proc / "self" / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    # utime and stime are fields 14 and 15 of stat(5); after the ")" they are the 12th and 13th.
    return CpuSample(sum(values) - idle, sum(values), int(mine[11]) + int(mine[12]))


def cores_left(before: CpuSample, after: CpuSample, cpus: int, online: int) -> float:
    """The cores of the `cpus` this process may use that other processes left free between
    the two samples: `cpus` less the cores they kept busy (the machine's busy time less this
    process's own, in cores of the `online` CPUs that /proc/stat counts)."""
    total = after.total - before.total
    if total <= 0:
        return float(cpus)
    busy = (after.busy - before.busy) / total * online
    own = (after.own - before.own) / total * online
    return max(0.0, cpus - max(0.0, busy - own))


def threads_for(free: float, cpus: int) -> int:
    """Threads for `free` cores: rounded, a core shared more than three quarters counted as
    taken, never fewer than one nor more than `cpus`."""
    return max(1, min(cpus, int(free + 0.25)))


@dataclass
class CoreShare:
    """Sets torch's threads to the cores left free, at `start()` and then every `every_s`
    seconds when a loop calls `update()`; `log` hears of each change."""

    every_s: float = 15.0
    log: Callable[[str], None] | None = None
    proc: Path = Path("/proc")
    threads: int | None = None
    """The count set last (None until the first measurement)."""
    changes: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since start, threads) of each change."""
    _last: CpuSample | None = None
    _at: float = 0.0
    _started: float = 0.0

    @property
    def cpus(self) -> int:
        try:
            return len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not Linux
            return os.cpu_count() or 1

    def start(self, window_s: float = 0.5) -> int | None:
        """Measure for `window_s` (this process idle meanwhile) and set the threads."""
        self._started = time.monotonic()
        self._last = cpu_sample(self.proc)
        self._at = self._started
        if self._last is None:
            return None
        time.sleep(window_s)
        return self._measure()

    def update(self) -> int | None:
        """Between steps: measure again when `every_s` has passed since the last time."""
        if self._last is None or time.monotonic() - self._at < self.every_s:
            return self.threads
        return self._measure()

    def _measure(self) -> int | None:
        import torch

        now = cpu_sample(self.proc)
        if now is None or self._last is None:
            return self.threads
        online = os.cpu_count() or 1
        free = cores_left(self._last, now, self.cpus, online)
        threads = threads_for(free, self.cpus)
        self._last, self._at = now, time.monotonic()
        if threads != self.threads:
            torch.set_num_threads(threads)
            self.changes.append((round(self._at - self._started, 1), threads))
            if self.log is not None:
                self.log(
                    f"torch threads: {threads} ({free:.1f} of {self.cpus} cores free of other "
                    "processes' work)"
                )
            self.threads = threads
        return threads
