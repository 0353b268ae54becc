"""Fixtures for grading tests: an empty workspace and a one-criterion grading helper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grading_helpers import NO_ANSWER, GradeOne, make_rubric

from bureau.grading import CriterionResult, grade


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "output").mkdir(parents=True)
    return root


@pytest.fixture
def grade_one(workspace: Path) -> GradeOne:
    """Grade a single criterion dict, optionally writing `answer` to output/answer.json first."""

    def run(criterion: dict[str, object], answer: object = NO_ANSWER) -> CriterionResult:
        if answer is not NO_ANSWER:
            (workspace / "output" / "answer.json").write_text(json.dumps(answer))
        report = grade(make_rubric({"id": "c1", "description": "d", **criterion}), workspace)
        (result,) = report.results
        assert len(result.reason) <= 200
        return result

    return run
