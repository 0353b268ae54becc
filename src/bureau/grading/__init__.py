"""Rubric grading of knowledge-work tasks.

An agent finishes a task by writing `output/answer.json` (one JSON object keyed by the answer
keys its instruction lists) and any requested deliverables under `output/`. The task's hidden
`tests/rubric.json` lists 1-10 binary criteria over those files (a brief's item is one: all of
its checks together); this package checks them and writes Harbor's `reward.json` (the fraction
passed, plus one 0/1 entry per criterion).

The package runs inside task verifiers from a zipapp (`tests/grader.pyz`, see `zipapp.py`) that
holds only `bureau/__init__.py` and `bureau/grading/`, so its modules import nothing but the
standard library, pydantic, openpyxl, python-docx, python-pptx and each other.
"""

from .grader import (
    CriterionResult,
    GradeReport,
    format_report,
    grade,
    write_outputs,
)
from .rubric import Rubric, RubricError, load_rubric
from .zipapp import build_zipapp

__all__ = [
    "CriterionResult",
    "GradeReport",
    "Rubric",
    "RubricError",
    "build_zipapp",
    "format_report",
    "grade",
    "load_rubric",
    "write_outputs",
]
