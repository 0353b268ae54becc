"""The teacher's `lookup_by_code` strategy: the program it writes, run for real on a workbook."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest
from bootstrap_fakes import INSTRUCTION, register_task

from bureau.bootstrap.config import MISTAKES, Mistake
from bureau.bootstrap.teacher import DONE, GIVE_UP_MESSAGE, Teacher, answer_columns
from bureau.harness.parse import parse_assistant

HEADER = ("Contract ID", "Counterparty", "Type", "Annual Value (USD)", "Governing Law")
ROWS = [
    ("C-103", "Petrov Analytics", "Master Services Agreement", 1075000, "Ontario"),
    ("C-107", "Castillo Systems", "Software License Agreement", 2010000, "New York"),
]


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "contracts").mkdir(parents=True)
    (root / "output").mkdir()  # as every task's image makes it (RUN mkdir -p .../output)
    for name, rows in (("contract_register.xlsx", ROWS), ("old_register.xlsx", ROWS[:1])):
        book = openpyxl.Workbook()
        sheet = book.active
        for row in (HEADER, *rows):
            sheet.append(row)
        book.save(root / "contracts" / name)
    return root


def _task(root: Path):  # type: ignore[no-untyped-def]
    task = register_task()
    task.workspace = root
    task.workspace_files = ["contracts/contract_register.xlsx", "contracts/old_register.xlsx"]
    return task


def _run_program(text: str, root: Path) -> subprocess.CompletedProcess[str]:
    parsed = parse_assistant(text)
    assert parsed.error is None and len(parsed.tool_calls) == 1, text
    call = parsed.tool_calls[0]
    assert call.name == "code_run_python"
    code = str(call.arguments["code"])
    return subprocess.run(
        [sys.executable, "-"], input=code, cwd=root, capture_output=True, text=True, timeout=60
    )


def _answer(root: Path) -> dict[str, object] | None:
    path = root / "output" / "answer.json"
    return json.loads(path.read_text()) if path.is_file() else None


def test_the_columns_are_found_from_the_expected_values(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    criteria = _task(root).criteria
    assert answer_columns(root / "contracts/contract_register.xlsx", "C-107", criteria) == {
        "counterparty": "Counterparty",
        "annual_value": "Annual Value (USD)",
    }
    # C-103's row does not hold the expected values: no plan
    assert answer_columns(root / "contracts/contract_register.xlsx", "C-103", criteria) is None
    assert answer_columns(root / "contracts/contract_register.xlsx", "C-999", criteria) is None


def test_a_clean_program_writes_the_right_answer(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    teacher = Teacher(_task(root), None, random.Random(0), lookup_by_code=True)
    first = teacher.next_turn(None)
    assert "'C-107'" in first  # the id, copied from the instruction into the program
    done = _run_program(first, root)
    assert done.returncode == 0, done.stderr
    assert _answer(root) == {"counterparty": "Castillo Systems", "annual_value": 2010000}
    assert teacher.next_turn(done.stdout) == DONE


@pytest.mark.parametrize("mistake", MISTAKES)
def test_every_mistake_fails_the_task(tmp_path: Path, mistake: Mistake) -> None:
    root = _workspace(tmp_path)
    teacher = Teacher(_task(root), mistake, random.Random(2), lookup_by_code=True)
    first = teacher.next_turn(None)
    if mistake == "give_up":
        assert first == GIVE_UP_MESSAGE
        assert _answer(root) is None
        return
    if mistake == "malformed_call":
        assert parse_assistant(first).error is not None
        done = _run_program(teacher.next_turn("correction"), root)
        assert _answer(root) == {"counterparty": "Castillo Systems", "annual_value": 2010000}
        return
    done = _run_program(first, root)
    answer = _answer(root)
    if mistake == "wrong_file":
        assert done.returncode != 0 and answer is None  # no C-107 row in the other register
    elif mistake == "missing_key":
        assert answer == {"counterparty": "Castillo Systems"}
    else:
        assert answer is not None and answer != {
            "counterparty": "Castillo Systems",
            "annual_value": 2010000,
        }


def test_without_a_workbook_plan_the_teacher_reads_the_file(tmp_path: Path) -> None:
    task = register_task()  # no workspace on the host: the read strategy
    teacher = Teacher(task, None, random.Random(0), lookup_by_code=True)
    assert '"sheet_read"' in teacher.next_turn(None)
    assert "C-107" in INSTRUCTION


@pytest.fixture(scope="module")
def named_range_tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The named-range starter tasks of three starter worlds (banking and consulting)."""
    from bureau.worlds.builder import BuildConfig, build_split

    out = tmp_path_factory.mktemp("starter")
    build_split(BuildConfig("train", 3, 24, 0, out, "starter", jobs=1))
    manifest = json.loads((out / "bureau-dataset.json").read_text())
    chosen = [t for t in manifest["tasks"] if t["template"].endswith("starter_named_range")]
    assert {t["template"] for t in chosen} == {
        "banking.starter_named_range",
        "consulting.starter_named_range",
    }
    return [out / t["path"] for t in chosen]


