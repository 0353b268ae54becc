"""PDF pages drawn with reportlab's canvas, with control over the order text is drawn in.

Real-world PDFs often store text in an order that differs from reading order. Two layouts here
reproduce that on purpose:

- `two_columns`: text flows down the left column, then the right one, but each line pair is drawn
  left-right-left-right. A reader that follows the content stream (`pypdf.extract_text`)
  interleaves the columns; a layout-aware reader that crops each column (pdfplumber) does not.
- `table`: a ruled grid whose cell text is drawn column by column. Stream-order extraction reads
  the table column-major; pdfplumber's ruling-based `extract_tables` recovers the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reportlab.lib.pagesizes import LETTER
from reportlab.lib.utils import simpleSplit
from reportlab.pdfgen.canvas import Canvas

FONT = "Helvetica"
BOLD = "Helvetica-Bold"
SIZE = 9.5
LEADING = 12.5
MARGIN = 54.0
GUTTER = 24.0
CELL_PAD = 4.0
ROW_H = 16.0


class PdfDoc:
    """A cursor-based page writer. Call the block methods in order, then `save()`."""

    def __init__(self, path: Path, title: str, *, footer: str = "", watermark: str = "") -> None:
        self.path = path
        self.width, self.height = LETTER
        self.canvas = Canvas(str(path), pagesize=LETTER, invariant=True, pageCompression=1)
        self.canvas.setTitle(title)
        self.canvas.setAuthor("bureau world generator")
        self.footer = footer
        self.watermark = watermark
        self.page = 1
        self.y = self.height - MARGIN
        self._page_started = False
        self._start_page()
        self.heading(title, level=0)

    # -- page management -------------------------------------------------------------------
    def _start_page(self) -> None:
        if self.watermark:
            c = self.canvas
            c.saveState()
            c.setFont(BOLD, 54)
            c.setFillGray(0.88)
            c.translate(self.width / 2, self.height / 2)
            c.rotate(35)
            c.drawCentredString(0, 0, self.watermark)
            c.restoreState()
        self.y = self.height - MARGIN
        self._page_started = True

    def _end_page(self) -> None:
        c = self.canvas
        c.setFont(FONT, 7.5)
        c.setFillGray(0.35)
        text = f"{self.footer}    Page {self.page}" if self.footer else f"Page {self.page}"
        c.drawRightString(self.width - MARGIN, MARGIN / 2, text)
        c.setFillGray(0)
        c.showPage()
        self.page += 1
        self._page_started = False

    def page_break(self) -> None:
        self._end_page()
        self._start_page()

    def _need(self, height: float) -> None:
        if self.y - height < MARGIN:
            self.page_break()

    @property
    def body_width(self) -> float:
        return self.width - 2 * MARGIN

    # -- blocks ----------------------------------------------------------------------------
    def heading(self, text: str, level: int = 1) -> None:
        size = {0: 15.0, 1: 12.0, 2: 10.5}.get(level, 10.5)
        self._need(size * 2.2)
        self.y -= size * 0.6 if level else 0
        self.canvas.setFont(BOLD, size)
        for line in simpleSplit(text, BOLD, size, self.body_width):
            self.canvas.drawString(MARGIN, self.y - size, line)
            self.y -= size * 1.3
        self.y -= size * 0.5

    def para(self, text: str, *, bold: bool = False) -> None:
        font = BOLD if bold else FONT
        self.canvas.setFont(font, SIZE)
        for line in simpleSplit(text, font, SIZE, self.body_width):
            self._need(LEADING)
            self.canvas.setFont(font, SIZE)
            self.canvas.drawString(MARGIN, self.y - SIZE, line)
            self.y -= LEADING
        self.y -= LEADING * 0.5

    def kv(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Label/value lines, e.g. a memo header."""
        for label, value in pairs:
            self._need(LEADING)
            self.canvas.setFont(BOLD, SIZE)
            self.canvas.drawString(MARGIN, self.y - SIZE, f"{label}:")
            self.canvas.setFont(FONT, SIZE)
            self.canvas.drawString(MARGIN + 90, self.y - SIZE, value)
            self.y -= LEADING
        self.y -= LEADING * 0.5

    def two_columns(self, paragraphs: Sequence[str]) -> None:
        """Newspaper columns: read left then right, drawn as interleaved line pairs."""
        col_w = (self.body_width - GUTTER) / 2
        lines: list[tuple[str, bool]] = []
        for text in paragraphs:
            bold_head, _, rest = text.partition("|")
            if rest:
                for line in simpleSplit(bold_head, BOLD, SIZE, col_w):
                    lines.append((line, True))
                text = rest
            for line in simpleSplit(text, FONT, SIZE, col_w):
                lines.append((line, False))
            lines.append(("", False))
        while lines:
            if self.y - MARGIN < LEADING * 4:
                self.page_break()
            rows = int((self.y - MARGIN) // LEADING)
            left, right = lines[:rows], lines[rows : 2 * rows]
            if len(lines) <= 2 * rows:
                # Balance the last block so both columns end near the same height.
                half = (len(lines) + 1) // 2
                left, right = lines[:half], lines[half:]
            lines = lines[len(left) + len(right) :]
            for i in range(max(len(left), len(right))):
                y = self.y - SIZE - i * LEADING
                for col, column_lines in enumerate((left, right)):
                    if i < len(column_lines) and column_lines[i][0]:
                        text, bold = column_lines[i]
                        self.canvas.setFont(BOLD if bold else FONT, SIZE)
                        self.canvas.drawString(MARGIN + col * (col_w + GUTTER), y, text)
            self.y -= max(len(left), len(right)) * LEADING
            if lines:
                self.page_break()
        # A gap wider than any inside the block tells layout-aware readers where it ends.
        self.y -= LEADING * 2

    def table(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        col_widths: Sequence[float] | None = None,
        column_major: bool = True,
    ) -> None:
        """A ruled table. Rows split across pages with the header repeated."""
        ncol = len(header)
        if col_widths is None:
            longest = [
                max([len(str(header[j]))] + [len(str(r[j])) for r in rows]) for j in range(ncol)
            ]
            total = sum(max(n, 4) for n in longest)
            col_widths = [self.body_width * max(n, 4) / total for n in longest]
        remaining = list(rows)
        while True:
            self._need(ROW_H * 3)
            fit = max(1, int((self.y - MARGIN) // ROW_H) - 1)
            chunk, remaining = remaining[:fit], remaining[fit:]
            self._draw_table(header, chunk, col_widths, column_major)
            if not remaining:
                break
            self.page_break()
        self.y -= LEADING

    def _draw_table(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        col_widths: Sequence[float],
        column_major: bool,
    ) -> None:
        c = self.canvas
        all_rows = [list(header), *[list(r) for r in rows]]
        top = self.y
        xs = [MARGIN]
        for w in col_widths:
            xs.append(xs[-1] + w)
        bottom = top - ROW_H * len(all_rows)
        c.setLineWidth(0.6)
        for i in range(len(all_rows) + 1):
            c.line(xs[0], top - i * ROW_H, xs[-1], top - i * ROW_H)
        for x in xs:
            c.line(x, top, x, bottom)
        order = (
            [(i, j) for j in range(len(col_widths)) for i in range(len(all_rows))]
            if column_major
            else [(i, j) for i in range(len(all_rows)) for j in range(len(col_widths))]
        )
        for i, j in order:
            text = str(all_rows[i][j])
            font = BOLD if i == 0 else FONT
            size = SIZE - 0.5
            while c.stringWidth(text, font, size) > col_widths[j] - 2 * CELL_PAD and size > 5:
                size -= 0.5
            c.setFont(font, size)
            c.drawString(xs[j] + CELL_PAD, top - (i + 1) * ROW_H + 4.5, text)
        self.y = bottom

    def save(self) -> None:
        if self._page_started:
            self._end_page()
        self.canvas.save()
