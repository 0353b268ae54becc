import json
from pathlib import Path

import pytest
from grading_helpers import make_rubric
from pydantic import ValidationError

from bureau.grading import RubricError, grade, load_rubric
from bureau.grading.rubric import MAX_CRITERIA, NumericCriterion, XlsxCellCriterion

EXAMPLE = {
    "format": "bureau-rubric/1",
    "task_id": "train-law-003-t07",
    "answer_file": "output/answer.json",
    "gold": {"liability_cap": 2450000, "counterparty": "Acme Corp"},
    "criteria": [
        {"id": "c1", "type": "numeric", "description": "cap", "field": "liability_cap"}
        | {"expected": 2450000, "rel_tol": 0.001, "abs_tol": 0.5},
        {"id": "c2", "type": "text", "field": "counterparty", "expected": "Acme Corp"}
        | {"mode": "normalized", "aliases": ["Acme Corporation"]},
        {"id": "c3", "type": "entity_list", "field": "d", "expected": ["Ana Ruiz", "Li Wei"]},
        {"id": "c4", "type": "file_exists", "path": "output/summary.xlsx"},
        {"id": "c5", "type": "xlsx_cell", "path": "output/summary.xlsx", "sheet": "Expiring"}
        | {"cell": "B2", "expected": 1200000, "rel_tol": 0.001, "abs_tol": 0.5},
        {"id": "c6", "type": "xlsx_cell", "path": "output/summary.xlsx", "sheet": "Expiring"}
        | {"row_label": "C-104", "column": "Value", "expected": 1200000},
        {"id": "c7", "type": "docx_content", "path": "output/memo.docx"}
        | {"contains": "notice period of 90 days", "style": "Heading 1"},
        {"id": "c8", "type": "pptx_content", "path": "output/deck.pptx", "slide": 2}
        | {"title": "Market Size", "contains": "Enterprise", "table_cell": None},
        {"id": "c9", "type": "judge", "field": "rationale", "guidance": "cites clause 7"},
    ],
}


def test_example_rubric_loads(tmp_path: Path) -> None:
    path = tmp_path / "rubric.json"
    path.write_text(json.dumps(EXAMPLE))
    rubric = load_rubric(path)
    assert [c.type for c in rubric.criteria][:3] == ["numeric", "text", "entity_list"]
    assert isinstance(rubric.criteria[0], NumericCriterion)
    assert rubric.criteria[0].expected == 2450000.0
    c5 = rubric.criteria[4]
    assert isinstance(c5, XlsxCellCriterion)
    assert (c5.cell, c5.expected) == ("B2", 1200000.0)


def test_defaults() -> None:
    rubric = make_rubric({"id": "c1", "type": "numeric", "field": "x", "expected": 1})
    criterion = rubric.criteria[0]
    assert isinstance(criterion, NumericCriterion)
    assert (criterion.rel_tol, criterion.abs_tol) == (1e-3, 1e-6)
    assert rubric.answer_file == "output/answer.json"


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../secret.txt",
        "output/../../x.xlsx",
        "C:\\x.xlsx",
        "..\\x",
        "",
        "./",
        "output/a\x00.txt",
        " output/a.txt",
    ],
)
def test_paths_must_stay_in_the_workspace(path: str) -> None:
    with pytest.raises(ValidationError, match="path"):
        make_rubric({"id": "c1", "type": "file_exists", "path": path})
    with pytest.raises(ValidationError, match="answer_file"):
        make_rubric({"id": "c1", "type": "file_exists", "path": "a.txt"}, answer_file=path)


