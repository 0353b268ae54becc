"""The trainer: packed micro-batches, forward-backward with a given loss, optimizer steps,
checkpoints and weight exports, in one process or sharded with FSDP2.

It is algorithm-blind (see `bureau.algo.inputs`): batches arrive with per-token advantages and
loss weights, and the loss function is passed in. Batches are `bureau.records.TrainBatch`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bureau.trainer.config import OptimizerConfig, TrainerConfig
    from bureau.trainer.fsdp import Parallel
    from bureau.trainer.packing import PackingConfig
    from bureau.trainer.trainer import Trainer

# Imported when first asked for: the configs are read where torch is not needed (a command's
# flags are checked, a path found missing, before torch is imported).
_HOMES = {
    "OptimizerConfig": "bureau.trainer.config",
    "TrainerConfig": "bureau.trainer.config",
    "Parallel": "bureau.trainer.fsdp",
    "PackingConfig": "bureau.trainer.packing",
    "Trainer": "bureau.trainer.trainer",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "OptimizerConfig",
    "PackingConfig",
    "Parallel",
    "Trainer",
    "TrainerConfig",
]
