"""Trajectory records in Harbor's trajectory format (ATIF), for people and Harbor's viewers.

ATIF (`ATIF-v1.6`, Harbor's `harbor.models.trajectories`): one step per message, each agent step
with its tool calls, their observations, and its token ids and logprobs in `metrics`. The
Parquet form, for training and analysis, is `bureau.records.write_parquet`.
"""

from __future__ import annotations

from typing import Any

from bureau.records import TrajectoryRecord

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
