"""LLM-judge criteria end to end: bureau's real grader (the zipapp) in a real sandbox leaves the
judge's questions, and the trial asks a judge on 127.0.0.1 (the scripted fault server) from
the host: verdicts score, an unparseable verdict fails its criterion, an unreachable judge is a
masked system error, and a run without a judge fails or skips as the user chose."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bureau.grading.zipapp import build_zipapp
from bureau.judge import JudgeClient, JudgeConfig
from bureau.sandbox import get_runtime
from bureau.tasks.taskdir import load_task_dir
from bureau.trials.agents import OracleAgent
from bureau.trials.judging import skipped_judge_criteria
from bureau.trials.result import TrialResult
from bureau.trials.trial import TrialConfig, run_trial

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge"))
from fault_server import VERDICT_NO, VERDICT_YES, FaultServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

RUBRIC = {
    "format": "bureau-rubric/1",
    "task_id": "judged",
    "criteria": [
        {"id": "c1", "type": "file_exists", "path": "output/answer.json"},
        {
            "id": "c2", "type": "judge", "field": "summary", "reference": "Initech, $2.45m cap",
            "guidance": "Does the summary name the counterparty and the liability cap?",
        },
    ],
}  # fmt: skip
TEST_SH = """#!/bin/bash
exec python3 /tests/grader.pyz --rubric /tests/rubric.json --workspace "$PWD" \\
  --out /logs/verifier
"""
SOLVE_SH = """#!/bin/bash
mkdir -p output
echo '{"summary": "The counterparty is Initech; liability is capped at $2.45m."}' \\
  > output/answer.json
"""


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("judged") / "task"
    for sub in ("environment/workspace/output", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    (root / "instruction.md").write_text("Summarise the contract in output/answer.json.\n")
    (root / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /workspace\n")
    (root / "tests" / "rubric.json").write_text(json.dumps(RUBRIC))
    (root / "tests" / "test.sh").write_text(TEST_SH)
    build_zipapp(root / "tests" / "grader.pyz")
    (root / "solution" / "solve.sh").write_text(SOLVE_SH)
    (root / "task.toml").write_text(
        '[environment]\nnetwork_mode = "no-network"\n[verifier]\ntimeout_sec = 60\n'
    )
    return root


def trial(
    tmp_path: Path, task_dir: Path, url: str | None, missing: str = "fail", **settings: Any
) -> TrialResult:
    runtime = get_runtime("local", root=tmp_path / "sbx")

    async def go() -> TrialResult:
        config = TrialConfig(missing_judge=missing)  # type: ignore[arg-type]
        if url is None:
            return await run_trial(
                load_task_dir(task_dir), OracleAgent(), runtime, tmp_path / "trials", config
            )
        # The fault server answers at once: a request limit far past that, so that a loaded
        # machine (a clean clone beside a bench) cannot turn a slow answer into a retry. At
        # 0.5 s, one run saw 2 requests of the 3 it counts: the third had timed out.
        options = {"timeout_s": 30.0, "backoff_base_s": 0.01, "max_attempts": 3} | settings
        judge_config = JudgeConfig(url=url, model="judge", **options)
        async with JudgeClient(judge_config, ["sk-test"]) as judge:
            return await run_trial(
                load_task_dir(task_dir), OracleAgent(), runtime, tmp_path / "trials", config,
                judge=judge,
            )  # fmt: skip

    try:
        return asyncio.run(go())
    finally:
        runtime.close()


def grading(tmp_path: Path) -> dict[str, Any]:
    (path,) = (tmp_path / "trials").rglob("grading.json")
    return dict(json.loads(path.read_text()))


@pytest.mark.parametrize(("verdict", "reward"), [(VERDICT_YES, 1.0), (VERDICT_NO, 0.5)])
def test_the_judges_verdict_scores_its_criterion(
    tmp_path: Path, task_dir: Path, verdict: str, reward: float
) -> None:
    with FaultServer([("verdict", verdict)]) as server:
        done = trial(tmp_path, task_dir, server.url)
    assert done.status == "completed" and done.reward == reward, done.exception_info
    (asked,) = server.seen
    assert "capped at $2.45m" in asked.body["messages"][1]["content"]
    assert "Initech, $2.45m cap" in asked.body["messages"][1]["content"]
    judged = grading(tmp_path)["results"][-1]
    assert judged["id"] == "c2" and judged["passed"] == (reward == 1.0)
    assert judged["reason"] in ("matches the reference", "the figure differs")


def test_an_unparseable_verdict_fails_the_criterion_not_the_trial(
    tmp_path: Path, task_dir: Path
) -> None:
    with FaultServer([("verdict", "Sure, looks fine!")]) as server:
        done = trial(tmp_path, task_dir, server.url)
    assert done.status == "completed" and done.reward == 0.5
    assert "no valid verdict" in grading(tmp_path)["results"][-1]["reason"]


def test_an_unreachable_judge_is_a_masked_system_error(tmp_path: Path, task_dir: Path) -> None:
    with FaultServer([("503", None)]) as server:
        done = trial(tmp_path, task_dir, server.url)
    assert done.status == "judge_unavailable" and done.reward is None
    assert len(server.seen) == 3  # max_attempts


def test_without_a_judge_the_run_fails_or_skips_as_chosen(tmp_path: Path, task_dir: Path) -> None:
    failed = trial(tmp_path / "fail", task_dir, None)
    assert failed.status == "judge_unavailable" and failed.reward is None
    skipped = trial(tmp_path / "skip", task_dir, None, missing="skip")
    assert skipped.status == "completed" and skipped.reward == 1.0
    assert grading(tmp_path / "skip")["skipped"] == ["c2"]
    # A run says what it graded without, per task: the skipped trial, not the failed one.
    assert skipped_judge_criteria(tmp_path / "skip" / "trials") == {skipped.task_name: {"c2": 1}}
    assert skipped_judge_criteria(tmp_path / "fail" / "trials") == {}


def test_tasks_check_takes_a_judge_from_a_file(tmp_path: Path, task_dir: Path) -> None:
    import os
    import subprocess

    bureau = str(Path(sys.executable).parent / "bureau")
    check = [bureau, "tasks", "check", str(task_dir), "--agent", "oracle"]
    env = {**os.environ, "BUREAU_JUDGE_API_KEY": "sk-from-env"}
    with FaultServer([("verdict", VERDICT_YES)]) as server:
        settings = tmp_path / "judge.toml"
        settings.write_text(f'url = "{server.url}"\nmodel = "judge"\ntimeout_s = 5\n')
        judged = subprocess.run(
            [*check, "--judge", str(settings), "--trials-dir", str(tmp_path / "judged")],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert [seen.key for seen in server.seen] == ["sk-from-env"]
    without = subprocess.run(
        [*check, "--trials-dir", str(tmp_path / "without")], capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert without.returncode == 1 and "judge_unavailable" in without.stdout
    skipped = subprocess.run(
        [*check, "--missing-judge", "skip", "--trials-dir", str(tmp_path / "skipped")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert skipped.returncode == 0, skipped.stdout
    assert "judge criteria skipped (no judge): 1 criteria of 1 task" in skipped.stdout
    assert "c2 (1 trial)" in skipped.stdout