def _graded(task_dir: Path, text: str, tmp_path: Path) -> float:
    """The reward of the program in `text`, run on a copy of the task's workspace."""
    import shutil

    from bureau.grading.grader import grade
    from bureau.grading.rubric import load_rubric

    root = tmp_path / "ws"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(task_dir / "environment" / "workspace", root)
    (root / "output").mkdir()  # as the task's image makes it
    if parse_assistant(text).tool_calls:
        _run_program(text, root)
    return grade(load_rubric(task_dir / "tests" / "rubric.json"), root).reward


def test_named_ranges_by_program_solve_both_templates_and_each_mistake_fails(
    named_range_tasks: list[Path], tmp_path: Path
) -> None:
    from bureau.bootstrap.teacher import TaskView

    templates = set()
    for task_dir in named_range_tasks:
        view = TaskView.from_task_dir(
            task_dir, task_dir.name, (task_dir / "instruction.md").read_text()
        )
        templates.add(
            json.loads((task_dir.parent / "bureau-dataset.json").read_text())["tasks"][0]["split"]
        )
        clean = Teacher(view, None, random.Random(0), lookup_by_code=True).next_turn(None)
        assert "defined_names" in clean  # the named-range program, not a file read
        assert _graded(task_dir, clean, tmp_path) == 1.0, clean
        for mistake in ("missing_key", "wrong_value", "wrong_file", "give_up"):
            text = Teacher(view, mistake, random.Random(1), lookup_by_code=True).next_turn(None)
            assert _graded(task_dir, text, tmp_path) < 1.0, (mistake, text)
    assert len(named_range_tasks) >= 2


@pytest.fixture(scope="module")
def executed_lookup_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `law.starter_executed_lookup` task of a starter law world."""
    from bureau.worlds.builder import BuildConfig, build_split

    out = tmp_path_factory.mktemp("executed")
    build_split(BuildConfig("train", 1, 8, 1, out, "starter", jobs=1))  # seed 1: a law world
    manifest = json.loads((out / "bureau-dataset.json").read_text())
    task = next(t for t in manifest["tasks"] if t["template"] == "law.starter_executed_lookup")
    return out / task["path"]


def test_the_listing_plan_copies_the_id_the_listing_showed(
    executed_lookup_task: Path, tmp_path: Path
) -> None:
    """Two tool calls: the first lists the folder the instruction names, the second looks up
    the id that listing printed (not one from the instruction, which names none)."""
    from bureau.bootstrap.teacher import TaskView

    task_dir = executed_lookup_task
    instruction = (task_dir / "instruction.md").read_text()
    view = TaskView.from_task_dir(task_dir, task_dir.name, instruction)
    assert view.row_key is None and view.named_folders == ["contracts/executed"]
    workspace = task_dir / "environment" / "workspace"
    (signed,) = (workspace / "contracts" / "executed").iterdir()
    cid = signed.name.split("_")[0]

    teacher = Teacher(view, None, random.Random(0), lookup_by_code=True)
    listing = teacher.next_turn(None)
    assert "os.listdir('contracts/executed')" in listing and cid not in listing
    shown = _run_program(listing, workspace)
    assert shown.returncode == 0 and signed.name in shown.stdout
    lookup = teacher.next_turn(f"exit code 0\n--- stdout ---\n{shown.stdout}")
    assert f"'{cid}'" in lookup
    assert _graded(task_dir, lookup, tmp_path) == 1.0
    assert teacher.next_turn("exit code 0") == DONE

    # What the second call copies is what the first one showed: another listing, another id.
    teacher = Teacher(view, None, random.Random(0), lookup_by_code=True)
    teacher.next_turn(None)
    other = teacher.next_turn("exit code 0\n--- stdout ---\n['C-999_some-co_supply.pdf']\n")
    assert "'C-999'" in other and cid not in other
    for mistake in ("missing_key", "wrong_value", "give_up"):
        teacher = Teacher(view, mistake, random.Random(1), lookup_by_code=True)
        teacher.next_turn(None)
        text = teacher.next_turn(f"exit code 0\n--- stdout ---\n{shown.stdout}")
        assert _graded(task_dir, text, tmp_path) < 1.0, (mistake, text)
