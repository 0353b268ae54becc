import json
import subprocess
import sys
from pathlib import Path

import pytest
from grading_helpers import make_rubric

from bureau.grading import GradeReport, grade, write_outputs
from bureau.grading.cli import main
from bureau.grading.grader import CriterionResult

RUBRIC = {
    "format": "bureau-rubric/1",
    "task_id": "train-law-003-t07",
    "gold": {"liability_cap": 2450000, "counterparty": "Zebulon Holdings"},
    "criteria": [
        {"id": "c1", "type": "numeric", "description": "States the liability cap"}
        | {"field": "liability_cap", "expected": 2450000, "abs_tol": 0.5},
        {"id": "c2", "type": "text", "description": "Names the counterparty"}
        | {"field": "counterparty", "expected": "Zebulon Holdings"},
        {"id": "c3", "type": "file_exists", "path": "output/memo.txt"},
        {"id": "c4", "type": "entity_list", "field": "directors", "expected": ["Ana Ruiz"]},
    ],
}


@pytest.fixture
def task(tmp_path: Path, workspace: Path) -> tuple[Path, Path, Path]:
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(RUBRIC))
    answer = {"liability_cap": "$2.45m", "counterparty": "Initech", "directors": ["Ana Ruiz"]}
    (workspace / "output" / "answer.json").write_text(json.dumps(answer))
    (workspace / "output" / "memo.txt").write_text("memo")
    return rubric, workspace, tmp_path / "verifier"


def test_report_values() -> None:
    report = GradeReport(
        task_id="t",
        results=[
            CriterionResult(id="c1", type="numeric", passed=True, reason="ok"),
            CriterionResult(id="c2", type="text", passed=False, reason="no"),
        ],
    )
    assert (report.reward, report.passed, report.num_passed) == (0.5, False, 1)
    assert report.to_reward_values() == {"reward": 0.5, "pass": 0, "c1": 1, "c2": 0}


def test_cli_writes_reward_and_grading(
    task: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rubric, workspace, out = task
    code = main(["--rubric", str(rubric), "--workspace", str(workspace), "--out", str(out)])
    assert code == 0
    reward = json.loads((out / "reward.json").read_text())
    assert reward == {"reward": 0.75, "pass": 0, "c1": 1, "c2": 0, "c3": 1, "c4": 1}
    grading = json.loads((out / "grading.json").read_text())
    assert grading["task_id"] == "train-law-003-t07"
    assert (grading["num_passed"], grading["num_criteria"]) == (3, 4)
    assert "gold" not in grading
    assert grading["results"][1] == {
        "id": "c2",
        "type": "text",
        "passed": False,
        "reason": "expected 'Zebulon Holdings' (normalized), got 'Initech'",
        "description": "Names the counterparty",
    }
    table = capsys.readouterr().out
    assert "reward 0.75 (3/4 criteria passed)" in table
    assert "FAIL  c2  text" in table
    assert "PASS  c1  numeric" in table


def test_bad_rubric_exits_2_without_reward(
    task: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rubric, workspace, out = task
    rubric.write_text(json.dumps({**RUBRIC, "criteria": [{"id": "c1", "type": "file_exists"}]}))
    code = main(["--rubric", str(rubric), "--workspace", str(workspace), "--out", str(out)])
    assert code == 2
    assert not (out / "reward.json").exists()
    err = capsys.readouterr().err
    assert "rubric.json: criteria.0.file_exists.path: Field required" in err


def test_judge_criteria_leave_requests_and_no_reward(
    task: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rubric, workspace, out = task
    judge = {"id": "c5", "type": "judge", "field": "counterparty", "guidance": "names Initech"}
    rubric.write_text(json.dumps({**RUBRIC, "criteria": [*RUBRIC["criteria"], judge]}))
    args = ["--rubric", str(rubric), "--out", str(out), "--workspace", str(workspace)]
    assert main(args) == 0
    assert not (out / "reward.json").exists()
    requests = json.loads((out / "judge-requests.json").read_text())
    assert [(r["id"], r["work"]) for r in requests["requests"]] == [("c5", "Initech")]
    assert json.loads((out / "grading.json").read_text())["pending"] == ["c5"]
    assert "1 await the judge (c5)" in capsys.readouterr().out


def test_a_missing_workspace_exits_2(
    task: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric, _, out = task
    args = ["--rubric", str(rubric), "--out", str(out)]
    assert main([*args, "--workspace", str(tmp_path / "absent")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not (out / "reward.json").exists()


def test_python_dash_m_entry_point(task: tuple[Path, Path, Path]) -> None:
    rubric, workspace, out = task
    command = [sys.executable, "-m", "bureau.grading", "--rubric", str(rubric)]
    command += ["--workspace", str(workspace), "--out", str(out)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert json.loads((out / "reward.json").read_text())["reward"] == 0.75
    assert "bureau grading: task train-law-003-t07" in completed.stdout


def test_write_outputs_creates_the_directory(workspace: Path, tmp_path: Path) -> None:
    report = grade(make_rubric({"id": "c1", "type": "file_exists", "path": "x"}), workspace)
    out = tmp_path / "deep" / "verifier"
    write_outputs(report, out)
    assert json.loads((out / "reward.json").read_text()) == {"reward": 0.0, "pass": 0, "c1": 0}
    assert sorted(p.name for p in out.iterdir()) == ["grading.json", "reward.json"]
