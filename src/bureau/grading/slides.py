"""The `pptx_content` criterion: one slide of a deck that meets every stated condition.

A criterion may pin a slide (1-based) or accept any slide, and may state up to three
conditions: the title placeholder's text equals `title`, some text on the slide (text frames
and table cells, inside groups too) contains `contains`, and a table on the slide holds
`table_cell.expected` at the row labelled `row_label` (first column) and the column headed
`column` (first row). All conditions are normalized comparisons and must hold on the same
slide. One cell, one value: when any slide of the named place (the pinned slide, or every
slide with the criterion's title) holds that cell with another value, in another table or
another row or column of the same labels, the criterion fails, so a deck that hedges with
candidate tables gains nothing. Text placed in an ordinary text box is not a title: a reader's
outline view, and PowerPoint's accessibility checker, only see the title placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .rubric import PptxContentCriterion, TableCell
from .values import Outcome, clip, compare_cell, normalize_text, show
from .workspace import DeliverableError, Workspace

if TYPE_CHECKING:
    from pptx.shapes.base import BaseShape
    from pptx.slide import Slide
    from pptx.table import Table


def check_pptx_content(criterion: PptxContentCriterion, workspace: Workspace) -> Outcome:
    """Pass iff the pinned slide (or any slide, if none is pinned) meets all set conditions."""
    try:
        slides = list(workspace.deck(criterion.path).slides)
    except DeliverableError as exc:
        return Outcome(False, clip(str(exc)))
    if criterion.slide is not None:
        if criterion.slide > len(slides):
            return Outcome(False, f"deck has {len(slides)} slides, no slide {criterion.slide}")
        numbered = [(criterion.slide, slides[criterion.slide - 1])]
    else:
        numbered = list(enumerate(slides, 1))
    if not numbered:
        return Outcome(False, f"{criterion.path} has no slides")
    closest: tuple[int, list[str]] | None = None
    for number, slide in numbered:
        failures = _slide_failures(slide, criterion)
        if not failures:
            conflict = _conflicting_cell(numbered, criterion)
            if conflict is not None:
                return conflict
            return Outcome(True, f"slide {number} meets all conditions")
        if closest is None or len(failures) < len(closest[1]):
            closest = (number, failures)
    assert closest is not None
    prefix = "" if criterion.slide is not None else "no slide meets all conditions; closest "
    return Outcome(False, clip(f"{prefix}slide {closest[0]}: {'; '.join(closest[1])}"))


def _slide_failures(slide: Slide, criterion: PptxContentCriterion) -> list[str]:
    failures: list[str] = []
    if criterion.title is not None:
        title_shape = slide.shapes.title
        if title_shape is None:
            failures.append("no title placeholder")
        elif normalize_text(title_shape.text_frame.text) != normalize_text(criterion.title):
            failures.append(f"title is {show(title_shape.text_frame.text, 40)}")
    if criterion.contains is not None:
        needle = normalize_text(criterion.contains)
        if not any(needle in normalize_text(text) for text in _texts(slide)):
            failures.append(f"no text contains {show(criterion.contains, 40)}")
    if criterion.table_cell is not None:
        outcome = _check_table_cell(slide, criterion.table_cell)
        if not outcome.passed:
            failures.append(outcome.reason)
    return failures


def _shapes(shapes: Iterable[BaseShape]) -> Iterator[BaseShape]:
    from pptx.shapes.group import GroupShape

    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _tables(slide: Slide) -> list[Table]:
    from pptx.shapes.graphfrm import GraphicFrame

    return [
        shape.table
        for shape in _shapes(slide.shapes)
        if isinstance(shape, GraphicFrame) and shape.has_table
    ]


def _texts(slide: Slide) -> Iterator[str]:
    from pptx.shapes.autoshape import Shape

    for shape in _shapes(slide.shapes):
        if isinstance(shape, Shape) and shape.has_text_frame:
            yield shape.text_frame.text
    for table in _tables(slide):
        for row in table.rows:
            for cell in row.cells:
                yield cell.text


def _conflicting_cell(
    numbered: list[tuple[int, Slide]], criterion: PptxContentCriterion
) -> Outcome | None:
    """A failure when any slide in the named place (its title, when the criterion gives one)
    holds the criterion's cell with another value: one cell, one value."""
    spec = criterion.table_cell
    if spec is None:
        return None
    for number, slide in numbered:
        if criterion.title is not None and not _has_title(slide, criterion.title):
            continue
        for text in _cells(slide, spec):
            outcome = compare_cell(text, spec.expected, spec.rel_tol, spec.abs_tol)
            if not outcome.passed:
                return Outcome(
                    False,
                    clip(
                        f"slide {number} gives table cell {show(spec.row_label, 30)}/"
                        f"{show(spec.column, 30)} another value: {outcome.reason}"
                    ),
                )
    return None


def _has_title(slide: Slide, title: str) -> bool:
    shape = slide.shapes.title
    return shape is not None and normalize_text(shape.text_frame.text) == normalize_text(title)


def _cells(slide: Slide, spec: TableCell) -> Iterator[str]:
    """The text of every cell on the slide at the spec's row label and column header."""
    for table in _tables(slide):
        rows = [[cell.text for cell in row.cells] for row in table.rows]
        if not rows:
            continue
        headers = [normalize_text(text) for text in rows[0]]
        for column, header in enumerate(headers):
            if header != normalize_text(spec.column):
                continue
            for row in rows[1:]:
                if row and normalize_text(row[0]) == normalize_text(spec.row_label):
                    yield row[column]


def _check_table_cell(slide: Slide, spec: TableCell) -> Outcome:
    label = f"table cell {show(spec.row_label, 30)}/{show(spec.column, 30)}"
    first_failure: Outcome | None = None
    for table in _tables(slide):
        rows = [[cell.text for cell in row.cells] for row in table.rows]
        if not rows:
            continue
        headers = [normalize_text(text) for text in rows[0]]
        if normalize_text(spec.column) not in headers:
            continue
        column = headers.index(normalize_text(spec.column))
        for row in rows[1:]:
            if row and normalize_text(row[0]) == normalize_text(spec.row_label):
                outcome = compare_cell(row[column], spec.expected, spec.rel_tol, spec.abs_tol)
                if outcome.passed:
                    return Outcome(True, f"{label}: {outcome.reason}")
                first_failure = first_failure or Outcome(False, f"{label}: {outcome.reason}")
                break
    return first_failure or Outcome(False, f"no table with {label}")
