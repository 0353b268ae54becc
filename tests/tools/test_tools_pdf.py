"""PDF reading in reading order, tables across pages, search, and writing a PDF."""

from __future__ import annotations

from pathlib import Path

import pypdf
import pytest

from bureau.tools import pdf, pdfread
from bureau.tools.blocks import Block
from bureau.tools.core import FailureKind, ToolFailure, Workspace
from bureau.tools.pdf import parse_pages


def test_two_columns_read_left_then_right(ws: Workspace, ws_root: Path) -> None:
    # The renderer draws the column lines interleaved; stream order mixes them.
    naive = pypdf.PdfReader(ws_root / "reports" / "review.pdf").pages[0].extract_text()
    assert "starts in" in naive and naive.index("mountain") < naive.index("spring")
    _, (page, _) = pdfread.read_pages(ws_root / "reports" / "review.pdf")
    lines = page.text.splitlines()
    assert lines[:7] == [
        "Portfolio review",
        "Summary line above the columns.",
        "Alpha column text says the harbour project starts in",
        "spring and runs two years.",
        "Beta column text says the mountain project is cancelled",
        "after review by the board.",
        "Full width line below the columns.",
    ]
    assert lines[7:9] == ["Code | Name | Budget", "P-001 | Project 1 | 1001"]
    assert page.rotated_text == "DRAFT"


def test_read_pages_reports_pages_and_watermark(ws: Workspace) -> None:
    out = pdf.pdf_read_pages(ws, "reports/review.pdf", pages="2")
    assert out.startswith("reports/review.pdf: 2 pages\n\n=== page 2 of 2 ===")
    assert "page 1 of 2" not in out
    assert "P-060 | Project 60 | 1060" in out
    assert out.endswith("[rotated text on this page, e.g. a watermark: DRAFT]")


def test_parse_pages() -> None:
    assert parse_pages(None, 5) is None
    assert parse_pages("2,4-5,2", 5) == [2, 4, 5]
    for bad in ["0", "3-1", "6", "x"]:
        with pytest.raises(ToolFailure):
            parse_pages(bad, 5)


def test_tables_continued_on_the_next_page_are_merged(ws: Workspace) -> None:
    out = pdf.pdf_extract_tables(ws, "reports/review.pdf")
    assert out.startswith("1 table in reports/review.pdf")
    assert "table 1 (page 1, header + 60 rows x 3 columns):" in out
    assert "| Code | Name | Budget |\n|---|---|---|\n| P-001 | Project 1 | 1001 |" in out
    assert out.endswith("| P-060 | Project 60 | 1060 |")
    assert pdf.pdf_extract_tables(ws, "reports/contract.pdf").startswith("no ruled tables")


def test_search_gives_page_and_context(ws: Workspace) -> None:
    out = pdf.pdf_search(ws, "reports/contract.pdf", "other party")
    assert out.startswith("1 match in reports/contract.pdf:\npage 1, line 3: 'other\\nparty'")
    assert "  party, and at once for a material breach." in out
    assert pdf.pdf_search(ws, "reports/contract.pdf", "arbitration").startswith("no match")


def test_wrong_files_are_refused(ws: Workspace) -> None:
    with pytest.raises(ToolFailure) as info:
        pdf.pdf_read_pages(ws, "finance/budget.xlsx")
    assert info.value.kind == FailureKind.wrong_file_type
    assert "sheet_read" in info.value.message
    (ws.real_root() / "fake.pdf").write_text("not a pdf")
    with pytest.raises(ToolFailure) as broken:
        pdf.pdf_read_pages(ws, "fake.pdf")
    assert broken.value.kind == FailureKind.unreadable_file


def test_create_then_read_back(ws: Workspace) -> None:
    blocks = [
        Block(kind="heading", text="Findings"),
        Block(kind="paragraph", text="Fees rose <10% & stayed under cap."),
        Block(kind="bullet", text="First point"),
        Block(kind="table", rows=[["Item", "Amount"], ["Fees", 1200.0], ["Tax", None]]),
        Block(kind="page_break"),
        Block(kind="heading", text="Annex", level=2),
    ]
    out = pdf.pdf_create(ws, "output/report.pdf", "Audit report", blocks)
    assert out == (
        "wrote output/report.pdf: 2 pages, title 'Audit report', 2 headings, 1 paragraph, "
        "1 bullet, 1 table, 1 page break, 3 table rows in all"
    )
    text = pdf.pdf_read_pages(ws, "output/report.pdf")
    for line in ["Audit report", "Fees rose <10% & stayed under cap.", "- First point", "Annex"]:
        assert line in text
    assert "| Fees | 1200 |" in pdf.pdf_extract_tables(ws, "output/report.pdf")
    with pytest.raises(ToolFailure) as info:
        pdf.pdf_create(ws, "output/report.pdf", "Again", blocks)
    assert info.value.kind == FailureKind.already_exists
