"""One attempt at a task, start to record: the one rollout path every entry point takes.

`run_attempt` runs a trial (sandbox, tool servers, agent, verifier), retries what the machinery
broke (`trials.retry`), has the task's oracle checked when the verifier failed
(`trials.defects`), and joins the trial's outcome to the agent's trajectory, taken from the
agent in memory (`Agent.trajectory()`), never read back from `agent/record.json`. The RL loop's
rollout worker, `bureau eval`, `bureau tasks check --agent harness` and `bureau bootstrap
record` all call it (through `trials.scheduler.run_attempts` where many run at once), so a trial
becomes the same training record whichever of them ran it.

Who failed decides the record (`outcome_of`):
- **completed**: the verifier's reward, and its pass flag (`pass` in reward.json; reward 1.0
  for verifiers without one).
- **the agent failed**: it overran its time (`agent_timeout`), crashed (`agent_error`) or broke
  its own tool server once it had started (`tool_server_failed`). That is a graded 0: reward
  0.0, not passed, no system error. Masking it would teach a policy to stall or crash rather
  than answer wrong.
- **the machinery failed** (any other kind, or a tool server that never came up): no reward,
  the error's kind typed (`AttemptOutcome.error`) and `kind: message` in the record, so its
  group is masked from training and the report counts it apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bureau.errors import SystemErrorKind
from bureau.records import TrajectoryRecord
from bureau.trials.agents import Agent
from bureau.trials.defects import suspect
from bureau.trials.result import TrialResult
from bureau.trials.retry import NO_RETRIES, RetryPolicy, with_retries
from bureau.trials.trial import TrialConfig, run_trial

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from bureau.judge import JudgeClient
    from bureau.sandbox.base import Runtime
    from bureau.tasks.taskdir import TaskDir
    from bureau.trials.defects import TaskDefects
    from bureau.trials.faults import FaultInjector
    from bureau.trials.pool import WarmPool

PASS_KEY = "pass"

AGENT_KINDS = frozenset({SystemErrorKind.agent_timeout, SystemErrorKind.agent_error})
"""Failures that are the agent's wherever they happen."""

AGENT_PHASE_KINDS = frozenset({SystemErrorKind.tool_server_failed})
"""Failures that are the agent's once its run has started (before, the machinery's)."""

Blame = Literal["agent", "machinery"]


def verifier_passed(values: Mapping[str, float], reward: float) -> bool:
    """The verdict in a verifier's reward values: its `pass` flag, else `reward >= 1.0`."""
    if PASS_KEY in values:
        return values[PASS_KEY] == 1
    return reward >= 1.0


def agent_is_to_blame(status: str, agent_started: bool) -> bool:
    """Whether a trial's system-error `status` is the agent's failure (module docstring)."""
    return status in AGENT_KINDS or (agent_started and status in AGENT_PHASE_KINDS)


@dataclass
class AttemptOutcome:
    """A finished attempt: the trial, its training record, and who failed if anyone did."""

    result: TrialResult
    record: TrajectoryRecord
    """Always there: the agent's trajectory joined with the outcome, or an empty one (no
    tokens) when the agent left none; it carries the reward, group and error."""
    passed: bool | None
    """Every criterion passed; False for the agent's failures; None for the machinery's."""
    error: SystemErrorKind | None
    """The machinery's failure: no reward, masked from training, counted apart."""
    agent_failure: SystemErrorKind | None
    """The agent's failure, graded 0 (its trial status)."""
    task_defect: bool = False
    """The verifier failed here and on the task's oracle too: the task is broken."""

    @property
    def blame(self) -> Blame | None:
        if self.error is not None:
            return "machinery"
        return "agent" if self.agent_failure is not None else None

    @property
    def reward(self) -> float | None:
        return self.record.reward


