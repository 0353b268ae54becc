import json
from pathlib import Path

import pytest
from grading_helpers import NO_ANSWER, GradeOne, make_rubric

from bureau.grading import grade

NUMERIC = {"type": "numeric", "field": "x", "expected": 1}


def test_symlink_out_of_the_workspace_is_not_followed(
    grade_one: GradeOne, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("gold answers")
    (workspace / "output" / "notes.txt").symlink_to(secret)
    result = grade_one({"type": "file_exists", "path": "output/notes.txt"})
    assert not result.passed
    assert result.reason == "output/notes.txt resolves outside the workspace"


def test_symlinked_answer_file_out_of_the_workspace(
    grade_one: GradeOne, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "answer.json"
    outside.write_text('{"x": 1}')
    (workspace / "output" / "answer.json").symlink_to(outside)
    result = grade_one(NUMERIC)
    assert result.reason == "output/answer.json resolves outside the workspace"


def test_symlink_inside_the_workspace_is_fine(grade_one: GradeOne, workspace: Path) -> None:
    (workspace / "data.csv").write_text("a,b\n")
    (workspace / "output" / "data.csv").symlink_to(workspace / "data.csv")
    assert grade_one({"type": "file_exists", "path": "output/data.csv"}).passed


def test_missing_answer_file_fails_answer_criteria_but_file_criteria_still_run(
    workspace: Path,
) -> None:
    (workspace / "output" / "memo.txt").write_text("hello")
    rubric = make_rubric(
        {"id": "c1", **NUMERIC},
        {"id": "c2", "type": "text", "field": "y", "expected": "a"},
        {"id": "c3", "type": "file_exists", "path": "output/memo.txt"},
    )
    report = grade(rubric, workspace)
    assert [(r.id, r.passed, r.reason) for r in report.results] == [
        ("c1", False, "output/answer.json missing"),
        ("c2", False, "output/answer.json missing"),
        ("c3", True, "output/memo.txt exists (5 bytes)"),
    ]
    assert report.reward == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{\n  "x": 1,\n}', "output/answer.json is not valid JSON at line 3"),
        ("[1, 2]", "output/answer.json is not a JSON object"),
        ("", "output/answer.json is empty"),
        (b"\xff\xfe{}", "output/answer.json is not valid UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "output/answer.json is not valid JSON: RecursionError"),
    ],
)
def test_unreadable_answer_files(
    grade_one: GradeOne, workspace: Path, content: str | bytes, reason: str
) -> None:
    path = workspace / "output" / "answer.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert grade_one(NUMERIC).reason == reason


def test_missing_key(grade_one: GradeOne) -> None:
    result = grade_one(NUMERIC, {"y": 1})
    assert (result.passed, result.reason) == (False, "no key 'x' in output/answer.json")


def test_custom_answer_file(workspace: Path) -> None:
    (workspace / "final.json").write_text(json.dumps({"x": 1}))
    rubric = make_rubric({"id": "c1", **NUMERIC}, answer_file="final.json")
    assert grade(rubric, workspace).passed


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("empty", "output/report.xlsx is empty"),
        ("directory", "output/report.xlsx is not a regular file"),
        ("missing", "output/report.xlsx missing"),
    ],
)
def test_file_exists_failures(
    grade_one: GradeOne, workspace: Path, setup: str, reason: str
) -> None:
    path = workspace / "output" / "report.xlsx"
    if setup == "empty":
        path.touch()
    elif setup == "directory":
        path.mkdir()
    result = grade_one({"type": "file_exists", "path": "output/report.xlsx"}, NO_ANSWER)
    assert (result.passed, result.reason) == (False, reason)


def test_file_exists_opens_office_files(grade_one: GradeOne, workspace: Path) -> None:
    import openpyxl

    path = workspace / "output" / "report.xlsx"
    openpyxl.Workbook().save(path)
    result = grade_one({"type": "file_exists", "path": "output/report.xlsx"})
    assert result.passed
    assert result.reason.endswith("and opens as a workbook")
    path.write_bytes(b"garbage")
    broken = grade_one({"type": "file_exists", "path": "output/report.xlsx"})
    assert not broken.passed
    assert broken.reason.startswith("could not open output/report.xlsx: BadZipFile")


def test_missing_workspace_raises(tmp_path: Path) -> None:
    rubric = make_rubric({"id": "c1", **NUMERIC})
    with pytest.raises(FileNotFoundError):
        grade(rubric, tmp_path / "absent")


def test_an_answer_too_large_to_be_an_answer_fails(grade_one: GradeOne, workspace: Path) -> None:
    padding = "x" * (2 * 1024 * 1024)
    (workspace / "output" / "answer.json").write_text(json.dumps({"x": 1, "pad": padding}))
    result = grade_one(NUMERIC)
    assert not result.passed
    assert result.reason.startswith("output/answer.json is too large to grade")


def test_an_answer_that_exhausts_memory_fails_its_criteria(
    grade_one: GradeOne, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bureau.grading.workspace as ws

    def exhausted(_text: str) -> object:
        raise MemoryError

    monkeypatch.setattr(ws.json, "loads", exhausted)
    result = grade_one(NUMERIC, {"x": 1})
    assert (result.passed, result.reason) == (
        False,
        "output/answer.json does not fit in the grader's memory",
    )


def test_an_office_file_that_would_unzip_to_gigabytes_is_not_parsed(
    grade_one: GradeOne, workspace: Path
) -> None:
    import zipfile

    path = workspace / "output" / "report.docx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"\0" * (80 * 1024 * 1024))
    assert path.stat().st_size < 1024 * 1024  # small on disk, huge to parse
    result = grade_one({"type": "file_exists", "path": "output/report.docx"}, NO_ANSWER)
    assert not result.passed
    assert "too large to grade" in result.reason and "uncompressed" in result.reason


# An alarm that lands in a garbage-collector callback is swallowed (and reported as
# unraisable); `time_limit` repeats the alarm for exactly that case, so the warning is expected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_small_deliverable_that_is_slow_to_parse_fails_in_time(
    grade_one: GradeOne, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under every size cap, 40,000 cells still take openpyxl a while: past the budget the
    criterion fails (the agent's 0) instead of the verifier timing out (a masked error)."""
    from openpyxl import Workbook

    import bureau.grading.workspace as ws

    book = Workbook()
    for r in range(200):
        book.active.append([f"v{r}-{c}" for c in range(200)])
    book.save(workspace / "output" / "big.xlsx")
    monkeypatch.setattr(ws, "MAX_OPEN_SECONDS", 0.05)
    result = grade_one({"type": "file_exists", "path": "output/big.xlsx"}, NO_ANSWER)
    assert (result.passed, result.reason) == (
        False,
        "output/big.xlsx took longer than 0.05 s to read; not graded",
    )
    monkeypatch.setattr(ws, "MAX_OPEN_SECONDS", 60.0)
    assert grade_one({"type": "file_exists", "path": "output/big.xlsx"}, NO_ANSWER).passed
