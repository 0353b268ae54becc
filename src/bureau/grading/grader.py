"""Grading one finished episode: rubric + workspace -> per-criterion verdicts and a reward.

`grade` checks every criterion of a rubric against the agent's workspace without writing
anything. Each criterion yields a `CriterionResult` with a short reason; the reward is the
fraction of criteria that pass. Failures that belong to the agent (a missing key, a corrupt
workbook, even an unexpected exception while inspecting its file) fail that criterion only.
Failures that belong to the verifier (an invalid rubric) raise, so that they can never be
recorded as a zero reward.

LLM-judge criteria are not decided here (the verifier has no network): each becomes a pending
request (`judged.py`), and the reward waits for whoever runs the trial to ask the judge.

`write_outputs` writes Harbor's `reward.json` (a flat dict of numbers) and a fuller
`grading.json` with the reasons, and prints a results table for `test-stdout.txt`; with judge
criteria pending it writes `judge-requests.json` instead of reward.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field

from .answers import Answers, check_answer, load_answers
from .documents import check_docx_content
from .judged import JUDGE_REQUESTS, judge_request
from .rubric import (
    AllOfCriterion,
    Criterion,
    DocxContentCriterion,
    EntityListCriterion,
    FileExistsCriterion,
    JudgeCriterion,
    MentionsCriterion,
    NumericCriterion,
    PartCriterion,
    PptxContentCriterion,
    Rubric,
    RubricError,
    TextCriterion,
    UnsupportedCriterion,
    XlsxCellCriterion,
    load_rubric,
)
from .slides import check_pptx_content
from .spreadsheets import check_xlsx_cell
from .values import Outcome, clip
from .workspace import Workspace, check_file_exists

__all__ = [
    "CriterionResult",
    "GradeReport",
    "RubricError",
    "format_report",
    "grade",
    "load_rubric",
    "write_outputs",
]

GRADING_FORMAT = "bureau-grading/1"


class CriterionResult(BaseModel):
    """The verdict on one criterion."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The criterion id from the rubric."""
    type: str
    """The criterion type, e.g. "numeric"."""
    passed: bool
    """Whether the criterion holds."""
    reason: str = Field(max_length=200)
    """Why, in at most 200 characters."""
    description: str = ""
    """The rubric's description of the criterion."""
    parts: list[CriterionResult] = Field(default_factory=list)
    """An `all_of` criterion's verdict on each of its parts, in order."""


class GradeReport(BaseModel):
    """All verdicts for one workspace graded against one rubric."""

    model_config = ConfigDict(frozen=True)

    format: Literal["bureau-grading/1"] = "bureau-grading/1"
    """Schema version of grading.json."""
    task_id: str
    """The graded task."""
    results: list[CriterionResult]
    """One verdict per criterion decided here, in rubric order."""
    pending: list[dict[str, Any]] = Field(default_factory=list)
    """Judge criteria awaiting a verdict: id, description, question, reference, work."""

    @property
    def num_passed(self) -> int:
        """How many criteria passed."""
        return sum(result.passed for result in self.results)

    @property
    def reward(self) -> float:
        """The fraction of criteria that passed."""
        return self.num_passed / len(self.results) if self.results else 0.0

    @property
    def passed(self) -> bool:
        """Whether every criterion passed."""
        return bool(self.results) and self.num_passed == len(self.results)

    def to_reward_values(self) -> dict[str, float]:
        """Harbor's reward.json: {"reward": 0.75, "pass": 0, "c1": 1, "c2": 0, ...}."""
        values: dict[str, float] = {"reward": self.reward, "pass": int(self.passed)}
        values.update({result.id: int(result.passed) for result in self.results})
        return values

    def to_json_dict(self) -> dict[str, object]:
        """grading.json: the verdicts with reasons and the totals; never the gold answers.
        With judge criteria pending, no reward yet and the pending ids."""
        data: dict[str, object] = {
            "format": self.format,
            "task_id": self.task_id,
            "reward": None if self.pending else self.reward,
            "passed": None if self.pending else self.passed,
            "num_passed": self.num_passed,
            "num_criteria": len(self.results) + len(self.pending),
            "results": [_result_json(result) for result in self.results],
        }
        if self.pending:
            data["pending"] = [request["id"] for request in self.pending]
        return data


def _result_json(result: CriterionResult) -> dict[str, object]:
    """A verdict for grading.json; `parts` only for an `all_of`."""
    data: dict[str, object] = result.model_dump(exclude={"parts"})
    if result.parts:
        data["parts"] = [_result_json(part) for part in result.parts]
    return data


