import math

import pytest
from grading_helpers import GradeOne
from hypothesis import given
from hypothesis import strategies as st

from bureau.grading.values import NumberParseError, Outcome, compare_number, parse_number


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (2450000, 2450000.0),
        (-7.25, -7.25),
        ("2450000", 2450000.0),
        ("$2,450,000", 2450000.0),
        ("2,450,000 USD", 2450000.0),
        ("USD 2.4m", 2400000.0),
        ("US$ 3bn", 3e9),
        ("€1.5 million", 1.5e6),
        ("12.5%", 12.5),
        ("12 percent", 12.0),
        ("2.45m", 2450000.0),
        ("2.45M", 2450000.0),
        ("3mm", 3e6),
        ("1.2bn", 1.2e9),
        ("1.2b", 1.2e9),
        ("4k", 4000.0),
        ("(1,200)", -1200.0),
        ("($1,200)", -1200.0),
        ("-$1,200", -1200.0),
        ("$-1,200", -1200.0),
        ("−3.4", -3.4),
        ("2 450 000", 2450000.0),
        ("1,200.50", 1200.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("+4", 4.0),
        ("  42  ", 42.0),
        ("１２３", 123.0),
    ],
)
def test_parse_number_reads_human_numbers(raw: object, expected: float) -> None:
    assert parse_number(raw) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "raw",
    [True, None, [1], {"a": 1}, "", "abc", "1,2345", "1.2.3", "--5", "(-5)", "NaN", "12 apples"],
)
def test_parse_number_rejects_non_numbers(raw: object) -> None:
    with pytest.raises(NumberParseError):
        parse_number(raw)


@pytest.mark.parametrize("raw", [math.nan, math.inf, -math.inf])
def test_parse_number_rejects_non_finite_json_numbers(raw: float) -> None:
    with pytest.raises(NumberParseError, match="finite"):
        parse_number(raw)


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False))
def test_parse_number_round_trips_formatted_floats(x: float) -> None:
    assert parse_number(repr(x)) == x
    assert parse_number(f"{x:.6e}") == pytest.approx(x, rel=1e-6, abs=1e-300)
    assert parse_number(f"{x:,.2f}") == pytest.approx(x, abs=0.006)
    dollars = f"${abs(x):,.2f}"
    assert parse_number(f"({dollars})" if x < 0 else dollars) == pytest.approx(x, abs=0.006)
    assert parse_number(f"{x / 1e6:.4f}m") == pytest.approx(x, abs=51.0)


def test_compare_number_reasons() -> None:
    assert compare_number(2400000, 2450000, 1e-3, 0.5) == Outcome(
        False, "expected 2450000 ±2450, got 2400000"
    )
    assert compare_number("$2.449m", 2450000, 1e-3, 0.5) == Outcome(
        True, "got '$2.449m' = 2449000 (expected 2450000 ±2450)"
    )
    assert compare_number([1], 3, 0.0, 0.5) == Outcome(
        False, "expected 3 ±0.5; expected a number, got a list: [1]"
    )


def test_tolerance_is_the_larger_of_absolute_and_relative() -> None:
    assert compare_number(0.4, 0.0, 1e-3, 0.5).passed
    assert not compare_number(0.6, 0.0, 1e-3, 0.5).passed
    assert compare_number(1009, 1000, 0.01, 0.0).passed
    assert not compare_number(1011, 1000, 0.01, 0.0).passed


def test_numeric_criterion_passes_and_fails(grade_one: GradeOne) -> None:
    criterion = {"type": "numeric", "field": "liability_cap", "expected": 2450000, "abs_tol": 0.5}
    assert grade_one(criterion, {"liability_cap": "$2,450,000"}).passed
    failed = grade_one(criterion, {"liability_cap": 2400000})
    assert not failed.passed
    assert failed.reason == "expected 2450000 ±2450, got 2400000"


def test_numeric_criterion_default_tolerances(grade_one: GradeOne) -> None:
    criterion = {"type": "numeric", "field": "x", "expected": 1000}
    assert grade_one(criterion, {"x": 1000.9}).passed
    assert not grade_one(criterion, {"x": 1001.1}).passed


@pytest.mark.parametrize("value", [True, [2450000], {"v": 2450000}, None])
def test_numeric_criterion_rejects_non_scalar_values(grade_one: GradeOne, value: object) -> None:
    result = grade_one({"type": "numeric", "field": "x", "expected": 1}, {"x": value})
    assert not result.passed
    assert "expected a number" in result.reason
