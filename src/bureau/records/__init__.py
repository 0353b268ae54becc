"""Record types shared by the harness, the trainer and the loop, owned by none of them.

A `TrajectoryRecord` is what an agent run leaves behind (the token lists it trained on, the
messages, each turn and tool call, the reward once verified); a `TrainBatch` is what the trainer
consumes (per-token advantages and loss weights already computed). Parquet is how records are
stored between processes and runs. This package imports no other bureau package, so any layer
can depend on it without reaching the others.
"""

from bureau.records.batch import TrainBatch
from bureau.records.parquet import read_parquet, read_trajectories, write_parquet
from bureau.records.trajectory import (
    NOT_SAMPLED_VERSION,
    StopReason,
    ToolCallRecord,
    TrajectoryRecord,
    TurnRecord,
)

__all__ = [
    "NOT_SAMPLED_VERSION",
    "StopReason",
    "ToolCallRecord",
    "TrainBatch",
    "TrajectoryRecord",
    "TurnRecord",
    "read_parquet",
    "read_trajectories",
    "write_parquet",
]
