"""xlsx workbooks with formulas whose cached values are present, and named ranges.

openpyxl writes a formula without its cached value, so a reader that opens the workbook with
`data_only=True` (as most tools and agents do) would see None. Every formula here is written with
the value the generator computed, injected into the sheet XML after saving, exactly as Excel
stores it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.workbook.defined_name import DefinedName

from .ziputil import normalize_ooxml

Scalar = str | int | float | None


@dataclass(frozen=True)
class Formula:
    """A formula (`=SUM(B2:B9)`) together with the value it evaluates to."""

    expr: str
    value: float | str


Cell = Scalar | Formula


@dataclass
class SheetSpec:
    name: str
    rows: list[list[Cell]] = field(default_factory=list)
    number_formats: dict[int, str] = field(default_factory=dict)  # 1-based column -> format
    bold_rows: set[int] = field(default_factory=lambda: {1})  # 1-based
    col_widths: dict[int, float] = field(default_factory=dict)

    def append(self, row: Sequence[Cell]) -> int:
        """Append a row and return its 1-based row number."""
        self.rows.append(list(row))
        return len(self.rows)


@dataclass
class WorkbookSpec:
    sheets: list[SheetSpec] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # defined name -> "Sheet!$B$3"
    title: str = ""

    def sheet(self, name: str) -> SheetSpec:
        spec = SheetSpec(name)
        self.sheets.append(spec)
        return spec


def write_workbook(path: Path, spec: WorkbookSpec) -> None:
    wb = Workbook()
    assert wb.active is not None
    wb.remove(wb.active)
    cached: dict[str, dict[str, float | str]] = {}
    for index, sheet in enumerate(spec.sheets, start=1):
        ws = wb.create_sheet(sheet.name)
        values: dict[str, float | str] = {}
        for r, row in enumerate(sheet.rows, start=1):
            for c, cell in enumerate(row, start=1):
                if cell is None:
                    continue
                target = ws.cell(row=r, column=c)
                if isinstance(cell, Formula):
                    target.value = cell.expr
                    values[f"{get_column_letter(c)}{r}"] = cell.value
                else:
                    target.value = cell
                if r in sheet.bold_rows:
                    target.font = Font(bold=True)
                fmt = sheet.number_formats.get(c)
                if fmt and r not in sheet.bold_rows:
                    target.number_format = fmt
        for c, width in sheet.col_widths.items():
            ws.column_dimensions[get_column_letter(c)].width = width
        cached[f"xl/worksheets/sheet{index}.xml"] = values
    for name, ref in spec.names.items():
        wb.defined_names[name] = DefinedName(name, attr_text=ref)
    if spec.title:
        wb.properties.title = spec.title
    wb.properties.creator = "bureau world generator"
    wb.save(path)

    def inject(name: str, data: bytes) -> bytes:
        values = cached.get(name)
        return _inject_cached_values(data, values) if values else data

    normalize_ooxml(path, inject)


_FORMULA_CELL = re.compile(rb'<c r="([A-Z]+[0-9]+)"([^>]*)><f>(.*?)</f><v\s*/?>(?:</v>)?</c>')


def _inject_cached_values(xml: bytes, values: dict[str, float | str]) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        ref = m.group(1).decode()
        attrs = m.group(2)
        if ref not in values:
            return m.group(0)
        value = values[ref]
        if isinstance(value, str):
            attrs = re.sub(rb'\s*t="[^"]*"', b"", attrs) + b' t="str"'
            text = escape(value)
        else:
            text = repr(float(value)) if not float(value).is_integer() else str(int(value))
        return b'<c r="%s"%s><f>%s</f><v>%s</v></c>' % (
            m.group(1),
            attrs,
            m.group(3),
            text.encode(),
        )

    return _FORMULA_CELL.sub(repl, xml)
