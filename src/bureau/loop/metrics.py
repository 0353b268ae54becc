"""Where step metrics go: `metrics.jsonl` (one JSON object a line) and TensorBoard.

A resumed run first drops the lines past its checkpoint (those steps are trained again), so the
log always describes one history: each step, and each group id in it, once.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """`MetricsSink` writing JSON lines, and scalars to TensorBoard when enabled."""

    def __init__(self, run_dir: Path, *, tensorboard: bool = True) -> None:
        self.path = run_dir / METRICS_FILE
        run_dir.mkdir(parents=True, exist_ok=True)
        self._writer: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, "time": time.time(), **metrics}
        with self.path.open("a") as f:
            f.write(json.dumps(row, default=_jsonable) + "\n")
        if self._writer is not None:
            for key, value in metrics.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                if math.isfinite(value):
                    self._writer.add_scalar(key, value, step)
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def truncate_metrics(run_dir: Path, last_step: int) -> int:
    """Keep only the lines of steps <= `last_step` (a resume from that checkpoint); how many
    lines were dropped."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            step = int(json.loads(line).get("step", 0))
        except (ValueError, AttributeError):
            dropped += 1  # a line cut short by a kill
            continue
        if step <= last_step:
            kept.append(line)
        else:
            dropped += 1
    path.write_text("".join(line + "\n" for line in kept))
    return dropped


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
