"""Spreadsheet tools: cached values, formulas on request, writes that keep other caches."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from bureau.tools import spreadsheet as sp
from bureau.tools.core import FailureKind, ToolFailure, Workspace

BOOK = "finance/budget.xlsx"


def test_list_sheets_and_names(ws: Workspace) -> None:
    assert sp.sheet_list(ws, BOOK).splitlines() == [
        "finance/budget.xlsx: 2 sheets",
        "- Budget: A1:C4 (4 rows x 3 columns, 2 formulas)",
        "- Summary: A1:B2 (2 rows x 2 columns, 1 formula)",
        "defined names: GrandTotal = Summary!$B$2",
    ]


def test_read_shows_cached_values_and_percentages(ws: Workspace) -> None:
    out = sp.sheet_read(ws, BOOK)
    assert out.splitlines()[:3] == [
        "finance/budget.xlsx, sheet 'Budget', A1:C4",
        "|  | A | B | C |",
        "|---|---|---|---|",
    ]
    assert "| 2 | Rent | 1200 | 0.4 (40%) |" in out
    assert "| 4 | Total | 3000 | 1 (100%) |" in out
    assert "[=" not in out


def test_read_with_formulas_and_a_range(ws: Workspace) -> None:
    out = sp.sheet_read(ws, BOOK, sheet="Budget", cell_range="B3:B4", formulas=True)
    assert out.splitlines()[1:] == [
        "|  | B |",
        "|---|---|",
        "| 3 | 1800 |",
        "| 4 | 3000 [=SUM(B2:B3)] |",
        "note: 1 formula, 0 without a cached value",
    ]
    assert sp.sheet_read(ws, BOOK, sheet="Summary", cell_range="Summary!$B$2").endswith(
        "| 2 | 3000 |"
    )


def test_read_errors(ws: Workspace) -> None:
    with pytest.raises(ToolFailure) as info:
        sp.sheet_read(ws, BOOK, sheet="Nope")
    assert str(info.value) == "not_found: no sheet 'Nope'; the sheets are Budget, Summary"
    with pytest.raises(ToolFailure, match="bad range"):
        sp.sheet_read(ws, BOOK, cell_range="A1:??")


def test_write_keeps_the_cached_values_of_other_formulas(ws: Workspace, ws_root: Path) -> None:
    out = sp.sheet_write(ws, BOOK, "Budget", "B2", [[1300], ["=B2*2"]])
    assert out.startswith("wrote 2 cells to Budget!B2:B3 in finance/budget.xlsx (1 formula:")
    values = openpyxl.load_workbook(ws_root / BOOK, data_only=True)
    assert values["Budget"]["B2"].value == 1300
    assert values["Budget"]["B3"].value is None  # written now: nothing computed it
    # Untouched formulas keep the value saved with the file, even though it is now stale.
    assert values["Budget"]["B4"].value == 3000
    assert values["Summary"]["B2"].value == 3000
    assert values.defined_names["GrandTotal"].attr_text == "Summary!$B$2"
    formulas = sp.sheet_read(ws, BOOK, cell_range="B3:B4", formulas=True)
    assert "| 3 | (not computed) [=B2*2] |" in formulas


def test_add_sheet_and_create(ws: Workspace, ws_root: Path) -> None:
    out = sp.sheet_add_sheet(ws, BOOK, "Notes", rows=[["a", 1.5, True]])
    assert out == (
        "added sheet 'Notes' to finance/budget.xlsx (sheets now: Budget, Summary, Notes); "
        "wrote 3 cells to Notes!A1:C1"
    )
    assert "| 1 | a | 1.5 | TRUE |" in sp.sheet_read(ws, BOOK, sheet="Notes")
    with pytest.raises(ToolFailure) as dup:
        sp.sheet_add_sheet(ws, BOOK, "Notes")
    assert dup.value.kind == FailureKind.already_exists
    assert openpyxl.load_workbook(ws_root / BOOK, data_only=True)["Budget"]["B4"].value == 3000

    created = sp.sheet_create(ws, "output/summary.xlsx", ["Data", "Calc"], [["k", "v"], ["x", 2]])
    assert (
        created == "created output/summary.xlsx with sheets Data, Calc; wrote 4 cells to Data!A1:B2"
    )
    assert openpyxl.load_workbook(ws_root / "output/summary.xlsx")["Data"]["B2"].value == 2
    assert sp.sheet_create(ws, "output/empty.xlsx").endswith("with sheets Sheet1")
    with pytest.raises(ToolFailure, match=r"must end in \.xlsx"):
        sp.sheet_create(ws, "output/x.csv")
