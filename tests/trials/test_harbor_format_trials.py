"""Tasks written in Harbor's format, run by bureau's own trial runner in a real sandbox.

What they use is what Harbor gives them: the image's WORKDIR, ENV and copied files (read from
the Dockerfile, not built), the `[environment.env]`, `[solution.env]` and `[verifier.env]`
tables, a solve.sh whose exit code does not stop verification, a reward.json of named rewards
without a "reward" key, `/logs/artifacts`, and the separate-verifier mode, where test.sh runs
in a fresh environment built from tests/Dockerfile that holds only the artifacts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bureau.sandbox import get_runtime
from bureau.tasks.taskdir import load_task_dir
from bureau.trials.agents import NopAgent, OracleAgent
from bureau.trials.result import TrialResult
from bureau.trials.trial import TrialConfig, run_trial

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

DOCKERFILE = """FROM ubuntu:24.04
ENV GREETING="hello from the image"
WORKDIR /app
COPY data/ ./data/
RUN mkdir -p /app/output
"""
TASK_TOML = """schema_version = "1.4"
[task]
name = "tests/harbor-shaped"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
env = { CHECK_WORD = "${BUREAU_TEST_WORD:-verified}" }
[environment]
network_mode = "no-network"
env = { TEAM = "ops" }
[solution.env]
SOLVER = "oracle"
"""
SOLVE_SH = """#!/bin/bash
# Relative paths resolve in the image's WORKDIR; the last command fails on purpose.
echo "$GREETING/$TEAM/$SOLVER/$(cat data/seed.txt)" > output/result.txt
echo "handed over" > /logs/artifacts/note.txt
false
"""
TEST_SH = """#!/bin/bash
want="hello from the image/ops/oracle/42"
got="$(cat /app/output/result.txt 2>/dev/null)"
correct=0; [ "$got" = "$want" ] && correct=1
env_ok=0; [ "$CHECK_WORD" = "verified" ] && [ "$PWD" = "/app" ] && env_ok=1
printf '{"correctness": %s, "environment": %s}\\n' "$correct" "$env_ok" \\
  > /logs/verifier/reward.json