def outcome_of(
    result: TrialResult,
    trajectory: TrajectoryRecord | None,
    *,
    group_id: str | None = None,
    trajectory_id: str | None = None,
) -> AttemptOutcome:
    """The one join of a trial and the agent's trajectory (see the module docstring). The
    group is `group_id`, else the agent's, else the task: attempts at one task form one
    advantage group."""
    record = trajectory if trajectory is not None else empty_record(result, trajectory_id)
    record.trial_name = result.trial_name
    record.trial_status = result.status
    record.group_id = group_id or record.group_id or result.task_name
    started = result.agent_execution.started_at is not None
    kind = _kind(result.status)
    if result.system_error and agent_is_to_blame(result.status, started):
        record.reward, record.system_error = 0.0, None
        outcome = AttemptOutcome(result, record, False, None, kind)
    elif result.system_error:
        message = record.system_error or (
            result.exception_info.exception_message if result.exception_info else ""
        )
        if not message.startswith(f"{result.status}:"):
            message = f"{result.status}: {message}"
        record.reward, record.system_error = None, message
        outcome = AttemptOutcome(result, record, None, kind or SystemErrorKind.internal_error, None)
    elif result.reward is None:  # `completed` without a reward is a bug in bureau, not a zero
        record.reward = None
        record.system_error = f"{SystemErrorKind.internal_error.value}: completed without a reward"
        outcome = AttemptOutcome(result, record, None, SystemErrorKind.internal_error, None)
    else:
        values = (result.verifier_result or {}).get("rewards") or {}
        record.reward, record.system_error = result.reward, None
        outcome = AttemptOutcome(result, record, verifier_passed(values, result.reward), None, None)
    outcome.task_defect = result.task_defect is not None
    _step_rewards(record, result)
    return outcome


def _step_rewards(record: TrajectoryRecord, result: TrialResult) -> None:
    """Each step of a multi-step record gets its verifier's reward (None for a step that
    was not verified: the trial ended before it, or failed)."""
    verified = {
        str(step.get("step_name")): step.get("rewards") or {}
        for step in (result.verifier_result or {}).get("step_results") or []
    }
    for step in record.steps:
        rewards = verified.get(str(step.get("name")))
        step["reward"] = None if not rewards else rewards.get("reward")


def _kind(status: str) -> SystemErrorKind | None:
    try:
        return SystemErrorKind(status)
    except ValueError:
        return None


def empty_record(result: TrialResult, trajectory_id: str | None = None) -> TrajectoryRecord:
    """The record of an attempt whose agent left no trajectory (it never ran, or was cut off)."""
    return TrajectoryRecord(
        trajectory_id=trajectory_id or result.trial_name,
        task_name=result.task_name,
        model="",
        prompt_ids=[],
        token_ids=[],
        loss_mask=[],
        sampler_logprobs=[],
        weight_versions=[],
        messages=[],
        tools=[],
        turns=[],
        tool_calls=[],
        stop_reason="system_error",
        llm_time_s=0.0,
        tool_time_s=0.0,
        total_time_s=0.0,
        trial_status=result.status,
    )


async def run_attempt(
    task: TaskDir,
    make_agent: Callable[[], Agent],
    runtime: Runtime,
    trials_dir: Path,
    *,
    config: TrialConfig | None = None,
    retry: RetryPolicy = NO_RETRIES,
    pool: WarmPool | None = None,
    judge: JudgeClient | None = None,
    faults: FaultInjector | None = None,
    defects: TaskDefects | None = None,
    start_gate: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    group_id: str | None = None,
    trajectory_id: str | None = None,
) -> AttemptOutcome:
    """Run one attempt at `task` with a fresh agent from `make_agent` per try; see the module
    docstring. Never raises for a failed trial: the failure is in the outcome."""
    agents: list[Agent] = []

    def attempt() -> Agent:
        agents.append(make_agent())
        return agents[-1]

    result = await with_retries(
        lambda: run_trial(
            task,
            attempt(),
            runtime,
            trials_dir,
            config,
            start_gate=start_gate,
            pool=pool,
            judge=judge,
            faults=faults,
        ),
        retry,
        trials_dir,
    )
    if defects is not None and suspect(result):
        await defects.settle(task, result)
        result.write(trials_dir / result.trial_name)
    trajectory = agents[-1].trajectory() if agents else None
    return outcome_of(result, trajectory, group_id=group_id, trajectory_id=trajectory_id)
