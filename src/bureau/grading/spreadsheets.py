"""The `xlsx_cell` criterion: one cell of a workbook deliverable.

A cell is found either by its A1 address or the way a reader finds it: the row whose column-A
label matches `row_label` and the column whose row-1 header matches `column` (both compared
normalized). A formula cell is graded by the value Excel cached when it last saved the file;
workbooks written by libraries such as openpyxl carry no cached values, and such a cell fails
with a reason that says so rather than being evaluated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .rubric import XlsxCellCriterion
from .values import Outcome, as_text, clip, compare_cell, normalize_text, show
from .workspace import DeliverableError, Workspace

if TYPE_CHECKING:
    from openpyxl.workbook.workbook import Workbook
    from openpyxl.worksheet.worksheet import Worksheet


def check_xlsx_cell(criterion: XlsxCellCriterion, workspace: Workspace) -> Outcome:
    """Compare the addressed cell with `expected`: numbers with tolerances, text normalized."""
    try:
        workbook = workspace.workbook(criterion.path)
        sheet = _find_sheet(workbook, criterion.sheet, criterion.path)
        if criterion.cell is not None:
            address = criterion.cell
        else:
            assert criterion.row_label is not None and criterion.column is not None
            address = _find_by_labels(sheet, criterion.row_label, criterion.column)
        where = f"{sheet.title}!{address}"
        cell = sheet[address]
        value = cell.value
        if cell.data_type == "f" or (isinstance(value, str) and value.startswith("=")):
            value = _cached_value(workspace, criterion.path, sheet.title, address, value)
    except DeliverableError as exc:
        return Outcome(False, clip(str(exc)))
    outcome = compare_cell(value, criterion.expected, criterion.rel_tol, criterion.abs_tol)
    return Outcome(outcome.passed, clip(f"{where}: {outcome.reason}"))


def _find_sheet(workbook: Workbook, name: str | None, relative: str) -> Worksheet:
    if name is None:
        return workbook.active
    if name in workbook.sheetnames:
        return workbook[name]
    # A sheet named "expiring " instead of "Expiring" still holds the requested content.
    for candidate in workbook.sheetnames:
        if candidate.strip().casefold() == name.strip().casefold():
            return workbook[candidate]
    raise DeliverableError(f"no sheet {name!r} in {relative} (sheets: {workbook.sheetnames})")


def _find_by_labels(sheet: Worksheet, row_label: str, column: str) -> str:
    wanted_column = normalize_text(column)
    column_letter = None
    for cell in next(sheet.iter_rows(min_row=1, max_row=1), ()):
        if _cell_key(cell.value) == wanted_column:
            column_letter = cell.column_letter
            break
    if column_letter is None:
        raise DeliverableError(f"no column headed {column!r} in row 1 of sheet {sheet.title}")
    wanted_row = normalize_text(row_label)
    for (cell,) in sheet.iter_rows(min_row=2, max_col=1):
        if _cell_key(cell.value) == wanted_row:
            return f"{column_letter}{cell.row}"
    raise DeliverableError(f"no row labelled {row_label!r} in column A of sheet {sheet.title}")


def _cell_key(value: object) -> str | None:
    text = as_text(value)
    return None if text is None else normalize_text(text)


def _cached_value(
    workspace: Workspace, relative: str, sheet: str, address: str, formula: object
) -> object:
    cached = workspace.workbook(relative, data_only=True)[sheet][address].value
    if cached is None:
        raise DeliverableError(
            f"{sheet}!{address}: formula {show(str(formula), 50)} without a cached value"
        )
    return cached
