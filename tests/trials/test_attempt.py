"""The one join of a trial and the agent's trajectory (`bureau.trials.attempt.outcome_of`): who
failed decides the record, whichever entry point ran the trial."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bureau.errors import SystemErrorKind
from bureau.records import TrajectoryRecord
from bureau.trials.attempt import outcome_of
from bureau.trials.result import ExceptionInfo, TrialResult, now


def trial(status: str, *, agent_started: bool, reward: float | None = None) -> TrialResult:
    result = TrialResult(
        task_name="bureau/t",
        trial_name="t__abc",
        trial_uri="file:///x",
        task_id={"path": "/tasks/t"},
        task_checksum="0",
        agent_info={"name": "harness", "version": "1"},
        status=status,
        reward=reward,
    )
    if agent_started:
        result.agent_execution.started_at = now()
    if status != "completed":
        result.exception_info = ExceptionInfo(
            exception_type="X",
            exception_message="it broke",
            exception_traceback="",
            occurred_at=now(),
        )
    return result


@pytest.mark.parametrize("status", ["agent_timeout", "agent_error"])
def test_an_agent_that_stalls_or_crashes_scores_zero_not_a_masked_error(
    status: str, make_record: Callable[..., TrajectoryRecord]
) -> None:
    # With the trajectory it left, and without one (cut off before it had one).
    for trajectory in (make_record("r1", reward=None), None):
        outcome = outcome_of(trial(status, agent_started=True), trajectory, group_id="g1/t")
        record = outcome.record
        assert (record.reward, record.system_error, outcome.passed) == (0.0, None, False)
        assert outcome.agent_failure == SystemErrorKind(status) and outcome.error is None
        assert outcome.blame == "agent"
        assert record.group_id == "g1/t" and record.trial_status == status


def test_a_tool_server_dying_under_the_agent_is_the_agents_failure() -> None:
    under = outcome_of(trial("tool_server_failed", agent_started=True), None)
    assert under.blame == "agent" and under.record.reward == 0.0
    before = outcome_of(trial("tool_server_failed", agent_started=False), None)
    assert before.blame == "machinery" and before.error is SystemErrorKind.tool_server_failed
    assert before.record.reward is None
    assert before.record.system_error == "tool_server_failed: it broke"


@pytest.mark.parametrize("status", ["sandbox_start_failed", "engine_unavailable", "verifier_error"])
def test_machinery_failures_are_masked_with_their_kind(status: str) -> None:
    outcome = outcome_of(
        trial(status, agent_started=status != "sandbox_start_failed"),
        None,
        trajectory_id="g2/t#1",
    )
    record = outcome.record
    assert outcome.error == SystemErrorKind(status) and outcome.passed is None
    assert record.reward is None and record.trajectory_id == "g2/t#1"
    assert record.system_error is not None and record.system_error.startswith(f"{status}: ")
    assert record.token_ids == [] and record.stop_reason == "system_error"
    assert record.group_id == "bureau/t"  # the task, when no group is given


def test_an_agents_own_error_message_is_kept_under_the_kind(
    make_record: Callable[..., TrajectoryRecord],
) -> None:
    trajectory = make_record("r1", reward=None)
    trajectory.system_error = "engine said 503"
    outcome = outcome_of(trial("engine_unavailable", agent_started=True), trajectory)
    assert outcome.record.system_error == "engine_unavailable: engine said 503"
    assert outcome.record.token_ids == trajectory.token_ids  # the trajectory, not an empty one


def test_pass_is_the_verifiers_flag_and_a_missing_reward_is_a_bug() -> None:
    graded = trial("completed", agent_started=True, reward=0.75)
    graded.verifier_result = {"rewards": {"reward": 0.75, "pass": 0.0}}
    assert outcome_of(graded, None).passed is False
    graded.verifier_result = {"rewards": {"reward": 1.0}}
    graded.reward = 1.0
    full = outcome_of(graded, None)
    assert full.passed is True and full.record.reward == 1.0 and full.blame is None
    missing = outcome_of(trial("completed", agent_started=True, reward=None), None)
    assert missing.error is SystemErrorKind.internal_error and missing.record.reward is None
