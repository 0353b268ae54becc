"""Reading and writing helpers for oracle solutions.

This file is copied next to each task's `solution/solve.py`. It uses only the libraries an agent
has in its sandbox (pdfplumber, openpyxl, python-docx, python-pptx) and the standard library, and
it never sees the rubric: an oracle finds its answers in the workspace files, like an agent
would. PDFs are read layout-aware: two-column pages in column order, ruled tables by their rules.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime
from email import policy
from email.parser import BytesParser
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pdfplumber
from pptx import Presentation

NUMBER = re.compile(r"\(?-?\$?\d[\d,]*(?:\.\d+)?\)?")


# -- numbers and text ------------------------------------------------------------------------
def parse_number(text: str) -> float:
    """The first number in `text`: 'USD 2,450,000' -> 2450000.0, '(1,200)' -> -1200.0."""
    m = NUMBER.search(text.replace("\u2212", "-"))
    if m is None:
        raise ValueError(f"no number in {text!r}")
    raw = m.group(0)
    negative = raw.startswith("(") and raw.endswith(")")
    value = float(raw.strip("()$").replace("$", "").replace(",", ""))
    return -value if negative else value


def flat(text: str) -> str:
    """Whitespace collapsed, so phrases wrapped across lines can be searched."""
    return " ".join(text.split())


def number_after(text: str, label: str) -> float:
    """The first number after the first occurrence of `label` (case-insensitive)."""
    text, label = flat(text), flat(label)
    i = text.lower().find(label.lower())
    if i < 0:
        raise ValueError(f"label {label!r} not found")
    return parse_number(text[i + len(label) :])


def section(text: str, heading: str, stop: Iterable[str] = ()) -> str:
    """The text from `heading` up to the next numbered clause heading or a stop word."""
    i = text.lower().find(heading.lower())
    if i < 0:
        raise ValueError(f"heading {heading!r} not found")
    rest = text[i + len(heading) :]
    m = re.search(r"\n\d+(?:\.\d+)*\.? [A-Z]", rest)
    end = m.start() if m else len(rest)
    for word in stop:
        j = rest.find(word)
        if 0 <= j < end:
            end = j
    return rest[:end]


def iso(d: date | datetime) -> str:
    return d.strftime("%Y-%m-%d")


def parse_date(text: str) -> date:
    """ISO, 'March 5, 2027' and '5 March 2027' forms."""
    text = text.strip().rstrip(".")
    for fmt in ("%Y-%m-%d", "%B %d, %Y", "%d %B %Y", "%b %d, %Y"):
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise ValueError(f"not a date: {text!r}")


DATE_IN_TEXT = re.compile(
    r"\d{4}-\d{2}-\d{2}|(?:January|February|March|April|May|June|July|August|September|October"
    r"|November|December) \d{1,2}, \d{4}"
)


def dates_in(text: str) -> list[date]:
    return [parse_date(m.group(0)) for m in DATE_IN_TEXT.finditer(text)]


# -- PDFs ------------------------------------------------------------------------------------
def _upright(page: Any) -> Any:
    """The page without rotated text, which is how watermarks are drawn."""

    def keep(obj: dict[str, Any]) -> bool:
        if obj["object_type"] != "char":
            return True
        _, b, c, _, _, _ = obj["matrix"]
        return abs(b) < 1e-3 and abs(c) < 1e-3

    return page.filter(keep)


def _page_lines(page: Any) -> list[list[dict[str, Any]]]:
    """Words grouped into lines, leaving out watermarks and ruled tables."""
    page = _upright(page)
    for table in page.find_tables():
        page = page.outside_bbox(table.bbox)
    words = page.extract_words(x_tolerance=1.5)
    lines: list[list[dict[str, Any]]] = []
    for word in sorted(words, key=lambda w: (round(w["top"]), w["x0"])):
        if lines and abs(lines[-1][0]["top"] - word["top"]) < 3:
            lines[-1].append(word)
        else:
            lines.append([word])
    return lines


def pdf_text(path: Path) -> str:
    """Reading-order text: full-width lines as they come, two-column blocks column by column.

    Tables are left out (read them with `pdf_tables`). A line is part of a two-column block when
    a gutter (a gap of 12pt or more) separates its words at the page's middle, or when it
    continues a block on one side only. A vertical gap of more than two and a half lines ends a
    block.
    """
    out: list[str] = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            mid = page.width / 2
            left_col: list[str] = []
            right_col: list[str] = []
            prev_top: float | None = None
            for line in _page_lines(page):
                top = line[0]["top"]
                if prev_top is not None and top - prev_top > 31:
                    out.extend(left_col + right_col)
                    left_col, right_col = [], []
                prev_top = top
                left = [w for w in line if w["x1"] <= mid]
                right = [w for w in line if w["x0"] >= mid]
                crossing = len(left) + len(right) < len(line)
                gutter = (
                    bool(left and right)
                    and min(w["x0"] for w in right) - max(w["x1"] for w in left) >= 12
                )
                in_block = bool(left_col or right_col)
                if not crossing and (gutter or (in_block and not (left and right))):
                    if left:
                        left_col.append(" ".join(w["text"] for w in left))
                    if right:
                        right_col.append(" ".join(w["text"] for w in right))
                else:
                    out.extend(left_col + right_col)
                    left_col, right_col = [], []
                    out.append(" ".join(w["text"] for w in line))
            out.extend(left_col + right_col)
    return "\n".join(out)


def pdf_tables(path: Path) -> list[list[list[str]]]:
    """Ruled tables, with a table continued on the next page (same header) merged."""
    tables: list[list[list[str]]] = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            for raw in _upright(page).extract_tables():
                rows = [[(c or "").strip() for c in row] for row in raw if any(row)]
                if not rows:
                    continue
                if tables and tables[-1][0] == rows[0]:
                    tables[-1].extend(rows[1:])
                else:
                    tables.append(rows)
    return tables


def pdf_table_with(path: Path, header_cell: str) -> list[dict[str, str]]:
    """The first table whose header has a cell containing `header_cell`, as records."""
    for table in pdf_tables(path):
        if any(header_cell.lower() in h.lower() for h in table[0]):
            return [dict(zip(table[0], row, strict=False)) for row in table[1:]]
    raise ValueError(f"no table with a {header_cell!r} column in {path.name}")


# -- spreadsheets ----------------------------------------------------------------------------
def xlsx_records(path: Path, sheet: str, header_row: int = 1) -> list[dict[str, Any]]:
    wb = openpyxl.load_workbook(path, data_only=True, read_only=True)
    try:
        rows = list(wb[sheet].iter_rows(min_row=header_row, values_only=True))
    finally:
        wb.close()
    header = [str(h) if h is not None else "" for h in rows[0]]
    return [dict(zip(header, row, strict=False)) for row in rows[1:] if any(row)]


def xlsx_label_value(path: Path, sheet: str, label: str, column: int = 2) -> Any:
    """The value beside a row label (column A), e.g. a line item in a financial statement."""
    wb = openpyxl.load_workbook(path, data_only=True, read_only=True)
    try:
        for row in wb[sheet].iter_rows(values_only=True):
            if row and str(row[0]).strip().lower() == label.lower():
                return row[column - 1]
    finally:
        wb.close()
    raise ValueError(f"no row {label!r} in {path.name}!{sheet}")


def xlsx_named(path: Path, name: str) -> Any:
    """The cached value of a defined name that points at one cell."""
    wb = openpyxl.load_workbook(path, data_only=True)
    sheet, ref = next(iter(wb.defined_names[name].destinations))
    return wb[sheet][ref.replace("$", "")].value


# -- documents and decks ---------------------------------------------------------------------
def docx_paragraphs(path: Path) -> list[tuple[str, str]]:
    """(style name, text) for every non-empty paragraph."""
    d = docx.Document(str(path))
    return [(p.style.name if p.style else "", p.text) for p in d.paragraphs if p.text.strip()]


def docx_tables(path: Path) -> list[list[list[str]]]:
    d = docx.Document(str(path))
    return [[[c.text.strip() for c in row.cells] for row in t.rows] for t in d.tables]


def pptx_slides(path: Path) -> list[dict[str, Any]]:
    """Each slide's title, text lines, tables (rows) and charts (categories and series)."""
    slides = []
    for slide in Presentation(str(path)).slides:
        info: dict[str, Any] = {"title": "", "texts": [], "tables": [], "charts": []}
        if slide.shapes.title is not None:
            info["title"] = slide.shapes.title.text_frame.text
        for shape in slide.shapes:
            if shape.has_text_frame and shape != slide.shapes.title:
                info["texts"].extend(p.text for p in shape.text_frame.paragraphs if p.text)
            if shape.has_table:
                info["tables"].append([[c.text for c in row.cells] for row in shape.table.rows])
            if shape.has_chart:
                plot = shape.chart.plots[0]
                info["charts"].append(
                    {
                        "categories": [str(c) for c in plot.categories],
                        "series": {s.name: list(s.values) for s in plot.series},
                    }
                )
        slides.append(info)
    return slides


