"""Who failed, the agent or the machinery? A policy must not turn its failures into exclusions.

First on hand-made trial results, then on real trials of a generated task (no sandbox
isolation, no model): agents that pass, fail, crash, break their own tool server, or meet a
broken engine or a sandbox that will not start.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.evaluation.attempts import agent_is_to_blame, attempt_from_trial, verifier_passed
from bureau.evaluation.report import AttemptRow, summarize_attempts
from bureau.sandbox.base import Runtime, Sandbox
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import Agent, AgentContext, AgentResult, NopAgent, OracleAgent
from bureau.trials.result import TrialResult
from bureau.trials.trial import run_trial


def trial(
    status: str = "completed",
    *,
    agent_started: bool = True,
    reward: float | None = None,
    verifier_result: dict[str, Any] | None = None,
) -> TrialResult:
    result = TrialResult(
        task_name="bureau/t",
        trial_name="t__1",
        trial_uri="file:///t",
        task_id={},
        task_checksum="",
        agent_info={},
        status=status,
        reward=reward,
        verifier_result=verifier_result,
    )
    if agent_started:
        result.agent_execution.started_at = datetime.now(UTC)
    return result


def test_the_verifiers_pass_flag_decides() -> None:
    # bureau's grader: pass is 1 only when every criterion passed.
    assert verifier_passed({"reward": 1.0, "pass": 1, "c1": 1}, 1.0)
    assert not verifier_passed({"reward": 0.75, "pass": 0, "c1": 1, "c2": 0}, 0.75)
    # The flag wins over the reward, whatever a verifier puts in "reward".
    assert not verifier_passed({"reward": 1.0, "pass": 0}, 1.0)
    assert verifier_passed({"reward": 0.5, "pass": 1}, 0.5)
    # No flag (reward.txt): a reward of 1.0 is the only pass.
    assert verifier_passed({"reward": 1.0}, 1.0)
    assert not verifier_passed({"reward": 0.99}, 0.99)


def test_graded_trial_becomes_a_verdict() -> None:
    result = trial(reward=0.5, verifier_result={"rewards": {"reward": 0.5, "pass": 0}})
    assert attempt_from_trial(result, "law") == AttemptRow("bureau/t", "law", False, 0.5)
    result = trial(reward=1.0, verifier_result={"rewards": {"reward": 1.0, "pass": 1}})
    assert attempt_from_trial(result, "law").passed is True


@pytest.mark.parametrize("kind", ["agent_timeout", "agent_error"])
def test_agent_failures_are_graded_zeros(kind: str) -> None:
    for started in (True, False):
        row = attempt_from_trial(trial(kind, agent_started=started), "law")
        assert (row.passed, row.reward, row.system_error, row.agent_failure) == (
            False, 0.0, None, kind,
        )  # fmt: skip


def test_a_tool_server_that_dies_under_the_agent_is_the_agents_failure() -> None:
    row = attempt_from_trial(trial("tool_server_failed", agent_started=True), "law")
    assert (row.passed, row.reward, row.agent_failure) == (False, 0.0, "tool_server_failed")
    # Before the agent ran, the server never came up: the machinery's failure.
    row = attempt_from_trial(trial("tool_server_failed", agent_started=False), "law")
    assert (row.passed, row.system_error) == (None, "tool_server_failed")


@pytest.mark.parametrize(
    "kind",
    [
        "sandbox_start_timeout", "sandbox_start_failed", "sandbox_unavailable", "sandbox_crashed",
        "upload_failed", "engine_error", "engine_timeout", "engine_unavailable",
        "verifier_timeout", "verifier_error", "reward_file_missing", "internal_error",
    ],
)  # fmt: skip
def test_machinery_failures_are_excluded(kind: str) -> None:
    assert not agent_is_to_blame(kind, agent_started=True)
    row = attempt_from_trial(trial(kind), "law")
    assert (row.passed, row.reward, row.system_error) == (None, None, kind)


def test_every_kind_is_classified_on_purpose() -> None:
    to_blame = {k.value for k in SystemErrorKind if agent_is_to_blame(k.value, True)}
    assert to_blame == {"agent_timeout", "agent_error", "tool_server_failed"}


def test_completed_without_a_reward_is_not_a_zero() -> None:
    row = attempt_from_trial(trial(reward=None), "law")
    assert row.system_error == "internal_error" and row.reward is None


# Real trials: a generated task, run without isolation (fast), graded by its own verifier.


class CrashingAgent(Agent):
    name = "crashing"

    async def run(self, ctx: AgentContext) -> AgentResult:
        (ctx.log_dir / "note.txt").write_text("about to fail\n")
        raise ValueError("the agent's own bug")


class ToolKillingAgent(Agent):
    """Breaks its own tool server, then calls it: the trial ends in tool_server_failed."""

    name = "tool-killer"
    uses_tools = True

    async def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.tools is not None
        ctx.tools.proc.kill()
        await asyncio.to_thread(ctx.tools.proc.wait)
        await ctx.tools.call("fs_list", {"path": "."}, 10.0)
        return AgentResult()


class EngineDownAgent(Agent):
    name = "engine-down"

    async def run(self, ctx: AgentContext) -> AgentResult:
        raise BureauSystemError(SystemErrorKind.engine_unavailable, "no engine answers")


class NoSandboxes(Runtime):
    name = "refusing"

    def start(self, task: TaskDir, *, timeout_s: float) -> Sandbox:
        raise OSError("cannot create the sandbox root")


def test_real_trials_attributed_and_summarized(small_dataset: Path, tmp_path: Path) -> None:
    import mcp  # noqa: F401

    from bureau.sandbox import get_runtime

    dirs = sorted(p for p in small_dataset.iterdir() if p.is_dir() and not (p / "steps").exists())
    task = load_task_dir(dirs[0])  # single-step: these fake agents run no [[steps]]
    runtime = get_runtime("local", isolation="none", root=tmp_path / "sbx")
    agents: list[tuple[Agent, Runtime]] = [
        (OracleAgent(), runtime),
        (NopAgent(), runtime),
        (CrashingAgent(), runtime),
        (ToolKillingAgent(), runtime),
        (EngineDownAgent(), runtime),
        (OracleAgent(), NoSandboxes()),
    ]

    async def main() -> list[TrialResult]:
        return [await run_trial(task, a, r, tmp_path / "trials") for a, r in agents]

    try:
        results = asyncio.run(main())
    finally:
        runtime.close()
    assert [r.status for r in results] == [
        "completed", "completed", "agent_error", "tool_server_failed", "engine_unavailable",
        "sandbox_start_failed",
    ]  # fmt: skip
    rows = [attempt_from_trial(r, "law") for r in results]
    assert [(r.passed, r.reward) for r in rows[:4]] == [
        (True, 1.0), (False, 0.0), (False, 0.0), (False, 0.0),
    ]  # fmt: skip
    overall = summarize_attempts(rows, seed=0).overall
    # One pass in four graded attempts; the engine and the sandbox are excluded.
    assert (overall.pass_at_1.successes, overall.pass_at_1.n) == (1, 4)
    assert overall.system_errors == {"engine_unavailable": 1, "sandbox_start_failed": 1}
    assert overall.agent_failures == {"agent_error": 1, "tool_server_failed": 1}
