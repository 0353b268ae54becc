"""Reading office files and mail into plain structures, and into lines for content search.

The tool groups format these structures for the model; `document_lines` flattens any supported
file into `(location, text)` lines ("page 3", "slide 2", "Budget!row 7", "line 12") so that one
content search covers PDFs, Word, PowerPoint, Excel, mail and text files alike. Flattened files
are cached by path, size and modification time, because an agent searches the same workspace
many times.
"""

from __future__ import annotations

import functools
import html
import re
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from bureau.tools.core import MAX_READ_BYTES

# The document libraries are imported by the readers that use them: the filesystem group uses
# this module too, and a server holding only that group (and code) starts without them. That is
# safe because the tool server runs with a safe import path (`python3 -P`): nothing in the
# agent's workspace can stand in for a module imported late.

Rows = list[list[str]]
TEXT_SUFFIXES = {
    ".txt",
    ".md",
    ".csv",
    ".tsv",
    ".json",
    ".jsonl",
    ".xml",
    ".html",
    ".htm",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".log",
    ".py",
    ".sh",
    ".sql",
    ".js",
    ".css",
}
DOCUMENT_SUFFIXES = {".pdf", ".docx", ".pptx", ".xlsx", ".xlsm", ".eml"}


# -- Word ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DocxItem:
    """A top-level paragraph (with its index among the document's paragraphs) or a table."""

    kind: str  # "paragraph" | "table"
    index: int  # paragraph index, or table index
    style: str = ""
    text: str = ""
    rows: Rows = field(default_factory=list)


def docx_items(path: Path) -> list[DocxItem]:
    import docx
    from docx.table import Table as DocxTable
    from docx.text.paragraph import Paragraph as DocxParagraph

    document = docx.Document(str(path))
    items: list[DocxItem] = []
    n_par = n_tab = 0
    for element in document.element.body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "p":
            par = DocxParagraph(element, document)
            style = par.style.name if par.style is not None else ""
            items.append(DocxItem("paragraph", n_par, style or "", par.text))
            n_par += 1
        elif tag == "tbl":
            table = DocxTable(element, document)
            rows = [[cell.text.strip() for cell in row.cells] for row in table.rows]
            items.append(DocxItem("table", n_tab, rows=rows))
            n_tab += 1
    return items


def heading_level(style: str) -> int | None:
    """1.. for 'Heading N', 0 for 'Title', None for body styles."""
    if style == "Title":
        return 0
    match = re.fullmatch(r"Heading (\d)", style)
    return int(match.group(1)) if match else None


# -- PowerPoint ------------------------------------------------------------------------------
@dataclass
class ChartInfo:
    kind: str
    title: str
    categories: list[str]
    series: dict[str, list[float | None]]


@dataclass
class SlideInfo:
    number: int  # 1-based
    layout: str
    title: str = ""
    texts: list[str] = field(default_factory=list)
    tables: list[Rows] = field(default_factory=list)
    charts: list[ChartInfo] = field(default_factory=list)
    notes: str = ""


def _walk_shapes(shapes: Any) -> Iterator[Any]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _walk_shapes(shape.shapes)
        else:
            yield shape


def slide_info(slide: Any, number: int) -> SlideInfo:
    info = SlideInfo(number, slide.slide_layout.name)
    title_shape = slide.shapes.title
    if title_shape is not None:
        info.title = title_shape.text_frame.text.strip()
    for shape in _walk_shapes(slide.shapes):
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        if shape.has_text_frame:
            info.texts.extend(p.text for p in shape.text_frame.paragraphs if p.text.strip())
        if getattr(shape, "has_table", False) and shape.has_table:
            rows = [[cell.text.strip() for cell in row.cells] for row in shape.table.rows]
            info.tables.append(rows)
        if getattr(shape, "has_chart", False) and shape.has_chart:
            chart = shape.chart
            plot = chart.plots[0] if len(chart.plots) else None
            info.charts.append(
                ChartInfo(
                    kind=str(chart.chart_type).split(".")[-1].split(" ")[0],
                    title=chart.chart_title.text_frame.text if chart.has_title else "",
                    categories=[str(c) for c in plot.categories] if plot is not None else [],
                    series={s.name: list(s.values) for s in plot.series} if plot else {},
                )
            )
    if slide.has_notes_slide:
        info.notes = slide.notes_slide.notes_text_frame.text.strip()
    return info


def deck_slides(path: Path) -> list[SlideInfo]:
    from pptx import Presentation

    deck = Presentation(str(path))
    return [slide_info(slide, i) for i, slide in enumerate(deck.slides, start=1)]


# -- mail ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    size: int


@dataclass(frozen=True)
class MailMessage:
    path: Path
    sender: str
    to: str
    cc: str
    subject: str
    date: datetime | None
    message_id: str
    in_reply_to: str
    body: str
    attachments: list[Attachment]


def parse_eml_bytes(path: Path) -> EmailMessage:
    with path.open("rb") as fh:
        msg = BytesParser(policy=policy.default).parse(fh)
    assert isinstance(msg, EmailMessage)
    return msg


