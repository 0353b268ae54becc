"""Spreadsheet tools (xlsx): list sheets, read ranges, write cells, add sheets, create workbooks.

A workbook stores a formula together with the value it last evaluated to (the cached value);
readers that do not run a spreadsheet engine, such as graders and openpyxl with
`data_only=True`, only see that cache. Two consequences shape these tools:

- reads show cached values, and formulas only when asked;
- openpyxl drops every cached value when it saves, so a write would blank all the formulas of
  a workbook for such readers. Writes therefore put the cached values of the formulas they did
  not touch back into the saved file. A formula the model writes has no cached value (nothing
  here evaluates formulas), and the tool result says so: results that must be readable should
  be written as values.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path
from typing import Annotated, Any
from xml.sax.saxutils import escape

import openpyxl
from openpyxl.utils import get_column_letter
from openpyxl.utils.cell import coordinate_from_string, range_boundaries
from openpyxl.workbook.workbook import Workbook
from openpyxl.worksheet.worksheet import Worksheet
from pydantic import Field

from bureau.tools.blocks import CellInput
from bureau.tools.core import (
    FailureKind,
    Overwrite,
    PathArg,
    ToolFailure,
    ToolSet,
    Workspace,
    count,
)

TOOLS = ToolSet("spreadsheet", "sheet_")
SUFFIXES = (".xlsx", ".xlsm")
MAX_READ_ROWS = 500
SheetArg = Annotated[str | None, Field(description="Sheet name; omit for the first sheet.")]
RowsArg = Annotated[
    list[list[CellInput]],
    Field(
        description="Rows of cell values, written from the start cell rightwards and down. "
        "Numbers stay numbers; a string starting with '=' is a formula (e.g. '=SUM(B2:B9)'); "
        "null leaves a cell empty."
    ),
]


def _load(file: Path, *, values: bool) -> Workbook:
    try:
        return openpyxl.load_workbook(
            file, data_only=values, keep_vba=file.suffix.lower() == ".xlsm"
        )
    except Exception as exc:
        raise ToolFailure(
            FailureKind.unreadable_file, f"{file.name} is not a readable xlsx"
        ) from exc


def _sheet(wb: Workbook, name: str | None) -> Worksheet:
    if name is None:
        ws = wb.worksheets[0]
        return ws
    if name not in wb.sheetnames:
        raise ToolFailure(
            FailureKind.not_found, f"no sheet {name!r}; the sheets are {', '.join(wb.sheetnames)}"
        )
    ws = wb[name]
    if not isinstance(ws, Worksheet):
        raise ToolFailure(FailureKind.wrong_file_type, f"{name!r} is a chart sheet")
    return ws


def _show(value: Any, number_format: str = "General") -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, float):
        text = format(value, ".15g")
        return f"{text} ({value * 100:.10g}%)" if "%" in number_format else text
    if isinstance(value, int) and "%" in number_format:
        return f"{value} ({value * 100}%)"
    return str(value).replace("\n", " ").replace("|", "\\|")


@TOOLS.tool(read_only=True)
def sheet_list(ws: Workspace, path: PathArg) -> str:
    """List a workbook's sheets with their used range and size, and its defined names."""
    file = ws.file(path, SUFFIXES)
    wb = _load(file, values=False)
    lines = [f"{ws.rel(file)}: {len(wb.sheetnames)} sheets"]
    for sheet in wb.worksheets:
        formulas = sum(
            1
            for row in sheet.iter_rows()
            for c in row
            if isinstance(c.value, str) and c.value.startswith("=")
        )
        extra = f", {count(formulas, 'formula')}" if formulas else ""
        lines.append(
            f"- {sheet.title}: {sheet.dimensions} ({sheet.max_row} rows x {sheet.max_column} "
            f"columns{extra}){' [hidden]' if sheet.sheet_state != 'visible' else ''}"
        )
    names = [f"{n} = {d.attr_text}" for n, d in wb.defined_names.items()]
    if names:
        lines.append("defined names: " + "; ".join(names))
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def sheet_read(
    ws: Workspace,
    path: PathArg,
    sheet: SheetArg = None,
    cell_range: Annotated[
        str | None,
        Field(description="Range such as 'A1:D20', 'B:C' or '5:9'; omit for the used range."),
    ] = None,
    formulas: Annotated[
        bool, Field(description="Also show each formula next to its cached value.")
    ] = False,
) -> str:
    """Read a range of a sheet as a grid (a Markdown table with column letters and row
    numbers). Cells show their values as last computed and saved (cached values); with
    formulas=true a formula cell shows 'value [=FORMULA]'. Percent-formatted numbers also show
    as a percentage. At most 500 rows per call."""
    file = ws.file(path, SUFFIXES)
    values_wb = _load(file, values=True)
    sheet_v = _sheet(values_wb, sheet)
    sheet_f = _sheet(_load(file, values=False), sheet_v.title) if formulas else None
    if cell_range:
        ref = cell_range.split("!", 1)[-1].replace("$", "")
        try:
            min_col, min_row, max_col, max_row = range_boundaries(ref.upper())
        except ValueError as exc:
            raise ToolFailure(FailureKind.invalid_argument, f"bad range {cell_range!r}") from exc
    else:
        min_col, min_row, max_col, max_row = 1, 1, sheet_v.max_column, sheet_v.max_row
    min_col, min_row = min_col or 1, min_row or 1
    max_col, max_row = max_col or sheet_v.max_column, max_row or sheet_v.max_row
    last_row = min(max_row, min_row + MAX_READ_ROWS - 1)
    header = ["", *(get_column_letter(c) for c in range(min_col, max_col + 1))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    n_formulas = n_uncached = 0
    for r in range(min_row, last_row + 1):
        cells = [str(r)]
        for c in range(min_col, max_col + 1):
            cell = sheet_v.cell(row=r, column=c)
            text = _show(cell.value, cell.number_format)
            expr = sheet_f.cell(row=r, column=c).value if sheet_f is not None else None
            if isinstance(expr, str) and expr.startswith("="):
                n_formulas += 1
                if cell.value is None:
                    n_uncached += 1
                    text = "(not computed)"
                shown_expr = expr.replace("|", "\\|")
                text = f"{text} [{shown_expr}]"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    span = f"{get_column_letter(min_col)}{min_row}:{get_column_letter(max_col)}{last_row}"
    title = f"{ws.rel(file)}, sheet {sheet_v.title!r}, {span}"
    notes = []
    if last_row < max_row:
        notes.append(f"rows {last_row + 1}-{max_row} not shown; read them with a cell_range")
    if n_formulas:
        notes.append(f"{count(n_formulas, 'formula')}, {n_uncached} without a cached value")
    return "\n".join([title, *lines, *(f"note: {n}" for n in notes)])


# -- writing ---------------------------------------------------------------------------------
_ERROR_VALUES = {"#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A"}
_FORMULA_CELL = re.compile(rb'<c r="([A-Z]+[0-9]+)"([^>]*)><f>(.*?)</f><v\s*/?>(?:</v>)?</c>')


def _cached_xml(value: Any) -> tuple[bytes, bytes] | None:
    """The type attribute and <v> text a cached value is stored with."""
    if isinstance(value, bool):
        return b' t="b"', b"1" if value else b"0"
    if isinstance(value, int | float):
        return b"", format(value, ".17g").encode()
    if isinstance(value, str):
        kind = b' t="e"' if value in _ERROR_VALUES else b' t="str"'
        return kind, escape(value).encode()
    return None


def _restore_cache(xml: bytes, values: dict[str, Any]) -> bytes:
    def put(m: re.Match[bytes]) -> bytes:
        stored = _cached_xml(values.get(m.group(1).decode()))
        if stored is None:
            return m.group(0)
        attrs = re.sub(rb'\s*t="[^"]*"', b"", m.group(2)) + stored[0]
        return b'<c r="%s"%s><f>%s</f><v>%s</v></c>' % (m.group(1), attrs, m.group(3), stored[1])

    return _FORMULA_CELL.sub(put, xml)


def _save(
    ws: Workspace, wb: Workbook, target: Path, cached: dict[str, dict[str, Any]] | None = None
) -> None:
    """Save through a temporary file, putting back `cached` values (sheet -> cell -> value)."""
    # openpyxl writes the n-th worksheet of `wb.worksheets` as xl/worksheets/sheet<n>.xml.
    parts = (
        {
            f"xl/worksheets/sheet{i}.xml": cached.get(s.title, {})
            for i, s in enumerate(wb.worksheets, start=1)
        }
        if cached
        else {}
    )

    def save(tmp: Path) -> None:
        wb.save(tmp)
        if not any(parts.values()):
            return
        with zipfile.ZipFile(tmp) as src:
            entries = [(info, src.read(info.filename)) for info in src.infolist()]
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for info, data in entries:
                if parts.get(info.filename):
                    data = _restore_cache(data, parts[info.filename])
                dst.writestr(info, data)

    ws.atomic_save(target, save)


def _cached_formula_values(file: Path, wb: Workbook) -> dict[str, dict[str, Any]]:
    values = _load(file, values=True)
    cached: dict[str, dict[str, Any]] = {}
    for sheet in wb.worksheets:
        vs = values[sheet.title]
        cached[sheet.title] = {
            c.coordinate: vs[c.coordinate].value
            for row in sheet.iter_rows()
            for c in row
            if isinstance(c.value, str) and c.value.startswith("=")
        }
    return cached


def _write_rows(
    sheet: Worksheet, start_cell: str, rows: list[list[CellInput]]
) -> tuple[str, int, int]:
    """Write `rows` from `start_cell`; returns (range written, cells, formulas)."""
    try:
        col_letter, row0 = coordinate_from_string(start_cell.replace("$", "").upper())
    except ValueError as exc:
        raise ToolFailure(FailureKind.invalid_argument, f"bad start cell {start_cell!r}") from exc
    col0 = openpyxl.utils.column_index_from_string(col_letter)
    if not rows or not any(rows):
        raise ToolFailure(FailureKind.invalid_argument, "rows is empty: nothing to write")
    n_cells = n_formulas = 0
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if value is None:
                continue
            sheet.cell(row=row0 + i, column=col0 + j, value=value)
            n_cells += 1
            n_formulas += isinstance(value, str) and value.startswith("=")
    last_col = get_column_letter(col0 + max(len(r) for r in rows) - 1)
    span = f"{sheet.title}!{col_letter}{row0}:{last_col}{row0 + len(rows) - 1}"
    return span, n_cells, n_formulas


def _formula_note(n_formulas: int) -> str:
    if not n_formulas:
        return ""
    return (
        f" ({n_formulas} formula{'s' if n_formulas != 1 else ''}: no cached value until a "
        "spreadsheet app recalculates; write values where a result must be readable)"
    )


@TOOLS.tool(read_only=False)
def sheet_write(
    ws: Workspace,
    path: PathArg,
    sheet: Annotated[str, Field(description="Name of an existing sheet.")],
    start_cell: Annotated[str, Field(description="Top-left cell of the block, e.g. 'B2'.")],
    rows: RowsArg,
) -> str:
    """Write a block of values and formulas into an existing workbook, replacing what those
    cells held. The cached values of all other formulas in the workbook are kept."""
    file = ws.file(path, SUFFIXES)
    wb = _load(file, values=False)
    target_sheet = _sheet(wb, sheet)
    cached = _cached_formula_values(file, wb)
    span, n_cells, n_formulas = _write_rows(target_sheet, start_cell, rows)
    written = {c.coordinate for row in target_sheet[span.split("!")[1]] for c in row}
    cached[target_sheet.title] = {
        k: v for k, v in cached[target_sheet.title].items() if k not in written
    }
    _save(ws, wb, file, cached)
    return f"wrote {n_cells} cells to {span} in {ws.rel(file)}{_formula_note(n_formulas)}"


@TOOLS.tool(read_only=False)
def sheet_add_sheet(
    ws: Workspace,
    path: PathArg,
    name: Annotated[str, Field(description="Name of the new sheet (at most 31 characters).")],
    position: Annotated[
        int | None, Field(ge=0, description="0-based position; omit to add it last.")
    ] = None,
    rows: Annotated[
        list[list[CellInput]] | None, Field(description="Optional rows to write from A1.")
    ] = None,
) -> str:
    """Add a sheet to an existing workbook, optionally filled with rows from A1."""
    file = ws.file(path, SUFFIXES)
    wb = _load(file, values=False)
    if name in wb.sheetnames:
        raise ToolFailure(
            FailureKind.already_exists, f"{ws.rel(file)} already has a sheet {name!r}"
        )
    if len(name) > 31 or any(ch in name for ch in "[]:*?/\\"):
        raise ToolFailure(FailureKind.invalid_argument, f"{name!r} is not a valid sheet name")
    cached = _cached_formula_values(file, wb)
    new = wb.create_sheet(name, position)
    wrote = ""
    if rows:
        span, n_cells, n_formulas = _write_rows(new, "A1", rows)
        wrote = f"; wrote {n_cells} cells to {span}{_formula_note(n_formulas)}"
    _save(ws, wb, file, cached)
    return f"added sheet {name!r} to {ws.rel(file)} (sheets now: {', '.join(wb.sheetnames)}){wrote}"


@TOOLS.tool(read_only=False)
def sheet_create(
    ws: Workspace,
    path: PathArg,
    sheets: Annotated[
        list[str] | None, Field(description="Names of the sheets, in order (default: Sheet1).")
    ] = None,
    rows: Annotated[
        list[list[CellInput]] | None,
        Field(description="Optional rows to write into the first sheet from A1."),
    ] = None,
    overwrite: Overwrite = False,
) -> str:
    """Create a new .xlsx workbook with the given sheets, optionally filling the first one."""
    target = ws.target(path, SUFFIXES, overwrite=overwrite)
    sheets = sheets or ["Sheet1"]
    if len(set(sheets)) != len(sheets):
        raise ToolFailure(FailureKind.invalid_argument, "sheet names must be unique")
    wb = openpyxl.Workbook()
    first = wb.active
    assert isinstance(first, Worksheet)
    first.title = sheets[0]
    for name in sheets[1:]:
        wb.create_sheet(name)
    wrote = ""
    if rows:
        span, n_cells, n_formulas = _write_rows(first, "A1", rows)
        wrote = f"; wrote {n_cells} cells to {span}{_formula_note(n_formulas)}"
    _save(ws, wb, target)
    return f"created {ws.rel(target)} with sheets {', '.join(sheets)}{wrote}"


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["spreadsheet"])
