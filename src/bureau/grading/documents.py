"""The `docx_content` criterion: a phrase in a Word document, optionally in a given style.

The check looks at every paragraph of the body and of its tables (nested tables included) and
passes when one paragraph contains the phrase as a normalized substring, so case, punctuation
and spacing do not matter. A phrase split across two paragraphs does not count. With `style`
set, the paragraph's style, or a style it is based on, must carry that name ("Heading 1",
"Title"), which is how a reader sees a heading.

Where the instruction names the place, only that place counts: with `first`, the first
paragraph in `style` ("whose first heading reads ..."); with `label`, every paragraph that
states the label ("serve notice by:") must state the expected value, so a document listing
several candidate values fails instead of passing on the one that happens to be right.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .rubric import DocxContentCriterion
from .values import Outcome, clip, normalize_label, normalize_text, show
from .workspace import DeliverableError, Workspace

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph


def check_docx_content(criterion: DocxContentCriterion, workspace: Workspace) -> Outcome:
    """Pass iff some paragraph contains `contains` and, if `style` is set, has that style."""
    try:
        document = workspace.document(criterion.path)
    except DeliverableError as exc:
        return Outcome(False, clip(str(exc)))
    needle = normalize_text(criterion.contains)
    phrase = show(criterion.contains, 60)
    numbered = list(enumerate(_paragraphs(document.paragraphs, document.tables), 1))
    if criterion.first:
        return _first_in_style(criterion, numbered)
    if criterion.label is not None:
        label = normalize_label(criterion.label)
        lowered = normalize_label(criterion.contains)
        value = normalize_text(lowered[lowered.index(label) + len(label) :])
        for number, paragraph in numbered:
            # Every statement of the label, not just one of them, must give the value.
            stated = normalize_label(paragraph.text).split(label)[1:]
            if any(not normalize_text(rest).startswith(value) for rest in stated):
                return Outcome(
                    False,
                    clip(
                        f"paragraph {number} gives another {show(criterion.label, 30)}: "
                        f"{show(paragraph.text, 60)} (one statement, one value)"
                    ),
                )
    found_styles: list[str] = []
    for number, paragraph in numbered:
        if needle not in normalize_text(paragraph.text):
            continue
        styles = _style_names(paragraph)
        if criterion.style is None or normalize_text(criterion.style) in map(
            normalize_text, styles
        ):
            shown = f" ({styles[0]!r})" if styles else ""
            return Outcome(True, clip(f"paragraph {number}{shown} contains {phrase}"))
        found_styles.append(styles[0] if styles else "no style")
    if found_styles:
        return Outcome(
            False,
            clip(f"{phrase} is only in {found_styles} paragraphs, not {criterion.style!r}"),
        )
    return Outcome(False, clip(f"no paragraph of {criterion.path} contains {phrase}"))


def _first_in_style(
    criterion: DocxContentCriterion, numbered: list[tuple[int, Paragraph]]
) -> Outcome:
    assert criterion.style is not None
    wanted = normalize_text(criterion.style)
    for number, paragraph in numbered:
        if wanted not in map(normalize_text, _style_names(paragraph)):
            continue
        where = f"the first {criterion.style!r} paragraph ({number})"
        if normalize_text(criterion.contains) in normalize_text(paragraph.text):
            return Outcome(True, clip(f"{where} contains {show(criterion.contains, 60)}"))
        return Outcome(False, clip(f"{where} reads {show(paragraph.text, 60)}"))
    return Outcome(False, clip(f"no {criterion.style!r} paragraph in {criterion.path}"))


def _paragraphs(paragraphs: list[Paragraph], tables: list[Table]) -> Iterator[Paragraph]:
    yield from paragraphs
    for table in tables:
        for row in table.rows:
            for cell in row.cells:
                yield from _paragraphs(cell.paragraphs, cell.tables)


def _style_names(paragraph: Paragraph) -> list[str]:
    names: list[str] = []
    style = paragraph.style
    # A custom style based on "Heading 1" renders as a heading, so its ancestry counts.
    while style is not None and len(names) < 20:
        if style.name:
            names.append(style.name)
        style = style.base_style
    return names