def _html_to_text(markup: str) -> str:
    markup = re.sub(r"(?is)<(script|style).*?</\1>", "", markup)
    markup = re.sub(r"(?i)<br\s*/?>|</p>|</div>|</tr>|</li>", "\n", markup)
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).strip()


def read_mail(path: Path) -> MailMessage:
    """The message at `path`, parsed once per version of the file."""
    st = path.stat()
    return _read_mail(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=2048)
def _read_mail(path_str: str, size: int, mtime_ns: int) -> MailMessage:
    path = Path(path_str)
    msg = parse_eml_bytes(path)
    body_part = msg.get_body(preferencelist=("plain", "html"))
    body = ""
    if body_part is not None:
        content = body_part.get_content()
        body = _html_to_text(content) if body_part.get_content_subtype() == "html" else content
    attachments = [
        Attachment(
            a.get_filename() or "attachment",
            a.get_content_type(),
            len(a.get_payload(decode=True) or b""),
        )
        for a in msg.iter_attachments()
    ]
    try:
        date = parsedate_to_datetime(str(msg["Date"])) if msg["Date"] else None
    except (TypeError, ValueError):
        date = None
    return MailMessage(
        path=path,
        sender=str(msg["From"] or ""),
        to=str(msg["To"] or ""),
        cc=str(msg["Cc"] or ""),
        subject=str(msg["Subject"] or ""),
        date=date,
        message_id=str(msg["Message-ID"] or ""),
        in_reply_to=str(msg["In-Reply-To"] or ""),
        body=body.strip(),
        attachments=attachments,
    )


# -- flattened lines for search --------------------------------------------------------------
Line = tuple[str, str]


def _pdf_lines(path: Path, check: Callable[[], None]) -> list[Line]:
    from bureau.tools import pdfread

    _, pages = pdfread.read_pages(path, check=check)
    return [(f"page {p.number}", line) for p in pages for line in p.text.splitlines()]


def _docx_lines(path: Path, check: Callable[[], None]) -> list[Line]:
    out: list[Line] = []
    for item in docx_items(path):
        if item.kind == "paragraph":
            out.append((f"paragraph {item.index}", item.text))
        else:
            out += [(f"table {item.index + 1}", " | ".join(row)) for row in item.rows]
    return out


def _pptx_lines(path: Path, check: Callable[[], None]) -> list[Line]:
    out: list[Line] = []
    for s in deck_slides(path):
        where = f"slide {s.number}"
        out += [(where, t) for t in [s.title, *s.texts, s.notes] if t]
        out += [(where, " | ".join(row)) for table in s.tables for row in table]
        for chart in s.charts:
            out.append((where, f"chart {chart.title}: {', '.join(chart.categories)}"))
            out += [(where, f"{name}: {values}") for name, values in chart.series.items()]
    return out


def _xlsx_lines(path: Path, check: Callable[[], None]) -> list[Line]:
    import openpyxl

    out: list[Line] = []
    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        for ws in wb.worksheets:
            check()
            for r, row in enumerate(ws.iter_rows(values_only=True), start=1):
                cells = [str(v) for v in row if v is not None]
                if cells:
                    out.append((f"{ws.title}!row {r}", " | ".join(cells)))
    finally:
        wb.close()
    return out


def _eml_lines(path: Path, check: Callable[[], None]) -> list[Line]:
    m = read_mail(path)
    head = [("header", f"From: {m.sender}"), ("header", f"To: {m.to}")]
    head += [("header", f"Subject: {m.subject}")]
    head += [("attachment", a.filename) for a in m.attachments]
    return head + [("body", line) for line in m.body.splitlines()]


def _text_lines(path: Path, check: Callable[[], None]) -> list[Line]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [(f"line {i}", line) for i, line in enumerate(text.splitlines(), start=1)]


_FLATTENERS: dict[str, Callable[[Path, Callable[[], None]], list[Line]]] = {
    ".pdf": _pdf_lines,
    ".docx": _docx_lines,
    ".pptx": _pptx_lines,
    ".xlsx": _xlsx_lines,
    ".xlsm": _xlsx_lines,
    ".eml": _eml_lines,
}
_CACHE: OrderedDict[tuple[str, int, int], list[Line]] = OrderedDict()
_CACHE_SIZE = 512


def is_text_file(path: Path) -> bool:
    """A known text suffix, or no NUL byte in the first 4 KiB."""
    if path.suffix.lower() in TEXT_SUFFIXES:
        return True
    if path.suffix.lower() in DOCUMENT_SUFFIXES or not path.is_file():
        return False
    with path.open("rb") as fh:
        return b"\x00" not in fh.read(4096)


def document_lines(
    path: Path, *, documents: bool = True, check: Callable[[], None] = lambda: None
) -> list[Line] | None:
    """The lines of `path` to search, or None for a binary file we cannot read, a file that is
    not a regular one (a FIFO would block, a device never end) or one too large to read."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_READ_BYTES:
        return None
    suffix = path.suffix.lower()
    reader = _FLATTENERS.get(suffix)
    if reader is None:
        reader = _text_lines if is_text_file(path) else None
    elif not documents:
        reader = None
    if reader is None:
        return None
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    lines = reader(path, check)
    _CACHE[key] = lines
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return lines