echo "got [$got] check [$CHECK_WORD] pwd [$PWD]"
"""


def harbor_task(root: Path) -> Path:
    for sub in ("environment/data", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    (root / "instruction.md").write_text("Write the greeting to /app/output/result.txt.\n")
    (root / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (root / "environment" / "data" / "seed.txt").write_text("42\n")
    (root / "tests" / "test.sh").write_text(TEST_SH)
    (root / "solution" / "solve.sh").write_text(SOLVE_SH)
    (root / "task.toml").write_text(TASK_TOML)
    return root


def trial(tmp_path: Path, task_dir: Path, agent: str) -> TrialResult:
    runtime = get_runtime("local", root=tmp_path / "sandboxes")
    chosen = OracleAgent() if agent == "oracle" else NopAgent()
    try:
        return asyncio.run(
            run_trial(load_task_dir(task_dir), chosen, runtime, tmp_path / agent, TrialConfig())
        )
    finally:
        runtime.close()


def test_a_harbor_shaped_task_gets_what_harbor_would_give_it(tmp_path: Path) -> None:
    task_dir = harbor_task(tmp_path / "task")
    done = trial(tmp_path, task_dir, "oracle")
    assert done.exception_info is None, done.exception_info
    # Both named rewards, no "reward" key: the scalar is their mean.
    assert done.verifier_result == {"rewards": {"correctness": 1.0, "environment": 1.0}}
    assert done.reward == 1.0
    assert done.agent_metadata["solve_exit_code"] == 1  # verified anyway, as Harbor does
    nothing = trial(tmp_path, task_dir, "nop")
    assert nothing.exception_info is None
    assert nothing.verifier_result == {"rewards": {"correctness": 0.0, "environment": 1.0}}
    assert nothing.reward == 0.5


SEPARATE_TOML = TASK_TOML.replace(
    "[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n'
).replace('schema_version = "1.4"\n', 'schema_version = "1.4"\nartifacts = ["output/result.txt"]\n')
VERIFIER_DOCKERFILE = """FROM python:3.12-slim
WORKDIR /grader
ENV GRADER=separate
COPY . /tests/
"""
SEPARATE_TEST_SH = """#!/bin/bash
ok=1
[ "$(cat /app/output/result.txt)" = "hello from the image/ops/oracle/42" ] || ok=0
[ "$(cat /logs/artifacts/note.txt)" = "handed over" ] || ok=0
[ -e /app/data/seed.txt ] && ok=0          # only artifacts reach the verifier
[ -e /app/planted.txt ] && ok=0
# its own image's WORKDIR and ENV, not the agent's; [environment.env] applies, as in Harbor
[ "$PWD" = "/grader" ] && [ "$GRADER" = "separate" ] && [ -z "$GREETING" ] || ok=0
[ "$TEAM" = "ops" ] || ok=0
echo "$ok" > /logs/verifier/reward.txt
ls -la /app /app/output /logs/artifacts /tests 2>&1
echo "pwd=$PWD grader=$GRADER greeting=$GREETING team=$TEAM"
"""


def test_a_separate_verifier_sees_only_the_artifacts(tmp_path: Path) -> None:
    task_dir = harbor_task(tmp_path / "task")
    (task_dir / "task.toml").write_text(SEPARATE_TOML)
    (task_dir / "tests" / "Dockerfile").write_text(VERIFIER_DOCKERFILE)
    (task_dir / "tests" / "test.sh").write_text(SEPARATE_TEST_SH)
    with (task_dir / "solution" / "solve.sh").open("a") as solve:
        solve.write("echo planted > /app/planted.txt\n")
    task = load_task_dir(task_dir)
    assert task.separate_verifier and task.verifier_image is not None
    done = trial(tmp_path, task_dir, "oracle")
    log = next((tmp_path / "oracle").rglob("test-stdout.txt")).read_text()
    assert done.exception_info is None, done.exception_info
    assert done.reward == 1.0, log
    # The artifacts are kept with the trial, as Harbor keeps them.
    (kept,) = [p for p in (tmp_path / "oracle").rglob("result.txt") if "artifacts" in p.parts]
    assert kept.read_text().startswith("hello from the image")
    nothing = trial(tmp_path, task_dir, "nop")
    assert nothing.exception_info is None and nothing.reward == 0.0


def test_an_artifact_that_cannot_be_placed_is_the_agents_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verifier grades without it (reward 0 here), rather than the trial becoming a
    masked upload failure the agent could bring about on purpose."""
    from bureau.errors import BureauSystemError, SystemErrorKind
    from bureau.sandbox.local import LocalSandbox

    task_dir = harbor_task(tmp_path / "task")
    (task_dir / "task.toml").write_text(SEPARATE_TOML)
    (task_dir / "tests" / "Dockerfile").write_text(VERIFIER_DOCKERFILE)
    (task_dir / "tests" / "test.sh").write_text(SEPARATE_TEST_SH)
    real = LocalSandbox.upload

    def upload(self: LocalSandbox, src: Path, dest: str) -> None:
        if dest.startswith("/app/output"):
            raise BureauSystemError(SystemErrorKind.upload_failed, "no room")
        real(self, src, dest)

    monkeypatch.setattr(LocalSandbox, "upload", upload)
    done = trial(tmp_path, task_dir, "oracle")
    assert done.status == "completed" and done.reward == 0.0, done.exception_info
    (note,) = (tmp_path / "oracle").rglob("not-handed-over.txt")
    assert "/app/output/result.txt" in note.read_text()


def bureau(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "bureau"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_check_refuses_what_it_cannot_run_and_says_why(tmp_path: Path) -> None:
    task_dir = harbor_task(tmp_path / "task")
    dockerfile = task_dir / "environment" / "Dockerfile"
    dockerfile.write_text(DOCKERFILE + "RUN apt-get install -y curl\n")
    trials = ["--trials-dir", str(tmp_path / "trials")]
    done = bureau("tasks", "check", str(task_dir), "--agent", "oracle", *trials)
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, out
    assert "line 6" in out and "RUN apt-get install -y curl" in out and "--runtime docker" in out
    assert "Traceback" not in out
    valid = bureau("tasks", "validate", str(task_dir))
    assert valid.returncode == 1 and "line 6" in " ".join(valid.stdout.split())
    # The format alone is fine: the Docker runtime would build it.
    assert bureau("tasks", "validate", str(task_dir), "--runtime", "docker").returncode == 0


def test_a_task_that_asks_for_a_network_is_refused_or_run_offline_when_asked(
    tmp_path: Path,
) -> None:
    task_dir = harbor_task(tmp_path / "task")
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace('network_mode = "no-network"\n', ""))
    trials = ["--trials-dir", str(tmp_path / "trials")]
    refused = bureau("tasks", "check", str(task_dir), "--agent", "oracle", *trials)
    out = " ".join(refused.stdout.split())
    assert refused.returncode == 1, out
    assert "network_mode = 'public'" in out and "--offline-public-tasks" in out
    assert not (tmp_path / "trials").exists() or not any((tmp_path / "trials").iterdir())
    offline = bureau(
        "tasks", "check", str(task_dir), "--agent", "oracle", "--offline-public-tasks", *trials
    )
    out = " ".join(offline.stdout.split())
    assert offline.returncode == 0, out
    assert "runs offline although it asks for a network" in out
    result = json.loads(next((tmp_path / "trials").rglob("result.json")).read_text())
    assert result["reward"] == 1.0


