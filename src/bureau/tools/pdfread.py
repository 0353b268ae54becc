"""Layout-aware PDF reading: text in reading order, ruled tables as rows.

The order in which a PDF stores its text need not be the order people read it in. Reading by
position instead of by stream order fixes the two common cases:

- **Columns.** A line whose words leave a gutter (a gap of `GUTTER_PT` or more) across the middle
  of the page opens a two-column block; lines that continue only one side stay in it; a
  full-width line, a wide vertical gap or a table closes it. A block is emitted left column
  first, then right column.
- **Tables.** Ruled tables are found from their lines (pdfplumber) and read row by row, also
  when their cells are drawn column by column; on a page they appear where they stand, as rows
  of cells joined by ' | '. A table continued on the next page with the same header is merged.

Rotated text (how watermarks such as DRAFT are drawn) is not mixed into the lines; it is
reported once per page, because it often says something the model should know.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pdfplumber

GUTTER_PT = 12.0
SAME_LINE_PT = 3.0
BLOCK_BREAK_LINES = 2.5

Word = dict[str, Any]
Rows = list[list[str]]


@dataclass(frozen=True)
class PageText:
    number: int  # 1-based
    text: str
    rotated_text: str


@dataclass(frozen=True)
class PdfTable:
    page: int  # 1-based page where the table starts
    rows: Rows


def _is_upright(obj: dict[str, Any]) -> bool:
    if obj.get("object_type") != "char":
        return True
    _, b, c, _, _, _ = obj["matrix"]
    return abs(b) < 1e-3 and abs(c) < 1e-3


def _rotated_text(page: Any) -> str:
    chars = [c for c in page.chars if not _is_upright(c)]
    return "".join(c["text"] for c in chars).strip()


def _clean_rows(raw: Iterable[Sequence[str | None]]) -> Rows:
    return [[" ".join((cell or "").split()) for cell in row] for row in raw if any(c for c in row)]


def _lines(words: list[Word]) -> list[list[Word]]:
    """Words grouped into lines by their top, each line sorted left to right."""
    lines: list[list[Word]] = []
    for word in sorted(words, key=lambda w: (round(w["top"]), w["x0"])):
        if lines and abs(lines[-1][0]["top"] - word["top"]) < SAME_LINE_PT:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: w["x0"]) for line in lines]


def _join(words: list[Word]) -> str:
    return " ".join(w["text"] for w in words)


class _ColumnLayout:
    """Turns lines (top to bottom) into reading-order text, one page at a time."""

    def __init__(self, mid: float, block_break: float) -> None:
        self.mid = mid
        self.block_break = block_break
        self.out: list[str] = []
        self.left: list[str] = []
        self.right: list[str] = []
        self.prev_top: float | None = None

    def flush(self) -> None:
        self.out.extend(self.left + self.right)
        self.left, self.right = [], []

    def line(self, words: list[Word]) -> None:
        top = words[0]["top"]
        if self.prev_top is not None and top - self.prev_top > self.block_break:
            self.flush()
        self.prev_top = top
        left = [w for w in words if w["x1"] <= self.mid]
        right = [w for w in words if w["x0"] >= self.mid]
        crosses_middle = len(left) + len(right) < len(words)
        gutter = bool(left and right) and (
            min(w["x0"] for w in right) - max(w["x1"] for w in left) >= GUTTER_PT
        )
        in_block = bool(self.left or self.right)
        one_side = not (left and right)
        if not crosses_middle and (gutter or (in_block and one_side)):
            if left:
                self.left.append(_join(left))
            if right:
                self.right.append(_join(right))
            return
        self.flush()
        self.out.append(_join(words))

    def table(self, rows: Rows) -> None:
        self.flush()
        self.prev_top = None
        self.out.extend(" | ".join(row) for row in rows)
        self.out.append("")


def _page_text(page: Any) -> PageText:
    upright = page.filter(_is_upright)
    tables = upright.find_tables()
    boxes = [t.bbox for t in tables]

    def outside_tables(obj: dict[str, Any]) -> bool:
        # By the centre: a line just above a table may touch its box by a fraction of a point.
        if obj.get("object_type") != "char":
            return True
        x = (obj["x0"] + obj["x1"]) / 2
        y = (obj["top"] + obj["bottom"]) / 2
        return not any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)

    body = upright.filter(outside_tables) if boxes else upright
    lines = _lines(body.extract_words(x_tolerance=1.5))
    tops = [line[0]["top"] for line in lines]
    gaps = [b - a for a, b in itertools.pairwise(tops) if b - a > SAME_LINE_PT]
    # The tightest spacing is the body text's leading; headings and blocks only add to it.
    leading = min(max(min(gaps), 8.0), 24.0) if gaps else 12.0
    layout = _ColumnLayout(page.width / 2, leading * BLOCK_BREAK_LINES)
    items: list[tuple[float, int, Any]] = [(line[0]["top"], 1, line) for line in lines]
    items += [(t.bbox[1], 0, _clean_rows(t.extract())) for t in tables]
    for _, is_line, payload in sorted(items, key=lambda item: (item[0], item[1])):
        if is_line:
            layout.line(payload)
        else:
            layout.table(payload)
    layout.flush()
    return PageText(page.page_number, "\n".join(layout.out).strip(), _rotated_text(page))


@dataclass
class _Parsed:
    """What has been read of one version of a file: pages are parsed once, on first use."""

    total: int
    text: dict[int, PageText] = field(default_factory=dict)
    tables: dict[int, list[Rows]] = field(default_factory=dict)


_CACHE: OrderedDict[tuple[str, int, int], _Parsed] = OrderedDict()
_CACHE_FILES = 64
_LOCK = threading.Lock()


def _page_tables(page: Any) -> list[Rows]:
    return [rows for raw in page.filter(_is_upright).extract_tables() if (rows := _clean_rows(raw))]


def _store(entry: _Parsed, kind: str) -> dict[int, Any]:
    return entry.text if kind == "text" else entry.tables


def _read(
    path: Path,
    pages: Sequence[int] | None,
    kind: str,
    check: Callable[[], None],
) -> tuple[int, list[Any]]:
    """(page count, the `kind` ("text" or "tables") of `pages`), parsing only pages not yet
    cached for this version (size, mtime) of the file. Agents re-read the same pages often."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None:
            _CACHE.move_to_end(key)
    if entry is not None:
        store = _store(entry, kind)
        wanted = range(1, entry.total + 1) if pages is None else pages
        if all(n in store for n in wanted):
            return entry.total, [store[n] for n in wanted]
    with pdfplumber.open(path) as pdf:
        if entry is None:
            entry = _Parsed(len(pdf.pages))
        store = _store(entry, kind)
        wanted = range(1, entry.total + 1) if pages is None else pages
        for number in wanted:
            if number in store:
                continue
            check()
            page = pdf.pages[number - 1]
            store[number] = _page_text(page) if kind == "text" else _page_tables(page)
            page.close()
    with _LOCK:
        _CACHE[key] = entry
        while len(_CACHE) > _CACHE_FILES:
            _CACHE.popitem(last=False)
    return entry.total, [store[n] for n in wanted]


def page_count(path: Path) -> int:
    return _read(path, [], "text", lambda: None)[0]


def read_pages(
    path: Path, pages: Sequence[int] | None = None, *, check: Callable[[], None] = lambda: None
) -> tuple[int, list[PageText]]:
    """(page count, reading-order text of `pages` (1-based; all when None)). `check` runs
    before each page is parsed, so a caller can stop a long read."""
    return _read(path, pages, "text", check)


def read_tables(
    path: Path, pages: Sequence[int] | None = None, *, check: Callable[[], None] = lambda: None
) -> list[PdfTable]:
    """Ruled tables of `pages`, a table continued under the same header merged into one."""
    wanted = list(pages) if pages is not None else None
    total, per_page = _read(path, wanted, "tables", check)
    numbers = wanted if wanted is not None else list(range(1, total + 1))
    tables: list[PdfTable] = []
    for number, page_tables in zip(numbers, per_page, strict=True):
        for rows in page_tables:
            previous = tables[-1] if tables else None
            if previous and previous.page < number and previous.rows[0] == rows[0]:
                previous.rows.extend(rows[1:])
            else:
                tables.append(PdfTable(number, [list(r) for r in rows]))
    return tables
