"""Shared helpers for grading tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bureau.grading import CriterionResult, Rubric

NO_ANSWER = object()
"""Sentinel: do not write output/answer.json."""

GradeOne = Callable[..., CriterionResult]
"""`grade_one(criterion_dict, answer=NO_ANSWER) -> CriterionResult`."""


def make_rubric(*criteria: Mapping[str, object], **fields: object) -> Rubric:
    """A valid rubric around the given criterion dicts."""
    data: dict[str, object] = {
        "format": "bureau-rubric/1",
        "task_id": "train-law-003-t07",
        "criteria": [dict(criterion) for criterion in criteria],
    }
    data.update(fields)
    return Rubric.model_validate(data)
