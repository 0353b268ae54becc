"""Trial lifecycle with a scripted sandbox: every failure lands on the phase it came from."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import ExecResult, Phase, Runtime, Sandbox
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import Agent, AgentContext, AgentResult, NopAgent
from bureau.trials.trial import TrialConfig, run_trial


def make_task(root: Path, agent_timeout: float = 30.0) -> TaskDir:
    task = root / "task"
    for sub in ("environment/workspace", "tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "instruction.md").write_text("Do it.\n")
    (task / "task.toml").write_text(
        f'schema_version = "1.4"\n[agent]\ntimeout_sec = {agent_timeout}\n'
        "[verifier]\ntimeout_sec = 20.0\n"
    )
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\n")
    return load_task_dir(task)


class ScriptedSandbox(Sandbox):
    """Runs nothing: the verifier 'writes' the reward files it was given."""

    def __init__(self, root: Path, reward_files: Mapping[str, str], verifier: ExecResult) -> None:
        self.id = "scripted"
        self.workdir = "/workspace"
        self.verifier_dir = root / "verifier-out"
        self.verifier_dir.mkdir(parents=True)
        self.reward_files = reward_files
        self.verifier = verifier
        self.stops = 0

    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout_s: float,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> ExecResult:
        if phase == "verifier":
            for name, text in self.reward_files.items():
                (self.verifier_dir / name).write_text(text)
            return self.verifier
        return ExecResult(0, "", "", False, 0.0)

    def spawn(self, cmd: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    def upload(self, src: Path, dest: str) -> None:
        pass

    def download(self, src: str, dest: Path) -> None:
        assert src == "/logs/verifier"
        shutil.copytree(self.verifier_dir, dest, dirs_exist_ok=True)

    def stop(self) -> None:
        self.stops += 1


class ScriptedRuntime(Runtime):
    name = "scripted"

    def __init__(self, make: Callable[[], Sandbox]) -> None:
        self.make = make
        self.started: list[Sandbox] = []

    def start(self, task: TaskDir, *, timeout_s: float) -> Sandbox:
        sandbox = self.make()
        self.started.append(sandbox)
        return sandbox


OK = ExecResult(0, "graded\n", "", False, 0.1)


def run(task: TaskDir, runtime: Runtime, tmp: Path, agent: Agent | None = None, **cfg: float):
    config = TrialConfig(**cfg)  # type: ignore[arg-type]
    return asyncio.run(run_trial(task, agent or NopAgent(), runtime, tmp / "trials", config))


def scripted(tmp: Path, files: Mapping[str, str], verifier: ExecResult = OK) -> ScriptedRuntime:
    return ScriptedRuntime(lambda: ScriptedSandbox(tmp, files, verifier))


def test_completed_trial_writes_a_harbor_style_directory(tmp_path: Path) -> None:
    runtime = scripted(tmp_path, {"reward.json": '{"reward": 0.75, "pass": 0}'})
    result = run(make_task(tmp_path), runtime, tmp_path)
    assert (result.status, result.reward) == ("completed", 0.75)
    trial_dir = tmp_path / "trials" / result.trial_name
    saved = json.loads((trial_dir / "result.json").read_text())
    assert saved["verifier_result"]["rewards"] == {"reward": 0.75, "pass": 0.0}
    assert saved["agent_info"]["name"] == "nop"
    assert (trial_dir / "verifier" / "test-stdout.txt").read_text() == "graded\n"
    assert json.loads((trial_dir / "config.json").read_text())["verifier_timeout_s"] == 20.0
    assert not (trial_dir / "exception.txt").exists()
    assert runtime.started[0].stops == 1  # type: ignore[attr-defined]


def test_missing_reward_is_a_system_error_not_zero(tmp_path: Path) -> None:
    runtime = scripted(tmp_path, {})
    result = run(make_task(tmp_path), runtime, tmp_path)
    assert result.status == SystemErrorKind.reward_file_missing and result.reward is None
    assert (tmp_path / "trials" / result.trial_name / "exception.txt").exists()


def test_non_finite_reward_is_a_verifier_error(tmp_path: Path) -> None:
    result = run(make_task(tmp_path), scripted(tmp_path, {"reward.txt": "nan\n"}), tmp_path)
    assert result.status == SystemErrorKind.verifier_error and result.reward is None


def test_verifier_timeout_is_kept_apart(tmp_path: Path) -> None:
    late = ExecResult(-9, "", "", True, 20.0)
    result = run(make_task(tmp_path), scripted(tmp_path, {"reward.txt": "1"}, late), tmp_path)
    assert result.status == SystemErrorKind.verifier_timeout


class SlowAgent(Agent):
    name = "slow"

    async def run(self, ctx: AgentContext) -> AgentResult:
        await asyncio.sleep(60)
        return AgentResult()


class BrokenAgent(Agent):
    name = "broken"

    async def run(self, ctx: AgentContext) -> AgentResult:
        raise RuntimeError("boom")


def test_agent_timeout_is_not_a_verifier_failure_and_still_stops(tmp_path: Path) -> None:
    runtime = scripted(tmp_path, {"reward.txt": "1"})
    started = time.monotonic()
    result = run(make_task(tmp_path), runtime, tmp_path, SlowAgent(), max_agent_timeout_s=0.2)
    assert result.status == SystemErrorKind.agent_timeout
    assert time.monotonic() - started < 30
    assert result.verifier.started_at is None  # the verifier never ran
    assert runtime.started[0].stops == 1  # type: ignore[attr-defined]


def test_agent_crash_is_attributed_to_the_agent(tmp_path: Path) -> None:
    result = run(make_task(tmp_path), scripted(tmp_path, {}), tmp_path, BrokenAgent())
    assert result.status == SystemErrorKind.agent_error
    assert result.exception_info is not None and "boom" in result.exception_info.exception_message


def test_sandbox_start_failures(tmp_path: Path) -> None:
    def refuse() -> Sandbox:
        raise BureauSystemError(SystemErrorKind.sandbox_unavailable, "no bubblewrap")

    def crash() -> Sandbox:
        raise OSError("bwrap: Can't mount proc")

    task = make_task(tmp_path)
    assert run(task, ScriptedRuntime(refuse), tmp_path).status == "sandbox_unavailable"
    assert run(task, ScriptedRuntime(crash), tmp_path).status == "sandbox_start_failed"


def test_sandbox_start_timeout(tmp_path: Path) -> None:
    def hang() -> Sandbox:
        time.sleep(2.5)
        raise AssertionError("unreachable in time")

    result = run(make_task(tmp_path), ScriptedRuntime(hang), tmp_path, sandbox_start_timeout_s=0.1)
    assert result.status == SystemErrorKind.sandbox_start_timeout


@pytest.mark.parametrize("multiplier, expected", [(1.0, 30.0), (2.0, 60.0)])
def test_agent_timeout_comes_from_task_toml_times_multiplier(
    tmp_path: Path, multiplier: float, expected: float
) -> None:
    result = run(
        make_task(tmp_path),
        scripted(tmp_path, {"reward.txt": "0"}),
        tmp_path,
        agent_timeout_multiplier=multiplier,
    )
    config = json.loads((tmp_path / "trials" / result.trial_name / "config.json").read_text())
    assert config["agent_timeout_s"] == expected


def test_machinery_failures_are_retried_from_scratch(tmp_path: Path) -> None:
    """Two sandboxes that fail to start, then one that works: one completed trial, with the
    two failed attempts listed (their directories kept) and no turn of theirs in it."""
    from bureau.trials.retry import RetryPolicy, with_retries

    starts = iter([OSError("bwrap: no room"), OSError("bwrap: no room"), None])

    def flaky() -> Sandbox:
        if (error := next(starts)) is not None:
            raise error
        return ScriptedSandbox(tmp_path, {"reward.txt": "1"}, OK)

    runtime = ScriptedRuntime(flaky)
    task = make_task(tmp_path)
    agents: list[Agent] = []

    def attempt() -> Any:
        agents.append(NopAgent())
        return run_trial(task, agents[-1], runtime, tmp_path / "trials", TrialConfig())

    result = asyncio.run(with_retries(attempt, RetryPolicy(backoff_s=0.01), tmp_path / "trials"))
    assert (result.status, result.reward, len(agents)) == ("completed", 1.0, 3)
    assert [r["status"] for r in result.retried] == ["sandbox_start_failed"] * 2
    saved = json.loads((tmp_path / "trials" / result.trial_name / "result.json").read_text())
    assert len(saved["retried"]) == 2
    assert all((tmp_path / "trials" / r["trial_name"]).is_dir() for r in result.retried)


def test_retries_are_bounded_and_the_agents_failures_are_not_retried(tmp_path: Path) -> None:
    from bureau.trials.retry import RetryPolicy, with_retries

    def never() -> Sandbox:
        raise OSError("bwrap: no room")

    task = make_task(tmp_path)
    policy = RetryPolicy(max_retries=2, backoff_s=0.01)
    failed = asyncio.run(
        with_retries(
            lambda: run_trial(task, NopAgent(), ScriptedRuntime(never), tmp_path / "a"), policy
        )
    )
    assert failed.status == "sandbox_start_failed" and len(failed.retried) == 2
    calls: list[int] = []

    def crash() -> Any:
        calls.append(1)
        runtime = scripted(tmp_path / f"b{len(calls)}", {})
        return run_trial(task, BrokenAgent(), runtime, tmp_path / "b")

    crashed = asyncio.run(with_retries(crash, policy))
    assert crashed.status == "agent_error" and crashed.retried == [] and len(calls) == 1


def test_a_failure_after_the_agent_ran_is_never_a_second_chance(tmp_path: Path) -> None:
    """A retry draws a new sample: what happens once the agent has run (here the tests do not
    upload) stays a masked trial, so no agent can trade a bad attempt for another."""
    from bureau.trials.retry import RetryPolicy, with_retries

    class NoTests(ScriptedSandbox):
        def upload(self, src: Path, dest: str) -> None:
            raise OSError("no room for /tests")

    calls: list[int] = []

    def attempt() -> Any:
        calls.append(1)
        runtime = ScriptedRuntime(lambda: NoTests(tmp_path / f"s{len(calls)}", {}, OK))
        return run_trial(make_task(tmp_path), NopAgent(), runtime, tmp_path / "trials")

    result = asyncio.run(with_retries(attempt, RetryPolicy(backoff_s=0.01)))
    assert result.status == "upload_failed" and result.retried == [] and len(calls) == 1
