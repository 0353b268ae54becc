"""Trajectory state and records.

The state holds three parallel, append-only lists: `token_ids`, `loss_mask` (1 for sampled ids)
and `sampler_logprobs` (the engine's logprob for sampled ids, 0.0 elsewhere), plus the weight
version of every sampled id (-1 elsewhere). The prompt is the first observation.

    ob=[1, 2, 3] ac=[10, 11]  ->  token_ids=[1, 2, 3, 10, 11]  loss_mask=[0, 0, 0, 1, 1]

A record is everything a trainer, an audit or a person needs afterwards: the token lists, the
messages, each turn as the engine returned it, every tool call with its latency and outcome, the
stop reason and the timings. The reward is filled in after verification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class StopReason(StrEnum):
    answered = "answered"
    max_turns = "max_turns"
    context_exhausted = "context_exhausted"
    max_tokens = "max_tokens"
    parse_failures = "parse_failures"
    timeout = "timeout"
    system_error = "system_error"


NOT_SAMPLED_VERSION = -1


@dataclass
class TokenState:
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sampler_logprobs: list[float] = field(default_factory=list)
    weight_versions: list[int] = field(default_factory=list)

    def observe(self, ids: Sequence[int]) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.sampler_logprobs.extend([0.0] * len(ids))
        self.weight_versions.extend([NOT_SAMPLED_VERSION] * len(ids))

    def sample(
        self, ids: Sequence[int], logprobs: Sequence[float], versions: Sequence[int]
    ) -> None:
        if not len(ids) == len(logprobs) == len(versions):
            raise ValueError(f"{len(ids)} ids, {len(logprobs)} logprobs, {len(versions)} versions")
        self.token_ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.sampler_logprobs.extend(logprobs)
        self.weight_versions.extend(versions)

    def __len__(self) -> int:
        return len(self.token_ids)


@dataclass
class TurnRecord:
    """One sampled turn as the engine returned it, and the observation appended after it."""

    completion_ids: list[int]
    completion_logprobs: list[float]
    weight_versions: list[int]
    finish_reason: str
    engine: str
    latency_s: float
    observation_ids: list[int] = field(default_factory=list)
    observation_messages: list[dict[str, Any]] = field(default_factory=list)
    parse_error: str | None = None


@dataclass
class ToolCallRecord:
    turn: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    outcome: str
    """`ok`, `tool_error` (the tool reported an error), `unknown_tool`, or `system_error`."""
    latency_s: float
    output_chars: int
    truncated: bool


@dataclass
class TrajectoryRecord:
    trajectory_id: str
    task_name: str
    model: str
    prompt_ids: list[int]
    token_ids: list[int]
    loss_mask: list[int]
    sampler_logprobs: list[float]
    weight_versions: list[int]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turns: list[TurnRecord]
    tool_calls: list[ToolCallRecord]
    stop_reason: str
    llm_time_s: float
    tool_time_s: float
    total_time_s: float
    trial_name: str = ""
    group_id: str = ""
    reward: float | None = None
    system_error: str | None = None
    """`kind: message` when the trajectory carries no reward because the machinery failed."""
    trial_status: str = ""

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def num_sampled_tokens(self) -> int:
        return sum(self.loss_mask)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrajectoryRecord:
        data = dict(data)
        data["turns"] = [TurnRecord(**t) for t in data["turns"]]
        data["tool_calls"] = [ToolCallRecord(**c) for c in data["tool_calls"]]
        return cls(**data)
