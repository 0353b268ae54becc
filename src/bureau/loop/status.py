"""What a run is doing right now, in words, for a person watching (`bureau train`'s progress).

The run sets a phase as it goes (starting Ray, the engines, waiting for rollouts, a trainer
step, a weight push, a checkpoint, an evaluation); the controller adds what the buffer holds
and what is in flight. `bureau train` prints `describe()` whenever nothing else was printed for
a while, so a run that waits (on an engine that will not start, on rollouts that never finish)
says what it waits for instead of looking like a slow one.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RunStatus:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.phase = "starting"
        self.since = clock()
        self.detail: Callable[[], str] | None = None
        """What the controller holds and runs (set while it runs)."""

    def set(self, phase: str) -> None:
        if phase != self.phase:
            self.phase, self.since = phase, self.clock()

    def describe(self) -> str:
        text = f"{self.phase} ({self.clock() - self.since:.0f} s)"
        if self.detail is not None:
            text += f"; {self.detail()}"
        return text
