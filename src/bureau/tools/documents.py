"""Word tools (docx): read with headings and tables, create, append or insert, edit paragraphs.

A document reads as its top-level paragraphs, each with its index and, unless it is plain body
text, its style ('Heading 1', 'List Bullet', ...), and its tables in place as Markdown. The
index is what the editing tools take; it counts every paragraph, empty ones included, so it
stays stable while reading, and it shifts after an insert or a delete (the result says so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import docx
from docx.document import Document
from pydantic import Field

from bureau.tools import readers
from bureau.tools.blocks import Block, Blocks, describe_blocks, markdown_table
from bureau.tools.core import FailureKind, Overwrite, PathArg, ToolFailure, ToolSet, Workspace

TOOLS = ToolSet("documents", "docx_")
SUFFIXES = (".docx",)
BODY_STYLES = {"Normal", "Body Text", ""}


def _open(file: Path) -> Document:
    try:
        return docx.Document(str(file))
    except Exception as exc:
        raise ToolFailure(
            FailureKind.unreadable_file, f"{file.name} is not a readable docx"
        ) from exc


def _save(ws: Workspace, document: Document, target: Path) -> None:
    ws.atomic_save(target, lambda tmp: document.save(str(tmp)))


@TOOLS.tool(read_only=True)
def docx_read(ws: Workspace, path: PathArg) -> str:
    """Read a Word document in order: '[index] (Style) text' for each non-empty paragraph
    (the style is left out for plain body text) and tables in place as Markdown. Use the
    index with docx_edit_paragraph or docx_append."""
    file = ws.file(path, SUFFIXES)
    try:
        items = readers.docx_items(file)
    except Exception as exc:
        raise ToolFailure(FailureKind.unreadable_file, f"{path} is not a readable docx") from exc
    n_pars = sum(1 for i in items if i.kind == "paragraph")
    n_tables = len(items) - n_pars
    tables = f"{n_tables} table{'s' if n_tables != 1 else ''}"
    lines = [f"{ws.rel(file)}: {n_pars} paragraphs, {tables}"]
    for item in items:
        if item.kind == "table":
            lines.append(f"[table {item.index + 1}: {len(item.rows)} rows]")
            lines.append(markdown_table(item.rows))
        elif item.text.strip():
            style = "" if item.style in BODY_STYLES else f"({item.style}) "
            lines.append(f"[{item.index}] {style}{item.text}")
    return "\n".join(lines)


def _add_blocks(document: Document, blocks: list[Block]) -> list[Any]:
    """Append `blocks` at the end of the body; returns their XML elements, in order."""
    elements: list[Any] = []
    for block in blocks:
        if block.kind == "heading":
            elements.append(document.add_heading(block.text, level=block.level)._p)
        elif block.kind == "paragraph":
            elements.append(document.add_paragraph(block.text)._p)
        elif block.kind == "bullet":
            elements.append(document.add_paragraph(block.text, style="List Bullet")._p)
        elif block.kind == "page_break":
            elements.append(document.add_page_break()._p)
        elif block.kind == "table":
            rows = block.table_rows()
            if not rows:
                raise ToolFailure(FailureKind.invalid_argument, "a table block needs rows")
            table = document.add_table(rows=len(rows), cols=max(len(r) for r in rows))
            table.style = "Table Grid"
            for i, row in enumerate(rows):
                for j, text in enumerate(row):
                    table.cell(i, j).text = text
            elements.append(table._tbl)
    return elements


@TOOLS.tool(read_only=False)
def docx_create(
    ws: Workspace,
    path: PathArg,
    blocks: Blocks,
    title: Annotated[
        str | None, Field(description="Optional document title (style 'Title') before the blocks.")
    ] = None,
    overwrite: Overwrite = False,
) -> str:
    """Create a Word document from content blocks. A heading block of level N gets the style
    'Heading N' (so level 1 is 'Heading 1'); bullets get 'List Bullet'; tables get a grid."""
    target = ws.target(path, SUFFIXES, overwrite=overwrite)
    document = docx.Document()
    if title:
        document.add_heading(title, level=0)
        document.core_properties.title = title
    _add_blocks(document, blocks)
    _save(ws, document, target)
    return f"created {ws.rel(target)}: {'title, ' if title else ''}{describe_blocks(blocks)}"


@TOOLS.tool(read_only=False)
def docx_append(
    ws: Workspace,
    path: PathArg,
    blocks: Blocks,
    after_paragraph: Annotated[
        int | None,
        Field(
            ge=0,
            description="Insert after the paragraph with this index; omit to append at the end.",
        ),
    ] = None,
) -> str:
    """Add content blocks to an existing Word document, at the end or after a paragraph."""
    file = ws.file(path, SUFFIXES)
    document = _open(file)
    anchor = None
    if after_paragraph is not None:
        anchor = _paragraph(document, after_paragraph)._p
    elements = _add_blocks(document, blocks)
    if anchor is not None:
        for element in elements:
            anchor.addnext(element)
            anchor = element
    _save(ws, document, file)
    where = "at the end" if after_paragraph is None else f"after paragraph {after_paragraph}"
    shift = "" if after_paragraph is None else "; later paragraph indices have shifted"
    return f"added {describe_blocks(blocks)} to {ws.rel(file)} {where}{shift}"


def _paragraph(document: Document, index: int) -> Any:
    paragraphs = document.paragraphs
    if index >= len(paragraphs):
        raise ToolFailure(
            FailureKind.invalid_argument,
            f"no paragraph {index}: the document has {len(paragraphs)} (0-{len(paragraphs) - 1})",
        )
    return paragraphs[index]


@TOOLS.tool(read_only=False)
def docx_edit_paragraph(
    ws: Workspace,
    path: PathArg,
    index: Annotated[int, Field(ge=0, description="Paragraph index as shown by docx_read.")],
    text: Annotated[
        str | None, Field(description="New text; the first run's formatting is kept.")
    ] = None,
    style: Annotated[
        str | None, Field(description="New style, e.g. 'Heading 1', 'Normal', 'List Bullet'.")
    ] = None,
    delete: Annotated[bool, Field(description="Remove the paragraph instead.")] = False,
) -> str:
    """Replace the text and/or style of one paragraph, or delete it."""
    file = ws.file(path, SUFFIXES)
    document = _open(file)
    par = _paragraph(document, index)
    old = par.text
    if delete:
        par._p.getparent().remove(par._p)
        _save(ws, document, file)
        return (
            f"deleted paragraph {index} ({old[:80]!r}) from {ws.rel(file)}; later paragraph "
            "indices have shifted down by one"
        )
    if text is None and style is None:
        raise ToolFailure(
            FailureKind.invalid_argument, "nothing to change: pass text, style or delete"
        )
    changes = []
    if style is not None:
        try:
            par.style = document.styles[style]
        except KeyError as exc:
            names = sorted(s.name for s in document.styles if s.type == 1 and s.name)[:25]
            raise ToolFailure(
                FailureKind.invalid_argument, f"no style {style!r}; some styles: {', '.join(names)}"
            ) from exc
        changes.append(f"style -> {style!r}")
    if text is not None:
        runs = par.runs
        if runs:
            runs[0].text = text
            for run in runs[1:]:
                run._r.getparent().remove(run._r)
        else:
            par.add_run(text)
        changes.append(f"text {old[:60]!r} -> {text[:60]!r}")
    _save(ws, document, file)
    return f"edited paragraph {index} of {ws.rel(file)}: {'; '.join(changes)}"


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["documents"])
