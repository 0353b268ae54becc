"""Slide tools (pptx): read a deck or one slide, create a deck, add and edit slides and tables.

Slides are numbered from 1 in deck order. A slide reads as its title, its other text (bullets and
text boxes), its tables as Markdown, its charts as categories and series values, and its
speaker notes. New slides use the default template's "Title and Content" layout when they have
bullets and "Title Only" otherwise; tables go below the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pptx import Presentation
from pptx.presentation import Presentation as Deck
from pptx.util import Emu, Inches, Pt
from pydantic import Field

from bureau.tools import readers
from bureau.tools.blocks import CellInput, cell_text, markdown_table
from bureau.tools.core import (
    FailureKind,
    Overwrite,
    PathArg,
    ToolFailure,
    ToolSet,
    Workspace,
    count,
)

TOOLS = ToolSet("slides", "slides_")
SUFFIXES = (".pptx",)
SlideArg = Annotated[int, Field(ge=1, description="Slide number, 1-based.")]
TableRowsArg = Annotated[
    list[list[CellInput]], Field(description="Table rows, the first row being the header.")
]
LAYOUT_TITLE, LAYOUT_CONTENT, LAYOUT_TITLE_ONLY = 0, 1, 5


def _open(file: Path) -> Deck:
    try:
        return Presentation(str(file))
    except Exception as exc:
        raise ToolFailure(
            FailureKind.unreadable_file, f"{file.name} is not a readable pptx"
        ) from exc


def _slide(deck: Deck, number: int) -> Any:
    if number > len(deck.slides):
        raise ToolFailure(
            FailureKind.invalid_argument,
            f"slide {number} does not exist: the deck has {len(deck.slides)}",
        )
    return deck.slides[number - 1]


def _format_slide(info: readers.SlideInfo) -> str:
    lines = [f"--- slide {info.number}: {info.title or '(no title)'}  [{info.layout}]"]
    lines += [f"  {t}" for t in info.texts]
    for i, table in enumerate(info.tables, start=1):
        lines.append(
            f"  table {i} ({len(table)} rows x {max(map(len, table), default=0)} columns):"
        )
        lines.append(markdown_table(table))
    for chart in info.charts:
        lines.append(f"  chart ({chart.kind}){': ' + chart.title if chart.title else ''}")
        lines.append(f"    categories: {chart.categories}")
        lines += [f"    series {name!r}: {values}" for name, values in chart.series.items()]
    if info.notes:
        lines.append(f"  notes: {info.notes}")
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def slides_read(
    ws: Workspace,
    path: PathArg,
    slide: Annotated[
        int | None, Field(ge=1, description="One slide to read; omit for all.")
    ] = None,
) -> str:
    """Read a deck (all slides) or one slide: title, text, tables (Markdown), chart data
    (categories and series values) and speaker notes."""
    file = ws.file(path, SUFFIXES)
    deck = _open(file)
    total = len(deck.slides)
    if slide is not None:
        return f"{ws.rel(file)}: slide {slide} of {total}\n" + _format_slide(
            readers.slide_info(_slide(deck, slide), slide)
        )
    infos = [readers.slide_info(s, i) for i, s in enumerate(deck.slides, start=1)]
    return f"{ws.rel(file)}: {total} slides\n" + "\n".join(_format_slide(i) for i in infos)


def _save(ws: Workspace, deck: Deck, target: Path) -> None:
    ws.atomic_save(target, lambda tmp: deck.save(str(tmp)))


def _set_bullets(frame: Any, bullets: list[str]) -> None:
    frame.text = bullets[0] if bullets else ""
    for text in bullets[1:]:
        frame.add_paragraph().text = text


def _body_placeholder(slide: Any) -> Any | None:
    title = slide.shapes.title
    for shape in slide.placeholders:
        if (title is None or shape.shape_id != title.shape_id) and shape.has_text_frame:
            return shape
    return None


def _text_bottom(slide: Any) -> int:
    bottoms = [
        int(s.top + s.height)
        for s in slide.shapes
        if s.has_text_frame and s.top is not None and s.height is not None
    ]
    return max(bottoms, default=int(Inches(1.5)))


def _add_table(deck: Deck, slide: Any, rows: list[list[str]], top: int | None = None) -> None:
    if not rows:
        raise ToolFailure(FailureKind.invalid_argument, "a table needs at least one row")
    n_cols = max(len(r) for r in rows)
    top = top if top is not None else _text_bottom(slide) + int(Inches(0.2))
    width = int(deck.slide_width or Inches(10)) - int(Inches(1))
    shape = slide.shapes.add_table(
        len(rows), n_cols, Inches(0.5), Emu(top), Emu(width), Inches(0.3) * len(rows)
    )
    for i, row in enumerate(rows):
        for j in range(n_cols):
            cell = shape.table.cell(i, j)
            cell.text = row[j] if j < len(row) else ""
            cell.text_frame.paragraphs[0].font.size = Pt(12)


@TOOLS.tool(read_only=False)
def slides_create(
    ws: Workspace,
    path: PathArg,
    title: Annotated[str, Field(description="Title of the cover slide.")],
    subtitle: Annotated[str, Field(description="Subtitle of the cover slide.")] = "",
    overwrite: Overwrite = False,
) -> str:
    """Create a new deck with a cover slide (title and subtitle). Add content slides with
    slides_add_slide."""
    target = ws.target(path, SUFFIXES, overwrite=overwrite)
    deck = Presentation()
    cover = deck.slides.add_slide(deck.slide_layouts[LAYOUT_TITLE])
    cover.shapes.title.text = title
    if subtitle:
        cover.placeholders[1].text = subtitle
    _save(ws, deck, target)
    return f"created {ws.rel(target)} with 1 slide (cover: {title!r})"


@TOOLS.tool(read_only=False)
def slides_add_slide(
    ws: Workspace,
    path: PathArg,
    title: Annotated[str, Field(description="Title of the new slide.")],
    bullets: Annotated[list[str] | None, Field(description="Bullet points, in order.")] = None,
    table: Annotated[
        list[list[CellInput]] | None,
        Field(description="Optional table rows (first row the header), placed below the text."),
    ] = None,
    notes: Annotated[str, Field(description="Speaker notes.")] = "",
    position: Annotated[
        int | None, Field(ge=1, description="Slide number the new slide gets; omit to append.")
    ] = None,
) -> str:
    """Add a slide with a title, optional bullets, an optional table and speaker notes."""
    file = ws.file(path, SUFFIXES)
    deck = _open(file)
    layout = LAYOUT_CONTENT if bullets else LAYOUT_TITLE_ONLY
    slide = deck.slides.add_slide(deck.slide_layouts[layout])
    slide.shapes.title.text = title
    if bullets:
        body = _body_placeholder(slide)
        assert body is not None
        _set_bullets(body.text_frame, bullets)
        if table:
            body.height = Inches(1.8)
    if table:
        _add_table(deck, slide, [[cell_text(c) for c in row] for row in table])
    if notes:
        slide.notes_slide.notes_text_frame.text = notes
    number = len(deck.slides)
    if position is not None and position < number:
        ids = deck.slides._sldIdLst  # python-pptx has no public API to reorder slides
        entry = ids[-1]
        ids.remove(entry)
        ids.insert(position - 1, entry)
        number = position
    _save(ws, deck, file)
    parts = [count(len(bullets or []), "bullet")] + ([f"a {len(table)}-row table"] if table else [])
    parts += ["notes"] if notes else []
    return (
        f"added slide {number} {title!r} to {ws.rel(file)} ({', '.join(parts)}); "
        f"the deck has {len(deck.slides)} slides"
    )


@TOOLS.tool(read_only=False)
def slides_edit_slide(
    ws: Workspace,
    path: PathArg,
    slide: SlideArg,
    title: Annotated[str | None, Field(description="New title; omit to keep.")] = None,
    bullets: Annotated[
        list[str] | None, Field(description="New body text, replacing the old; omit to keep.")
    ] = None,
    notes: Annotated[str | None, Field(description="New speaker notes; omit to keep.")] = None,
) -> str:
    """Change a slide's title, body text (bullets) or speaker notes. Tables are changed with
    slides_set_table."""
    file = ws.file(path, SUFFIXES)
    deck = _open(file)
    target = _slide(deck, slide)
    changed = []
    if title is not None:
        if target.shapes.title is None:
            raise ToolFailure(FailureKind.invalid_argument, f"slide {slide} has no title box")
        target.shapes.title.text = title
        changed.append(f"title -> {title!r}")
    if bullets is not None:
        body = _body_placeholder(target)
        if body is None:
            body = target.shapes.add_textbox(
                Inches(0.5), Inches(1.5), (deck.slide_width or Inches(10)) - Inches(1), Inches(2)
            )
        _set_bullets(body.text_frame, bullets)
        changed.append(f"body -> {count(len(bullets), 'bullet')}")
    if notes is not None:
        target.notes_slide.notes_text_frame.text = notes
        changed.append("notes")
    if not changed:
        raise ToolFailure(
            FailureKind.invalid_argument, "nothing to change: pass title, bullets or notes"
        )
    _save(ws, deck, file)
    return f"edited slide {slide} of {ws.rel(file)}: {'; '.join(changed)}"


@TOOLS.tool(read_only=False)
def slides_set_table(
    ws: Workspace,
    path: PathArg,
    slide: SlideArg,
    rows: TableRowsArg,
    table: Annotated[
        int,
        Field(
            ge=1,
            description="Which table on the slide (1 = first); a slide without "
            "tables gets a new one.",
        ),
    ] = 1,
) -> str:
    """Replace the contents of a table on a slide with new rows (the size may change), or add a
    table to a slide that has none."""
    file = ws.file(path, SUFFIXES)
    deck = _open(file)
    target = _slide(deck, slide)
    texts = [[cell_text(c) for c in row] for row in rows]
    tables = [s for s in target.shapes if getattr(s, "has_table", False) and s.has_table]
    if not tables:
        _add_table(deck, target, texts)
        action = "added a table"
    elif table > len(tables):
        raise ToolFailure(
            FailureKind.invalid_argument, f"slide {slide} has {len(tables)} tables, not {table}"
        )
    else:
        shape = tables[table - 1]
        old = shape.table
        same_shape = len(old.rows) == len(texts) and len(old.columns) == max(map(len, texts))
        if same_shape:
            for i, row in enumerate(texts):
                for j, text in enumerate(row):
                    old.cell(i, j).text = text
        else:
            top = int(shape.top)
            shape._element.getparent().remove(shape._element)  # no public API to delete a shape
            _add_table(deck, target, texts, top)
        action = f"replaced table {table}"
    _save(ws, deck, file)
    n_cols = max(map(len, texts), default=0)
    return f"{action} on slide {slide} of {ws.rel(file)}: {len(texts)} rows x {n_cols} columns"


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["slides"])
