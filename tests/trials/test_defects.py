"""Task defects: a verifier that fails on the oracle too drops its task; one that passes on the
oracle makes the trial the agent's 0. And the preeval taxonomy and the training stream follow."""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from answer_task import answer_task

from bureau.evaluation.preeval import load_results, taxonomy
from bureau.loop.data import TaskStream
from bureau.loop.rollout import TaskRef
from bureau.sandbox import get_runtime
from bureau.trials.agents import NopAgent
from bureau.trials.defects import TaskDefects
from bureau.trials.result import TrialResult
from bureau.trials.scheduler import run_trials

BROKEN = "#!/bin/bash\necho 'no reward for anyone'\n"  # never writes a reward
# Crashes on a missing answer (fragile, but the oracle passes), else grades it.
FRAGILE = """#!/bin/bash
[ -f /workspace/output/answer.txt ] || kill -KILL $$
echo 1 > /logs/verifier/reward.txt
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_verifier_that_fails_on_the_oracle_marks_its_task_broken(tmp_path: Path) -> None:
    broken = answer_task(tmp_path, "broken", BROKEN)
    fragile = answer_task(tmp_path, "fragile", FRAGILE)
    runtime = get_runtime("local", isolation="bwrap")
    defects = TaskDefects(runtime, tmp_path / "oracle-checks")
    try:
        results = asyncio.run(
            run_trials(
                [broken, broken, fragile], NopAgent, runtime, tmp_path / "trials", defects=defects
            )
        )
    finally:
        runtime.close()
    assert [r.status for r in results] == ["reward_file_missing"] * 2 + ["completed"]
    assert results[0].task_defect is not None and results[1].task_defect is not None
    assert results[0].task_defect["status"] == "reward_file_missing"
    assert Path(results[0].task_defect["oracle_trial"]).is_dir()
    # The oracle passes the fragile verifier: the agent's output broke it, a graded 0.
    assert results[2].task_defect is None and results[2].reward == 0.0
    assert "verifier_failed_on_output" in (results[2].verifier_result or {})
    assert [d["task"] for d in defects.report()] == ["bureau/broken"]
    assert len(list((tmp_path / "oracle-checks").iterdir())) == 2  # one oracle run per task
    found = taxonomy(load_results(tmp_path / "trials"))
    assert [d["task"] for d in found["task_defects"]] == ["bureau/broken"]


def test_preeval_counts_a_retried_attempt_by_its_last_one(tmp_path: Path) -> None:
    moment = datetime(2026, 12, 2, tzinfo=UTC)

    def save(name: str, status: str, retried: list[dict[str, str]]) -> None:
        folder = tmp_path / name
        folder.mkdir()
        result = TrialResult(
            task_name="t", trial_name=name, trial_uri="", task_id={"path": "x"},
            task_checksum="0", agent_info={"name": "harness"}, status=status,
            reward=1.0 if status == "completed" else None, retried=retried, started_at=moment,
        )  # fmt: skip
        result.write(folder)

    save("t__1", "sandbox_crashed", [])
    save("t__2", "completed", [{"trial_name": "t__1", "status": "sandbox_crashed"}])
    results = load_results(tmp_path)
    assert [r.trial_name for r in results] == ["t__2"]
    found = taxonomy(results)
    assert found["system_error_rate"] == 0.0 and found["retried"] == {"sandbox_crashed": 1}


def test_a_dropped_task_is_never_handed_out_again() -> None:
    tasks = [TaskRef(name, f"/tasks/{name}") for name in ("a", "b", "c")]
    stream = TaskStream(tasks, seed=1)
    stream.drop("b")
    handed = [stream.next()[1].name for _ in range(9)]
    assert "b" not in handed and set(handed) == {"a", "c"}
    stream.drop("a")
    stream.drop("c")
    with pytest.raises(ValueError, match="every task was dropped"):
        stream.next()


def test_a_dropped_task_stays_dropped_after_a_resume() -> None:
    tasks = [TaskRef(name, f"/tasks/{name}") for name in ("a", "b", "c")]
    stream = TaskStream(tasks, seed=1)
    stream.drop("b")
    state = stream.state()
    resumed = TaskStream(tasks, seed=1)
    resumed.load_state(state)
    assert resumed.dropped == {"b"}
    assert "b" not in {resumed.next()[1].name for _ in range(9)}
