import pytest
from grading_helpers import GradeOne

from bureau.grading.values import Outcome, compare_entities, split_entities


@pytest.mark.parametrize(
    ("raw", "items"),
    [
        ("Ana Ruiz, Li Wei", ["Ana Ruiz", "Li Wei"]),
        ("Ana Ruiz; Li Wei", ["Ana Ruiz", "Li Wei"]),
        ("Ana Ruiz and Li Wei", ["Ana Ruiz", "Li Wei"]),
        ("Ana Ruiz, Li Wei, and Bo Ek", ["Ana Ruiz", "Li Wei", "Bo Ek"]),
        ("Ana Ruiz\nLi Wei\n", ["Ana Ruiz", "Li Wei"]),
        (["Ana Ruiz", "Li Wei, Jr"], ["Ana Ruiz", "Li Wei, Jr"]),
        (["C-104", 2027], ["C-104", "2027"]),
        ("", []),
    ],
)
def test_split_entities(raw: object, items: list[str]) -> None:
    assert split_entities(raw) == items


def test_exact_mode_ignores_case_order_and_punctuation() -> None:
    assert compare_entities(["li wei", "Ana Ruiz."], ["Ana Ruiz", "Li Wei"], "exact") == Outcome(
        True, "all 2 expected items, nothing else"
    )


def test_exact_mode_reports_missing_and_extra() -> None:
    assert compare_entities(["Ana Ruiz", "Bo Ek"], ["Ana Ruiz", "Li Wei"], "exact") == Outcome(
        False, "missing ['Li Wei']; extra ['Bo Ek']"
    )


def test_superset_mode_allows_extras_but_not_missing() -> None:
    expected = ["Ana Ruiz", "Li Wei"]
    assert compare_entities("Ana Ruiz, Li Wei and Bo Ek", expected, "superset") == Outcome(
        True, "all 2 expected items; extra ['Bo Ek'] (allowed)"
    )
    assert compare_entities(["Ana Ruiz"], expected, "superset") == Outcome(
        False, "missing ['Li Wei']"
    )


@pytest.mark.parametrize("value", [42, {"a": "Ana Ruiz"}, ["Ana Ruiz", None], None])
def test_non_lists_fail(value: object) -> None:
    outcome = compare_entities(value, ["Ana Ruiz"], "exact")
    assert not outcome.passed
    assert "list" in outcome.reason


def test_entity_list_criterion(grade_one: GradeOne) -> None:
    criterion = {
        "type": "entity_list",
        "field": "directors_against",
        "expected": ["Ana Ruiz", "Li Wei"],
        "mode": "exact",
    }
    assert grade_one(criterion, {"directors_against": ["Li Wei", "Ana Ruiz"]}).passed
    result = grade_one(criterion, {"directors_against": "Ana Ruiz"})
    assert (result.passed, result.reason) == (False, "missing ['Li Wei']")
