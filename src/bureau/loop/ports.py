"""The small interfaces the controller drives; Ray actors, local objects and test fakes fit them.

Legend: a *version* is the number of optimizer steps behind a set of weights; the trainer's
weights after step t are version t, and every sampled token carries the version that drew it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from bureau.records import TrainBatch


class TrainerPort(Protocol):
    """The trainer side: one optimizer step per batch, checkpoints."""

    async def step(self, batch: TrainBatch) -> dict[str, Any]:
        """forward_backward + optim_step on the whole batch; the step's metrics."""
        ...

    async def version(self) -> int:
        """Optimizer steps taken (the version of the trainer's weights)."""
        ...

    async def save(self, path: Path, loop_state: dict[str, Any]) -> None:
        """A resumable checkpoint in `path`, with the loop's own state beside the trainer's."""
        ...

    async def load(self, path: Path) -> dict[str, Any]:
        """Restore `save`'s checkpoint; returns the loop state saved with it."""
        ...

    async def export(self, out: Path, dtype: str = "float32") -> Path:
        """The current weights as a Hugging Face folder (with the tokenizer files), floating
        tensors in `dtype`."""
        ...

    async def close(self) -> None: ...


class WeightPort(Protocol):
    """Pushes the trainer's weights into every engine in place."""

    async def publish(self, version: int) -> dict[str, float]:
        """Pause (keep), update, resume every engine; labels new tokens with `version`.

        Returns timings (`weights/sync_s`, ...)."""
        ...

    async def repair(self, version: int) -> int:
        """Push `version` again to engines that report an older one (restarted); how many."""
        ...


class MetricsSink(Protocol):
    def log(self, step: int, metrics: dict[str, Any]) -> None: ...

    def close(self) -> None: ...
