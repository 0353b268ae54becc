"""Exports of trajectory records: Harbor's trajectory format (ATIF) and Parquet.

ATIF (`ATIF-v1.6`, Harbor's `harbor.models.trajectories`) is for people and Harbor's viewers:
one step per message, each agent step with its tool calls, their observations, and its token
ids and logprobs in `metrics`. Parquet, one row per trajectory, is for training and analysis:
the token lists are list columns (logprobs as float64, so nothing is rounded), and the nested
parts (messages, turns, tool calls, tools) are JSON strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bureau.harness.trajectory import TrajectoryRecord

ATIF_VERSION = "ATIF-v1.6"
AGENT_NAME = "bureau-harness"


def to_atif(record: TrajectoryRecord, *, agent_version: str = "1") -> dict[str, Any]:
    """The record as an ATIF trajectory document (a JSON-ready dict)."""
    steps: list[dict[str, Any]] = []
    turns = iter(record.turns)
    pending: dict[str, Any] | None = None  # the agent step whose tool results come next
    for message in record.messages:
        role = message["role"]
        if role == "assistant":
            turn = next(turns)
            step: dict[str, Any] = {
                "source": "agent",
                "model_name": record.model,
                "message": message.get("content") or "",
                "llm_call_count": 1,
                "metrics": {
                    "completion_tokens": len(turn.completion_ids),
                    "completion_token_ids": turn.completion_ids,
                    "logprobs": turn.completion_logprobs,
                    "extra": {
                        "finish_reason": turn.finish_reason,
                        "weight_versions": sorted(set(turn.weight_versions)),
                        "latency_s": turn.latency_s,
                        **({"parse_error": turn.parse_error} if turn.parse_error else {}),
                    },
                },
            }
            if message.get("reasoning_content"):
                step["reasoning_content"] = message["reasoning_content"]
            calls = message.get("tool_calls") or []
            if calls:
                step["tool_calls"] = [
                    {
                        "tool_call_id": c["id"],
                        "function_name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    }
                    for c in calls
                ]
            steps.append(step)
            pending = step if calls else None
        elif role == "tool" and pending is not None:
            results = pending.setdefault("observation", {"results": []})["results"]
            results.append(
                {"source_call_id": message.get("tool_call_id"), "content": message["content"]}
            )
        else:
            source = "system" if role == "system" else "user"
            steps.append({"source": source, "message": str(message.get("content") or "")})
            pending = None
    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
    return {
        "schema_version": ATIF_VERSION,
        "session_id": record.trajectory_id,
        "trajectory_id": record.trajectory_id,
        "agent": {
            "name": AGENT_NAME,
            "version": agent_version,
            "model_name": record.model,
            "tool_definitions": record.tools,
        },
        "steps": [{"step_id": s.pop("step_id"), **s} for s in steps],
        "final_metrics": {
            "total_prompt_tokens": len(record.token_ids) - record.num_sampled_tokens,
            "total_completion_tokens": record.num_sampled_tokens,
            "total_steps": len(steps),
            "extra": {
                "stop_reason": record.stop_reason,
                "llm_time_s": record.llm_time_s,
                "tool_time_s": record.tool_time_s,
                "total_time_s": record.total_time_s,
                "num_tool_calls": len(record.tool_calls),
            },
        },
        "extra": {
            "task_name": record.task_name,
            **({"system_error": record.system_error} if record.system_error else {}),
            **({"reward": record.reward} if record.reward is not None else {}),
        },
    }


_LIST_COLUMNS = {
    "prompt_ids": "int32",
    "token_ids": "int32",
    "loss_mask": "int8",
    "sampler_logprobs": "float64",
    "weight_versions": "int64",
}
_JSON_COLUMNS = ("messages", "tools", "turns", "tool_calls")


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


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> list[TrajectoryRecord]:
    """Read records written by `write_parquet`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(columns) if columns else None)
    records = []
    for row in table.to_pylist():
        for name in _JSON_COLUMNS:
            row[name] = json.loads(row[name])
        row.pop("num_turns", None)
        row.pop("num_sampled_tokens", None)
        records.append(TrajectoryRecord.from_dict(row))
    return records
