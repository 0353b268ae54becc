"""The `docx_content` criterion: a phrase in a Word document, optionally in a given style.

The check looks at every paragraph of the body and of its tables (nested tables included) and
passes when one paragraph contains the phrase as a normalized substring, so case, punctuation
and spacing do not matter. A phrase split across two paragraphs does not count. With `style`
set, the paragraph's style, or a style it is based on, must carry that name ("Heading 1",
"Title"), which is how a reader sees a heading.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .rubric import DocxContentCriterion
from .values import Outcome, clip, normalize_text, show
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
    found_styles: list[str] = []
    for number, paragraph in enumerate(_paragraphs(document.paragraphs, document.tables), 1):
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
