"""Trajectory records: everything a trainer, an audit or a person needs after an agent run.

The token lists are parallel and line up position by position: `token_ids`, `loss_mask` (1 on
sampled ids), `sampler_logprobs` (the engine's logprob of each sampled id, 0.0 elsewhere) and
`weight_versions` (the policy version that sampled each id, `NOT_SAMPLED_VERSION` elsewhere).
The prompt is the first observation.

    ob=[1, 2, 3] ac=[10, 11]  ->  token_ids=[1, 2, 3, 10, 11]  loss_mask=[0, 0, 0, 1, 1]

The harness fills a record as the episode runs; the trial side adds the trial's name, status,
group and reward after verification.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class StopReason(StrEnum):
    """Why an episode ended."""

    answered = "answered"
    """The model replied without a tool call."""
    max_turns = "max_turns"
    """The turn limit was reached."""
    context_exhausted = "context_exhausted"
    """The next turn would not fit in the engine's context."""
    max_tokens = "max_tokens"
    """The trajectory's budget of sampled tokens was spent."""
    parse_failures = "parse_failures"
    """Too many unparsable tool calls in a row."""
    timeout = "timeout"
    """The agent's deadline passed."""
    system_error = "system_error"
    """The engine or a tool server failed (see `TrajectoryRecord.system_error`)."""


NOT_SAMPLED_VERSION = -1
"""The weight version of a token the engine did not sample (prompt, observations)."""


@dataclass
class TurnRecord:
    """One sampled turn as the engine returned it, and the observation appended after it."""

    completion_ids: list[int]
    """The token ids the engine sampled in this turn (harness, from the engine)."""
    completion_logprobs: list[float]
    """The engine's logprob of each sampled id, natural log (harness, from the engine)."""
    weight_versions: list[int]
    """The weight version that sampled each id (harness, from the engine)."""
    finish_reason: str
    """The engine's finish reason: `stop`, `length` or `abort` (harness, from the engine)."""
    engine: str
    """Which engine answered, e.g. its base URL (harness)."""
    latency_s: float
    """Seconds from request to answer (harness)."""
    observation_ids: list[int] = field(default_factory=list)
    """The ids appended after the turn: tool results, notices (harness, from the renderer)."""
    observation_messages: list[dict[str, Any]] = field(default_factory=list)
    """The messages those ids render (harness)."""
    parse_error: str | None = None
    """Why the turn's tool calls could not be parsed; None when they could (harness)."""


@dataclass
class ToolCallRecord:
    """One tool call of a turn and how it went."""

    turn: int
    """Index of the turn that made the call, from 0 (harness)."""
    call_id: str
    """The call's id, as in the assistant message's `tool_calls` (harness)."""
    name: str
    """The tool's name (harness, from the model's output)."""
    arguments: dict[str, Any]
    """The arguments as parsed from the model's output (harness)."""
    outcome: str
    """`ok`, `tool_error` (the tool reported an error), `tool_failed` (the tool server died or
    hung under the call and was restarted), `unknown_tool`, or `system_error`."""
    latency_s: float
    """Seconds the call took (harness)."""
    output_chars: int
    """Characters of the tool's result before truncation (harness)."""
    truncated: bool
    """Whether the result was cut to the harness's limit (harness)."""


@dataclass
class TrajectoryRecord:
    """One agent run on one task: token lists, messages, turns, tool calls, timings, reward."""

    trajectory_id: str
    """Unique id of this trajectory (harness)."""
    task_name: str
    """The task's name (harness)."""
    model: str
    """The served model name that sampled (harness)."""
    prompt_ids: list[int]
    """The first prompt's token ids: system, tools, instruction (harness, from the renderer)."""
    token_ids: list[int]
    """Every token id of the trajectory in order: prompt, samples, observations (harness)."""
    loss_mask: list[int]
    """Per token: 1 if the engine sampled it, else 0 (harness)."""
    sampler_logprobs: list[float]
    """Per token: the engine's logprob of a sampled id, natural log; 0.0 elsewhere (harness)."""
    weight_versions: list[int]
    """Per token: the weight version that sampled it, `NOT_SAMPLED_VERSION` elsewhere."""
    messages: list[dict[str, Any]]
    """The conversation as chat messages, for people and ATIF (harness)."""
    tools: list[dict[str, Any]]
    """The tools offered, as OpenAI-style function entries (harness)."""
    turns: list[TurnRecord]
    """Each sampled turn (harness)."""
    tool_calls: list[ToolCallRecord]
    """Each tool call, over all turns (harness)."""
    stop_reason: str
    """A `StopReason` value (harness)."""
    llm_time_s: float
    """Seconds spent waiting on the engine (harness)."""
    tool_time_s: float
    """Seconds spent in tool calls (harness)."""
    total_time_s: float
    """Wall-clock seconds of the episode (harness)."""
    trial_name: str = ""
    """The trial directory's name (trial side, after the run)."""
    group_id: str = ""
    """Records sharing it form one advantage group (trial side; the task by default)."""
    reward: float | None = None
    """The verifier's reward; None when there is none (trial side, after verification)."""
    system_error: str | None = None
    """`kind: message` when the trajectory carries no reward because the machinery failed."""
    trial_status: str = ""
    """The trial's final status (trial side)."""
    dropped: str | None = None
    """Why the RL loop did not train on this record although it kept it (`stale`: sampled
    too many weight versions ago); None for a record it trained on, or outside the loop."""
    worker: str = ""
    """The rollout worker that ran it to its reward (the RL loop; empty elsewhere)."""
    lost_on: list[str] = field(default_factory=list)
    """Rollout workers that died while running it, in order: each loss sent it again."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """A multi-step task's steps, in order: `name`, `first_turn` (the index in `turns` where
    the step's prompt was answered first) and `reward` (that step's verifier reward, trial
    side). The record's `reward` is the trial's: Harbor's mean over the steps. Empty for a
    single-step task."""

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