@pytest.mark.parametrize(
    "criterion",
    [
        {"id": "c1", "type": "numeric", "field": "x", "expected": True},
        {"id": "c1", "type": "numeric", "field": "x", "expected": 1, "rel_tol": -1},
        {"id": "c1", "type": "numeric", "field": "x", "expected": 1, "unknown": 1},
        {"id": "c1", "type": "text", "field": "x", "expected": "a", "mode": "fuzzy"},
        {"id": "c1", "type": "nonsense"},
        {"id": "reward", "type": "file_exists", "path": "a.txt"},
        {"id": "c 1", "type": "file_exists", "path": "a.txt"},
        {"id": "c1", "type": "xlsx_cell", "path": "a.xlsx", "expected": 1},
        {"id": "c1", "type": "xlsx_cell", "path": "a.xlsx", "cell": "b2", "expected": 1},
        {"id": "c1", "type": "xlsx_cell", "path": "a.xlsx", "cell": "B2", "column": "V"}
        | {"expected": 1},
        {"id": "c1", "type": "pptx_content", "path": "a.pptx", "slide": 1},
        {"id": "c1", "type": "pptx_content", "path": "a.pptx", "slide": 0, "title": "T"},
    ],
)
def test_invalid_criteria_are_rejected(criterion: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        make_rubric(criterion)


def test_duplicate_ids_and_criterion_count() -> None:
    one = {"id": "c1", "type": "file_exists", "path": "a.txt"}
    with pytest.raises(ValidationError, match="unique"):
        make_rubric(one, one)
    with pytest.raises(ValidationError):
        make_rubric()
    with pytest.raises(ValidationError):
        make_rubric(*({**one, "id": f"c{i}"} for i in range(MAX_CRITERIA + 1)))
    assert len(make_rubric(*({**one, "id": f"c{i}"} for i in range(MAX_CRITERIA))).criteria) == 10


def test_load_rubric_errors_name_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "rubric.json"
    bad = json.loads(json.dumps(EXAMPLE))
    bad["criteria"][0]["expected"] = "lots"
    path.write_text(json.dumps(bad))
    with pytest.raises(RubricError, match=r"rubric .*rubric\.json: criteria\.0\.numeric\.expected"):
        load_rubric(path)
    path.write_text('{\n  "task_id": \n}')
    with pytest.raises(RubricError, match=r"rubric\.json: not valid JSON at line 3"):
        load_rubric(path)
    with pytest.raises(RubricError, match="cannot read"):
        load_rubric(tmp_path / "absent.json")


def test_judge_criteria_become_requests_for_the_judge(workspace: Path) -> None:
    rubric = make_rubric(
        {"id": "c1", "type": "file_exists", "path": "output/answer.json"},
        {"id": "c8", "type": "judge", "field": "missing", "guidance": "cites clause 7"},
        {
            "id": "c9", "type": "judge", "field": "rationale", "guidance": "cites clause 7",
            "reference": "Clause 7 caps liability at $2.45m.",
        },
        {"id": "c10", "type": "judge", "path": "output/memo.md", "guidance": "is a memo"},
    )  # fmt: skip
    (workspace / "output" / "answer.json").write_text(json.dumps({"rationale": "Per clause 7."}))
    (workspace / "output" / "memo.md").write_text("# Memo\nThe cap is $2.45m.\n")
    report = grade(rubric, workspace)
    # No answer key: nothing to judge, so it fails here; the others await the judge.
    assert [(r.id, r.passed) for r in report.results] == [("c1", True), ("c8", False)]
    assert "no key 'missing'" in report.results[1].reason
    assert [r["id"] for r in report.pending] == ["c9", "c10"]
    assert report.pending[0]["work"] == "Per clause 7."
    assert report.pending[0]["reference"] == "Clause 7 caps liability at $2.45m."
    assert report.pending[1]["work"].startswith("# Memo")
    assert report.to_json_dict()["reward"] is None


def test_a_judge_criterion_names_one_source() -> None:
    with pytest.raises(ValidationError, match="exactly one of field"):
        make_rubric({"id": "c1", "type": "judge", "guidance": "g"})
    with pytest.raises(ValidationError, match="exactly one of field"):
        make_rubric({"id": "c1", "type": "judge", "guidance": "g", "field": "a", "path": "b.md"})


ITEM = {
    "id": "c2",
    "type": "all_of",
    "description": "Item 2: both keys",
    "criteria": [
        {"id": "c2.1", "type": "numeric", "field": "q2_cap", "expected": 5.0},
        {"id": "c2.2", "type": "text", "field": "q2_party", "expected": "Acme Corp"},
        {"id": "c2.3", "type": "file_exists", "path": "output/memo.txt"},
    ],
}


def test_an_all_of_criterion_passes_only_when_every_part_does(workspace: Path) -> None:
    from bureau.grading import format_report

    rubric = make_rubric({"id": "c1", "type": "numeric", "field": "q1_n", "expected": 1.0}, ITEM)
    answer = {"q1_n": 1, "q2_cap": 5, "q2_party": "acme corp"}
    (workspace / "output" / "answer.json").write_text(json.dumps(answer))
    (workspace / "output" / "memo.txt").write_text("memo\n")
    report = grade(rubric, workspace)
    assert [r.passed for r in report.results] == [True, True] and report.reward == 1.0
    assert report.results[1].reason == "all 3 parts pass"
    assert [(p.id, p.passed) for p in report.results[1].parts] == [
        ("c2.1", True), ("c2.2", True), ("c2.3", True)
    ]  # fmt: skip
    # One part wrong fails the whole item, and only it: 1 of 2 criteria, not 4 of 5 checks.
    (workspace / "output" / "answer.json").write_text(json.dumps({**answer, "q2_party": "Bolt"}))
    report = grade(rubric, workspace)
    item = report.results[1]
    assert not item.passed and report.reward == 0.5
    assert item.reason.startswith("1 of 3 parts fail; c2.2: ") and "Acme Corp" in item.reason
    assert [p.passed for p in item.parts] == [True, False, True]
    values = report.to_reward_values()
    assert values == {"reward": 0.5, "pass": 0, "c1": 1, "c2": 0}
    assert report.to_json_dict()["results"][1]["parts"][1]["id"] == "c2.2"  # type: ignore[index]
    table = format_report(report)
    assert "FAIL  c2.2" in table and "pass  c2.1" in table


def test_an_all_of_holds_checks_the_verifier_decides_and_unique_ids() -> None:
    judge = {"id": "c2.4", "type": "judge", "field": "q2_party", "guidance": "names the party"}
    with pytest.raises(ValidationError):
        make_rubric({**ITEM, "criteria": [*ITEM["criteria"], judge]})  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        make_rubric({**ITEM, "criteria": [{**ITEM, "id": "c3"}]})  # no all_of inside one
    with pytest.raises(ValidationError):
        make_rubric({**ITEM, "criteria": []})
    with pytest.raises(ValidationError, match=r"unique, repeated: \['c2.1'\]"):
        make_rubric({"id": "c2.1", "type": "file_exists", "path": "a.txt"}, ITEM)


def test_leaf_criteria_are_an_all_ofs_parts() -> None:
    from bureau.grading.rubric import leaf_criteria

    first = {"id": "c1", "type": "numeric", "field": "q1_n", "expected": 1.0}
    assert [c["id"] for c in leaf_criteria([first, ITEM])] == ["c1", "c2.1", "c2.2", "c2.3"]
