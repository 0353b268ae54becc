"""Judge criteria inside the verifier: the work to judge, rendered to text, and the request file.

The verifier runs without a network, so it never calls a judge. For each `judge` criterion it
renders the work (an answer key's text, or a deliverable's text: paragraphs and tables of a
docx, each slide's text and tables of a pptx, each sheet's values of an xlsx, a text file as
is) and writes the questions to `judge-requests.json` beside grading.json. Whoever runs the
trial asks the judge and completes the reward (`bureau.trials.judging`). Work the agent failed
to produce (a missing key, an unreadable file) fails the criterion here, with no question.
"""

from __future__ import annotations

from typing import Any

from .answers import Answers
from .rubric import JudgeCriterion
from .values import Outcome
from .workspace import DeliverableError, Workspace

JUDGE_REQUESTS = "judge-requests.json"
MAX_WORK_CHARS = 40_000
_TEXT_SUFFIXES = (".txt", ".md", ".csv", ".json", ".eml", ".html")


def judge_request(
    criterion: JudgeCriterion, files: Workspace, answers: Answers
) -> dict[str, Any] | Outcome:
    """The request for the judge, or the failed outcome when there is no work to judge."""
    if criterion.field is not None:
        if answers.values is None:
            return Outcome(False, answers.error or "no answer")
        if criterion.field not in answers.values:
            return Outcome(False, f"the answer has no key {criterion.field!r}")
        value = answers.values[criterion.field]
        work = value if isinstance(value, str) else repr(value)
    else:
        assert criterion.path is not None
        try:
            work = render(files, criterion.path)
        except DeliverableError as exc:
            return Outcome(False, str(exc))
    if not work.strip():
        return Outcome(False, "nothing to judge: the work is empty")
    return {
        "id": criterion.id,
        "description": criterion.description,
        "question": criterion.guidance,
        "reference": criterion.reference,
        "work": work[:MAX_WORK_CHARS],
    }


def render(files: Workspace, relative: str) -> str:
    """A deliverable's text, read with the workspace's caps. Raises DeliverableError."""
    suffix = relative.lower().rsplit(".", 1)[-1] if "." in relative else ""
    if suffix == "docx":
        document = files.document(relative)
        lines = [p.text for p in document.paragraphs if p.text.strip()]
        for table in document.tables:
            lines += [" | ".join(cell.text for cell in row.cells) for row in table.rows]
        return "\n".join(lines)
    if suffix == "pptx":
        deck = files.deck(relative)
        lines = []
        for number, slide in enumerate(deck.slides, start=1):
            lines.append(f"--- slide {number}")
            for shape in slide.shapes:
                if shape.has_text_frame and shape.text_frame.text.strip():
                    lines.append(shape.text_frame.text)
                if shape.has_table:
                    rows = shape.table.rows
                    lines += [" | ".join(cell.text for cell in row.cells) for row in rows]
        return "\n".join(lines)
    if suffix == "xlsx":
        book = files.workbook(relative, data_only=True)
        lines = []
        for sheet in book.worksheets:
            lines.append(f"--- sheet {sheet.title}")
            for row in sheet.iter_rows(values_only=True):
                if any(value is not None for value in row):
                    lines.append(" | ".join("" if v is None else str(v) for v in row))
        return "\n".join(lines)
    if relative.lower().endswith(_TEXT_SUFFIXES):
        path = files.regular_file(relative, max_bytes=4 * MAX_WORK_CHARS)
        return path.read_text(encoding="utf-8", errors="replace")
    raise DeliverableError(f"{relative}: the judge reads docx, pptx, xlsx or text files")
