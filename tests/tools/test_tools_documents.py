"""Word tools: reading with styles and tables, creating, inserting and editing paragraphs."""

from __future__ import annotations

from pathlib import Path

import docx
import pytest

from bureau.tools import documents as d
from bureau.tools.blocks import Block
from bureau.tools.core import ToolFailure, Workspace


def test_read_shows_indices_styles_and_tables(ws: Workspace) -> None:
    assert d.docx_read(ws, "docs/memo.docx").splitlines() == [
        "docs/memo.docx: 4 paragraphs, 1 table",
        "[0] (Title) Board memo",
        "[1] (Heading 1) Decision",
        "[2] The board approved the harbour project on 2025-03-04.",
        "[3] (List Bullet) Budget capped at USD 2,000,000",
        "[table 1: 3 rows]",
        "| Owner | Task |",
        "|---|---|",
        "| Dana | Plan |",
        "| Eli | Review |",
    ]


def test_create_append_insert_edit_delete(ws: Workspace, ws_root: Path) -> None:
    path = "output/memo.docx"
    blocks = [
        Block(kind="heading", text="Termination of the agreement"),
        Block(kind="paragraph", text="notice period: 90 days"),
        Block(kind="table", rows=[["Date", "Step"], ["2025-12-01", "Serve notice"]]),
    ]
    assert d.docx_create(ws, path, blocks, title="Memo") == (
        "created output/memo.docx: title, 1 heading, 1 paragraph, 1 table, 2 table rows in all"
    )
    assert d.docx_append(ws, path, [Block(kind="paragraph", text="serve notice by: 2025-12-01")])
    inserted = d.docx_append(ws, path, [Block(kind="bullet", text="checked")], after_paragraph=1)
    assert inserted.endswith("after paragraph 1; later paragraph indices have shifted")
    assert d.docx_edit_paragraph(ws, path, 3, text="notice period: 75 days", style="Normal") == (
        "edited paragraph 3 of output/memo.docx: style -> 'Normal'; "
        "text 'notice period: 90 days' -> 'notice period: 75 days'"
    )
    assert d.docx_edit_paragraph(ws, path, 2, delete=True).startswith("deleted paragraph 2")
    document = docx.Document(str(ws_root / path))
    assert [(p.style.name if p.style else "", p.text) for p in document.paragraphs] == [
        ("Title", "Memo"),
        ("Heading 1", "Termination of the agreement"),
        ("Normal", "notice period: 75 days"),
        ("Normal", "serve notice by: 2025-12-01"),
    ]
    assert document.tables[0].cell(1, 1).text == "Serve notice"


def test_edit_errors(ws: Workspace) -> None:
    with pytest.raises(ToolFailure, match="no paragraph 40: the document has 4"):
        d.docx_edit_paragraph(ws, "docs/memo.docx", 40, text="x")
    with pytest.raises(ToolFailure, match="no style 'Fancy'; some styles:"):
        d.docx_edit_paragraph(ws, "docs/memo.docx", 1, style="Fancy")
