"""Finished groups waiting for the trainer, and the time accounting of both sides.

A group enters the buffer once all its attempts are back (credit assignment needs the whole
group); the trainer takes them first in, first out. `Activity` integrates how many trajectories
were running over time, which gives the generation side's idle and utilisation ratios.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from bureau.loop.rollout import Rollout, TaskRef


@dataclass
class Group:
    position: int
    """Position in the task stream (see `bureau.loop.data`)."""
    group_id: str
    task: TaskRef
    rollouts: list[Rollout]
    finished_at: float = field(default_factory=time.monotonic)

    @property
    def weight_versions(self) -> list[list[int]]:
        return [r.record.weight_versions for r in self.rollouts]


class GroupBuffer:
    """FIFO of complete groups; `wait_for(n)` blocks until n are there."""

    def __init__(self) -> None:
        self._groups: deque[Group] = deque()
        self._changed = asyncio.Condition()

    def __len__(self) -> int:
        return len(self._groups)

    async def put(self, group: Group) -> None:
        async with self._changed:
            self._groups.append(group)
            self._changed.notify_all()

    async def wait_for(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._groups) >= count)

    def take(self) -> Group:
        return self._groups.popleft()


class Activity:
    """Integrates the number of running trajectories over time (for busy/idle ratios)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running = 0
        self._last = time.monotonic()
        self.idle_s = 0.0
        self.busy_slot_s = 0.0
        self.total_s = 0.0
        self.lifetime_slot_s = 0.0
        """Trajectory-seconds in flight since the start (never reset)."""

    def _advance(self) -> None:
        now = time.monotonic()
        span = now - self._last
        self._last = now
        self.total_s += span
        if self.running == 0:
            self.idle_s += span
        self.busy_slot_s += span * min(self.running, self.slots)
        self.lifetime_slot_s += span * self.running

    def change(self, delta: int) -> None:
        self._advance()
        self.running += delta

    def slot_seconds(self) -> float:
        """Trajectory-seconds in flight so far: the difference of two calls is the generation
        that ran between them."""
        self._advance()
        return self.lifetime_slot_s

    def window(self) -> tuple[float, float, float]:
        """(seconds, idle seconds, busy slot-seconds) since the previous call."""
        self._advance()
        result = (self.total_s, self.idle_s, self.busy_slot_s)
        self.total_s = self.idle_s = self.busy_slot_s = 0.0
        return result