STEPS_TOML = """schema_version = "1.4"
{extra}
[task]
name = "tests/two-steps"
[[steps]]
name = "a"
{min_reward}
[[steps]]
name = "b"
artifacts = ["/app/b.txt"]
[steps.verifier]
environment_mode = "separate"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
network_mode = "no-network"
"""
STEP_A_TEST = """#!/bin/bash
ok=0
[ "$(cat /app/a.txt)" = a ] && [ -f /app/seed.txt ] && [ -f /app/setup-ran.txt ] && ok=1
echo "{\\"reward\\": $ok, \\"extra\\": 1}" > /logs/verifier/reward.json
"""
STEP_B_TEST = """#!/bin/bash
ok=0
# a separate verifier: the artifact, and nothing else of the agent's
[ "$(cat /app/b.txt)" = b ] && [ ! -e /app/a.txt ] && ok=1
echo $ok > /logs/verifier/reward.txt
"""


def steps_task(root: Path, *, min_reward: bool = False, final: bool = False) -> Path:
    (root / "environment").mkdir(parents=True)
    (root / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    extra = 'multi_step_reward_strategy = "final"' if final else ""
    threshold = "min_reward = 1.0" if min_reward else ""
    (root / "task.toml").write_text(STEPS_TOML.format(extra=extra, min_reward=threshold))
    for name, test in (("a", STEP_A_TEST), ("b", STEP_B_TEST)):
        step = root / "steps" / name
        for sub in ("tests", "solution", "workdir"):
            (step / sub).mkdir(parents=True)
        (step / "instruction.md").write_text(f"Write {name} to /app/{name}.txt.\n")
        (step / "solution" / "solve.sh").write_text(f"echo {name} > /app/{name}.txt\n")
        (step / "tests" / "test.sh").write_text(test)
    (root / "steps" / "a" / "workdir" / "seed.txt").write_text("seed\n")
    (root / "steps" / "a" / "workdir" / "setup.sh").write_text("echo ran > /app/setup-ran.txt\n")
    # Step b's setup needs what the agent made in step a: without it, the step scores 0.
    (root / "steps" / "b" / "workdir" / "setup.sh").write_text("test -f /app/a.txt\n")
    (root / "steps" / "b" / "tests" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /app\nCOPY . /tests/\n"
    )
    return root


def step_results_of(done: TrialResult) -> list[dict[str, Any]]:
    assert done.verifier_result is not None
    return list(done.verifier_result["step_results"])


def step_rewards(done: TrialResult) -> list[dict[str, float]]:
    return [step["rewards"] for step in step_results_of(done)]


def test_a_multi_step_task_runs_step_by_step_in_one_sandbox(tmp_path: Path) -> None:
    task_dir = steps_task(tmp_path / "task")
    done = trial(tmp_path, task_dir, "oracle")
    assert done.exception_info is None, done.exception_info
    assert step_rewards(done) == [{"reward": 1.0, "extra": 1.0}, {"reward": 1.0}]
    # Per-key means over the steps; step b has no "extra", which counts 0.
    assert done.verifier_result is not None
    assert done.verifier_result["rewards"] == {"extra": 0.5, "reward": 1.0}
    assert done.reward == 1.0
    nothing = trial(tmp_path, task_dir, "nop")
    assert nothing.exception_info is None and nothing.status == "completed"
    steps = step_results_of(nothing)
    assert steps[0]["rewards"] == {"reward": 0.0, "extra": 1.0}
    # nop never wrote a.txt, so step b's setup fails: a 0 for the model, not a system error.
    assert steps[1]["rewards"] == {"reward": 0.0} and "setup.sh exited 1" in steps[1]["reason"]
    assert nothing.reward == 0.0


def test_a_step_below_its_min_reward_ends_the_trial(tmp_path: Path) -> None:
    done = trial(tmp_path, steps_task(tmp_path / "task", min_reward=True), "nop")
    assert step_rewards(done) == [{"reward": 0.0, "extra": 1.0}]
    assert done.reward == 0.0


def test_the_final_strategy_takes_the_last_steps_rewards(tmp_path: Path) -> None:
    done = trial(tmp_path, steps_task(tmp_path / "task", final=True), "oracle")
    assert done.verifier_result is not None
    assert done.verifier_result["rewards"] == {"reward": 1.0}
