"""Trajectory records in Parquet: one row per trajectory, for training and analysis.

The token lists are list columns (logprobs as float64, so nothing is rounded); the nested parts
(messages, turns, tool calls, tools) are JSON strings. pyarrow is imported only when a file is
read or written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bureau.records.trajectory import TrajectoryRecord

_LIST_COLUMNS = {
    "prompt_ids": "int32",
    "token_ids": "int32",
    "loss_mask": "int8",
    "sampler_logprobs": "float64",
    "weight_versions": "int64",
}
_JSON_COLUMNS = ("messages", "tools", "turns", "tool_calls", "steps")


def _schema() -> Any:
    import pyarrow as pa

    fields = [
        pa.field("trajectory_id", pa.string(), nullable=False),
        pa.field("task_name", pa.string()),
        pa.field("trial_name", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("model", pa.string()),
        *(
            pa.field(name, pa.list_(pa.from_numpy_dtype(dtype)))
            for name, dtype in _LIST_COLUMNS.items()
        ),
        pa.field("reward", pa.float64()),
        pa.field("stop_reason", pa.string()),
        pa.field("system_error", pa.string()),
        pa.field("trial_status", pa.string()),
        pa.field("dropped", pa.string()),
        pa.field("worker", pa.string()),
        pa.field("lost_on", pa.list_(pa.string())),
        pa.field("num_turns", pa.int32()),
        pa.field("num_sampled_tokens", pa.int32()),
        pa.field("llm_time_s", pa.float64()),
        pa.field("tool_time_s", pa.float64()),
        pa.field("total_time_s", pa.float64()),
        *(pa.field(name, pa.string()) for name in _JSON_COLUMNS),
    ]
    return pa.schema(fields)


def write_parquet(records: Iterable[TrajectoryRecord], path: Path) -> int:
    """Write one row per record to `path` (atomically); returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    rows: list[dict[str, Any]] = []
    for r in records:
        row = r.to_dict()
        for name in _JSON_COLUMNS:
            row[name] = json.dumps(row[name], ensure_ascii=False)
        row["num_turns"] = r.num_turns
        row["num_sampled_tokens"] = r.num_sampled_tokens
        rows.append({f.name: row.get(f.name) for f in schema})
    table = pa.Table.from_pylist(rows, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, staging)
    staging.replace(path)
    return len(rows)


def read_trajectories(path: Path, *, include_dropped: bool = False) -> list[TrajectoryRecord]:
    """The records of one Parquet file, or of every `*.parquet` file of a folder in name order
    (a `bureau train` run's `trajectories/`: one file a step); records the loop kept but did
    not train on (`dropped`) only with `include_dropped`. FileNotFoundError when there is none."""
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files or not files[0].is_file():
        raise FileNotFoundError(f"{path}: no trajectory records (a .parquet file or a folder)")
    records = [r for file in files for r in read_parquet(file)]
    return [r for r in records if include_dropped or r.dropped is None]


def read_columns(path: Path, columns: Sequence[str]) -> list[dict[str, Any]]:
    """Some columns of a file `write_parquet` wrote, one dict a row, without the token lists
    a whole record carries (a report over a long run's steps)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(path, columns=list(columns)).to_pylist()
    return rows


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> list[TrajectoryRecord]:
    """Read records written by `write_parquet`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(columns) if columns else None)
    records = []
    for row in table.to_pylist():
        for name in _JSON_COLUMNS:
            if name in row:  # files written before a column existed lack it
                row[name] = json.loads(row[name])
        row.pop("num_turns", None)
        row.pop("num_sampled_tokens", None)
        records.append(TrajectoryRecord.from_dict(row))
    return records
