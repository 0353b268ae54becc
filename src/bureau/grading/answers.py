"""The agent's answer object and the criteria that check its keys.

Every task uses one answer convention: the agent writes a single JSON object to the rubric's
`answer_file` (normally `output/answer.json`) whose keys are the answer keys the instruction
lists. The file is read once per grading; if it is missing, unparsable or not an object, every
answer-key criterion fails with that reason while file criteria are still checked. A key that is
absent fails only its own criterion.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rubric import (
    AnswerCriterion,
    EntityListCriterion,
    MentionsCriterion,
    NumericCriterion,
    TextCriterion,
    UnsupportedCriterion,
)
from .values import (
    Outcome,
    as_text,
    compare_entities,
    compare_number,
    compare_text,
    normalize_text,
    show,
)
from .workspace import DeliverableError, Workspace


class AnswerKeyError(LookupError):
    """An answer key cannot be read; the message is the criterion's failure reason."""


@dataclass(frozen=True)
class Answers:
    """The parsed answer object, or the reason there is none."""

    file: str
    """Workspace-relative path of the answer file, for reasons."""
    values: dict[str, object] | None = None
    """The answer object; None when it could not be read."""
    error: str | None = None
    """Why `values` is None."""

    def get(self, key: str) -> object:
        """The value of `key`, or `AnswerKeyError` saying why there is none."""
        if self.values is None:
            raise AnswerKeyError(self.error or f"{self.file} unreadable")
        if key not in self.values:
            raise AnswerKeyError(f"no key {key!r} in {self.file}")
        return self.values[key]


def load_answers(workspace: Workspace, relative: str) -> Answers:
    """Read the answer object; failures are recorded in `Answers.error`, never raised."""
    try:
        data = workspace.read_json(relative)
    except DeliverableError as exc:
        return Answers(relative, error=str(exc))
    if not isinstance(data, dict):
        return Answers(relative, error=f"{relative} is not a JSON object")
    return Answers(relative, values=data)


def check_answer(criterion: AnswerCriterion, answers: Answers) -> Outcome:
    """Check one answer key against a numeric, text, entity-list, unsupported or mentions
    criterion."""
    try:
        value = answers.get(criterion.field)
    except AnswerKeyError as exc:
        return Outcome(False, str(exc))
    if isinstance(criterion, NumericCriterion):
        return compare_number(value, criterion.expected, criterion.rel_tol, criterion.abs_tol)
    if isinstance(criterion, TextCriterion):
        return compare_text(value, criterion.expected, criterion.mode, tuple(criterion.aliases))
    if isinstance(criterion, EntityListCriterion):
        return compare_entities(value, criterion.expected, criterion.mode)
    if isinstance(criterion, UnsupportedCriterion):
        if value is None:
            return Outcome(True, "null: the files do not support it")
        return Outcome(False, f"gave {show(value)}; the files do not support an answer")
    if isinstance(criterion, MentionsCriterion):
        return _mentions(value, criterion)
    raise TypeError(f"not an answer criterion: {criterion!r}")


def _mentions(value: object, criterion: MentionsCriterion) -> Outcome:
    text = as_text(value)
    if text is None or not text.strip():
        return Outcome(False, f"expected a text, got {show(value)}")
    if len(text) > criterion.max_chars:
        return Outcome(False, f"{len(text)} characters, more than {criterion.max_chars}")
    words = f" {normalize_text(text)} "
    missing = [
        group[0]
        for group in criterion.terms
        if not any(f" {normalize_text(term)} " in words for term in group)
    ]
    if missing:
        return Outcome(False, f"does not name {', '.join(missing)}")
    return Outcome(True, "names " + ", ".join(group[0] for group in criterion.terms))
