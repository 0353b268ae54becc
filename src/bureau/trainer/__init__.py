"""The trainer: packed micro-batches, forward-backward with a given loss, optimizer steps,
checkpoints and weight exports, in one process or sharded with FSDP2.

It is algorithm-blind (see `bureau.algo.inputs`): batches arrive with per-token advantages and
loss weights, and the loss function is passed in. Batches are `bureau.records.TrainBatch`.
"""

from bureau.trainer.config import OptimizerConfig, TrainerConfig
from bureau.trainer.fsdp import Parallel
from bureau.trainer.packing import PackingConfig
from bureau.trainer.trainer import Trainer

__all__ = [
    "OptimizerConfig",
    "PackingConfig",
    "Parallel",
    "Trainer",
    "TrainerConfig",
]