# -- mail and chat ---------------------------------------------------------------------------
def read_mailbox(folder: Path) -> list[dict[str, Any]]:
    """Every .eml below `folder`, oldest first."""
    mails = []
    for path in sorted(folder.rglob("*.eml")):
        with path.open("rb") as fh:
            msg = BytesParser(policy=policy.default).parse(fh)
        body = msg.get_body(preferencelist=("plain",))
        mails.append(
            {
                "path": path,
                "from": str(msg["From"]),
                "to": str(msg["To"]),
                "subject": str(msg["Subject"]),
                "date": parsedate_to_datetime(str(msg["Date"])),
                "body": body.get_content() if body is not None else "",
                "attachments": [a.get_filename() for a in msg.iter_attachments()],
            }
        )
    return sorted(mails, key=lambda m: m["date"])


def read_chat(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(data["messages"])


def ics_events(path: Path) -> list[dict[str, Any]]:
    """The VEVENTs of an .ics file (RFC 5545 lines unfolded): each property's value by name,
    parameters dropped, text escapes undone; `start` is DTSTART's day."""
    lines: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw[:1] in (" ", "\t") and lines:
            lines[-1] += raw[1:]
        else:
            lines.append(raw)
    events: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in lines:
        if line == "BEGIN:VEVENT":
            current = {}
        elif line == "END:VEVENT" and current is not None:
            value = current["DTSTART"]
            current["start"] = date(int(value[:4]), int(value[4:6]), int(value[6:8]))
            events.append(current)
            current = None
        elif current is not None and ":" in line:
            name, value = line.split(":", 1)
            text = value.replace("\\,", ",").replace("\\;", ";").replace("\\n", "\n")
            current.setdefault(name.split(";", 1)[0], text.replace("\\\\", "\\"))
    return events


# -- answers and deliverables ----------------------------------------------------------------
def write_answer(workspace: Path, answer: dict[str, Any]) -> None:
    out = workspace / "output" / "answer.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(answer, indent=2, default=str) + "\n", encoding="utf-8")


def write_table_xlsx(path: Path, sheet: str, header: list[str], rows: list[list[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = sheet
    ws.append(header)
    for row in rows:
        ws.append(row)
    wb.save(path)


def write_memo_docx(path: Path, heading: str, paragraphs: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    d = docx.Document()
    d.add_heading(heading, level=1)
    for text in paragraphs:
        d.add_paragraph(text)
    d.save(str(path))


def write_table_pptx(path: Path, title: str, header: list[str], rows: list[list[Any]]) -> None:
    from pptx.util import Inches

    path.parent.mkdir(parents=True, exist_ok=True)
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = title
    shape = slide.shapes.add_table(
        len(rows) + 1, len(header), Inches(0.5), Inches(1.5), Inches(9), Inches(0.4)
    )
    for j, h in enumerate(header):
        shape.table.cell(0, j).text = str(h)
    for i, row in enumerate(rows, start=1):
        for j, value in enumerate(row):
            shape.table.cell(i, j).text = str(value)
    prs.save(str(path))


# -- command line ----------------------------------------------------------------------------
Solver = Callable[[Path, dict[str, Any]], None]


def solve_items(solvers: Mapping[str, Solver], workspace: Path, params: dict[str, Any]) -> None:
    """A brief (`bureau.worlds.briefs`): each item's solver in turn, its answer's keys under
    the item's prefix, then one answer with them all."""
    answer: dict[str, Any] = {}
    out = workspace / "output" / "answer.json"
    for item in params["items"]:
        solvers[item["template"]](workspace, item)
        answer.update({item["prefix"] + k: v for k, v in json.loads(out.read_text()).items()})
        out.unlink()
    write_answer(workspace, answer)


def run_solver(solvers: Mapping[str, Solver], description: str | None) -> None:
    """The command line of every oracle: `solve.py --params P --workspace W`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    args = parser.parse_args()
    params = json.loads(args.params.read_text())
    solvers[params["template"]](args.workspace, params)
