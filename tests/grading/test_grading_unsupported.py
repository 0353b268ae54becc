"""Infeasible tasks: `unsupported` wants JSON null (no made-up value, and an answer at all);
`mentions` wants a short reason naming each term in one of its spellings."""

from __future__ import annotations

import pytest
from grading_helpers import NO_ANSWER, GradeOne
from pydantic import ValidationError

from bureau.grading.rubric import MentionsCriterion

UNSUPPORTED = {"id": "c1", "type": "unsupported", "field": "liability_cap"}
MENTIONS = {
    "id": "c2",
    "type": "mentions",
    "field": "unsupported_reason",
    "terms": [["Zhang Analytics"], ["executed", "signed"]],
    "max_chars": 120,
}


@pytest.mark.parametrize(
    "answer, passed",
    [
        ({"liability_cap": None}, True),
        ({"liability_cap": 2_450_000}, False),  # made up
        ({"liability_cap": 0}, False),
        ({"liability_cap": "unknown"}, False),  # not null
        ({}, False),  # the key left out is no answer
        (NO_ANSWER, False),
    ],
)
def test_unsupported_wants_null(grade_one: GradeOne, answer: object, passed: bool) -> None:
    assert grade_one(UNSUPPORTED, answer).passed is passed


@pytest.mark.parametrize(
    "reason, passed",
    [
        ("No executed agreement with Zhang Analytics is in the files.", True),
        ("Nothing signed with ZHANG ANALYTICS, only the register row.", True),
        ("No agreement with Zhang Analytics is in the files.", False),  # does not say executed
        ("No executed agreement with Zhang is in the files.", False),  # half a name
        ("Unexecuted: Zhang Analyticsy.", False),  # words, not parts of words
        ("No executed agreement with Zhang Analytics. " + "Or Acme, Globex, " * 8, False),
        (None, False),
        (17, False),
    ],
)
def test_mentions_wants_each_term_briefly(
    grade_one: GradeOne, reason: object, passed: bool
) -> None:
    result = grade_one(MENTIONS, {"unsupported_reason": reason})
    assert result.passed is passed, result.reason


def test_mentions_needs_a_term_and_a_sane_length() -> None:
    with pytest.raises(ValidationError):
        MentionsCriterion.model_validate({**MENTIONS, "terms": []})
    with pytest.raises(ValidationError):
        MentionsCriterion.model_validate({**MENTIONS, "max_chars": 5})