def grade(rubric: Rubric, workspace: Path) -> GradeReport:
    """Check every criterion of `rubric` against the files under `workspace`.

    Reads only; writes nothing. Judge criteria with work to judge become `pending` requests.
    Raises `FileNotFoundError` / `NotADirectoryError` if `workspace` is not a directory.
    """
    files = Workspace(workspace)
    answers = load_answers(files, rubric.answer_file)
    results = []
    pending: list[dict[str, Any]] = []
    for criterion in rubric.criteria:
        if isinstance(criterion, JudgeCriterion):
            request = _judge_request(criterion, files, answers)
            if isinstance(request, dict):
                pending.append(request)
                continue
            results.append(_result(criterion, request))
        elif isinstance(criterion, AllOfCriterion):
            results.append(_all_of(criterion, files, answers))
        else:
            results.append(_result(criterion, _check(criterion, files, answers)))
    return GradeReport(task_id=rubric.task_id, results=results, pending=pending)


def _result(criterion: Criterion | PartCriterion, outcome: Outcome) -> CriterionResult:
    return CriterionResult(
        id=criterion.id,
        type=criterion.type,
        passed=outcome.passed,
        reason=clip(outcome.reason),
        description=criterion.description,
    )


def _all_of(criterion: AllOfCriterion, files: Workspace, answers: Answers) -> CriterionResult:
    """Every part checked (each with its verdict); passes when all of them pass."""
    parts = [_result(part, _check(part, files, answers)) for part in criterion.criteria]
    failed = [part for part in parts if not part.passed]
    if not failed:
        reason = f"all {len(parts)} parts pass"
    else:
        first = failed[0]
        reason = f"{len(failed)} of {len(parts)} parts fail; {first.id}: {first.reason}"
    return CriterionResult(
        id=criterion.id,
        type=criterion.type,
        passed=not failed,
        reason=clip(reason),
        description=criterion.description,
        parts=parts,
    )


def _judge_request(
    criterion: JudgeCriterion, files: Workspace, answers: Answers
) -> dict[str, Any] | Outcome:
    try:
        return judge_request(criterion, files, answers)
    except Exception as exc:  # the agent's file choked a library: its failure, as in _check
        return Outcome(False, clip(f"error while reading the work: {type(exc).__name__}: {exc}"))


def _check(criterion: Criterion | PartCriterion, files: Workspace, answers: Answers) -> Outcome:
    try:
        if isinstance(
            criterion,
            NumericCriterion
            | TextCriterion
            | EntityListCriterion
            | UnsupportedCriterion
            | MentionsCriterion,
        ):
            return check_answer(criterion, answers)
        if isinstance(criterion, FileExistsCriterion):
            return check_file_exists(files, criterion.path)
        if isinstance(criterion, XlsxCellCriterion):
            return check_xlsx_cell(criterion, files)
        if isinstance(criterion, DocxContentCriterion):
            return check_docx_content(criterion, files)
        if isinstance(criterion, PptxContentCriterion):
            return check_pptx_content(criterion, files)
    except Exception as exc:
        # The inputs here are the agent's files; a library choking on one is the agent's
        # failure on this criterion, not grounds to lose the verdicts on the others.
        return Outcome(False, clip(f"error while checking: {type(exc).__name__}: {exc}"))
    raise TypeError(f"no checker for criterion type {criterion.type!r}")


def format_report(report: GradeReport) -> str:
    """A plain-text results table: one line per criterion with its reason below."""
    width = max((len(result.id) for result in report.results), default=2)
    lines = [f"bureau grading: task {report.task_id}"]
    if report.pending:
        lines.append(
            f"{report.num_passed}/{len(report.results)} criteria passed; "
            f"{len(report.pending)} await the judge ({', '.join(r['id'] for r in report.pending)})"
        )
    else:
        total = len(report.results)
        lines.append(f"reward {report.reward:.4g} ({report.num_passed}/{total} criteria passed)")
    for result in report.results:
        mark = "PASS" if result.passed else "FAIL"
        header = f"  {mark}  {result.id:<{width}}  {result.type:<12}  {result.description}"
        lines.append(header.rstrip())
        lines.append(f"        {'':<{width}}  {result.reason}")
        for part in result.parts:
            mark = "pass" if part.passed else "FAIL"
            lines.append(f"        {'':<{width}}    {mark}  {part.id}  {part.description}".rstrip())
    return "\n".join(lines) + "\n"


def write_outputs(report: GradeReport, verifier_dir: Path, stdout: TextIO | None = None) -> None:
    """Write grading.json and reward.json into `verifier_dir` and print the results table.

    reward.json is written last and atomically, so its presence means grading completed. With
    judge criteria pending, judge-requests.json is written instead: no reward until a judge
    has answered (`bureau.trials.judging`).
    """
    verifier_dir = Path(verifier_dir)
    verifier_dir.mkdir(parents=True, exist_ok=True)
    _write_json(verifier_dir / "grading.json", report.to_json_dict())
    if report.pending:
        requests = {"format": "bureau-judge-requests/1", "task_id": report.task_id}
        _write_json(verifier_dir / JUDGE_REQUESTS, {**requests, "requests": report.pending})
    else:
        _write_json(verifier_dir / "reward.json", report.to_reward_values())
    out = stdout if stdout is not None else sys.stdout
    out.write(format_report(report))
    out.flush()


def _write_json(path: Path, data: object) -> None:
    # Write-then-rename so a reader never sees half a file; the mode follows the umask.
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
