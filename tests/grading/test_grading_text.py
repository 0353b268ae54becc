import pytest
from grading_helpers import GradeOne

from bureau.grading.values import Outcome, compare_text, normalize_text, parse_date


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Acme Corp.", "acme corp"),
        ("  ACME   corp ", "acme corp"),
        ("Acme-Corp", "acme corp"),
        ("O'Brien & Sons", "obrien sons"),
        ("U.S. Bank", "us bank"),
        ("$2,450,000.50", "$2,450,000.50"),
        ("due 2027-03-05.", "due 2027-03-05"),
        ("the", "the"),
        ("Ｆｕｌｌｗｉｄｔｈ", "fullwidth"),
        ("Straße", "strasse"),
    ],
)
def test_normalize_text(raw: str, normalized: str) -> None:
    assert normalize_text(raw) == normalized


@pytest.mark.parametrize(
    "written",
    [
        "2027-03-05",
        "March 5, 2027",
        "March 5th, 2027",
        "Mar. 5, 2027",
        "Mar 5 2027",
        "5 March 2027",
        "5 Mar 2027",
        "2027/03/05",
        "03/05/2027",
        "3/5/2027",
        "Friday, March 5, 2027",
    ],
)
def test_iso_date_accepts_other_spellings(written: str) -> None:
    assert parse_date(written) is not None
    assert compare_text(written, "2027-03-05").passed
    assert compare_text(written, "2027-03-05", mode="exact").passed


@pytest.mark.parametrize("written", ["05/03/2027", "March 6, 2027", "2027", "soon"])
def test_iso_date_rejects_other_dates(written: str) -> None:
    assert not compare_text(written, "2027-03-05").passed


def test_exact_mode_only_strips() -> None:
    assert compare_text("  Acme Corp ", "Acme Corp", mode="exact").passed
    assert not compare_text("acme corp", "Acme Corp", mode="exact").passed


def test_normalized_mode_and_aliases() -> None:
    assert compare_text("the ACME corp.", "Acme Corp") == Outcome(True, "got 'the ACME corp.'")
    assert compare_text("Acme Corporation", "Acme Corp", aliases=("Acme Corporation",)).passed
    assert compare_text("Acme Inc", "Acme Corp") == Outcome(
        False, "expected 'Acme Corp' (normalized), got 'Acme Inc'"
    )


def test_numbers_compare_as_text_but_containers_do_not() -> None:
    assert compare_text(2027, "2027").passed
    assert compare_text(12.5, "12.5").passed
    assert compare_text(["Acme Corp"], "Acme Corp") == Outcome(
        False, "expected text 'Acme Corp', got ['Acme Corp']"
    )
    assert not compare_text(None, "Acme Corp").passed


def test_text_criterion_passes_and_fails(grade_one: GradeOne) -> None:
    criterion = {
        "type": "text",
        "field": "counterparty",
        "expected": "Acme Corp",
        "mode": "normalized",
        "aliases": ["Acme Corporation"],
    }
    assert grade_one(criterion, {"counterparty": "ACME Corporation"}).passed
    result = grade_one(criterion, {"counterparty": "Globex"})
    assert not result.passed
    assert result.reason == "expected 'Acme Corp' (or 1 aliases) (normalized), got 'Globex'"


def test_text_criterion_date(grade_one: GradeOne) -> None:
    criterion = {"type": "text", "field": "expiry", "expected": "2027-03-05"}
    assert grade_one(criterion, {"expiry": "March 5, 2027"}).passed
    assert not grade_one(criterion, {"expiry": "March 15, 2027"}).passed
