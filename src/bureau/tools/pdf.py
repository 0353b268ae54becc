"""PDF tools: read pages in reading order, extract tables as rows, search, and write a PDF.

Reading is layout-aware (see `bureau.tools.pdfread`): two-column pages come out column by
column, ruled tables row by row where they stand, and watermarks are reported apart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any
from xml.sax.saxutils import escape

from pydantic import Field
from reportlab.lib import colors
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import inch
from reportlab.platypus import (
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from bureau.tools import pdfread
from bureau.tools.blocks import Block, Blocks, describe_blocks, markdown_table
from bureau.tools.core import (
    FailureKind,
    Overwrite,
    PathArg,
    ToolFailure,
    ToolSet,
    Workspace,
    check_deadline,
)

TOOLS = ToolSet("pdf", "pdf_")
PagesArg = Annotated[
    str | None,
    Field(description="Pages to read, 1-based: '3', '1-4', '2,5-7'. Omit for all pages."),
]


def parse_pages(spec: str | None, total: int) -> list[int] | None:
    """'2,5-7' -> [2, 5, 6, 7], checked against the page count; None means all."""
    if spec is None or not spec.strip() or spec.strip().lower() == "all":
        return None
    pages: list[int] = []
    for part in spec.replace(" ", "").split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise ToolFailure(FailureKind.invalid_argument, f"bad page range {part!r}; use '1-3,5'")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < 1 or last < first or last > total:
            raise ToolFailure(
                FailureKind.invalid_argument, f"pages {part} do not exist: the PDF has {total}"
            )
        pages.extend(range(first, last + 1))
    return list(dict.fromkeys(pages))


def _open(ws: Workspace, path: str) -> tuple[Path, int]:
    file = ws.file(path, (".pdf",))
    try:
        return file, pdfread.page_count(file)
    except Exception as exc:
        raise ToolFailure(FailureKind.unreadable_file, f"{path} is not a readable PDF") from exc


@TOOLS.tool(read_only=True)
def pdf_read_pages(ws: Workspace, path: PathArg, pages: PagesArg = None) -> str:
    """Read a PDF's text in reading order, page by page. Two-column pages are read column by
    column; ruled tables appear where they stand, one row per line with cells joined by ' | '
    (pdf_extract_tables gives them as Markdown tables); rotated text such as a DRAFT watermark
    is reported after the page."""
    file, total = _open(ws, path)
    wanted = parse_pages(pages, total)
    _, texts = pdfread.read_pages(file, wanted, check=check_deadline)
    out = [f"{ws.rel(file)}: {total} page{'s' if total != 1 else ''}"]
    for page in texts:
        out.append(f"\n=== page {page.number} of {total} ===")
        out.append(page.text or "(no text on this page; it may be a scanned image)")
        if page.rotated_text:
            out.append(f"[rotated text on this page, e.g. a watermark: {page.rotated_text}]")
    return "\n".join(out)


@TOOLS.tool(read_only=True)
def pdf_extract_tables(ws: Workspace, path: PathArg, pages: PagesArg = None) -> str:
    """Extract the ruled tables of a PDF as Markdown tables (first row = header). A table that
    continues on the next page under the same header is returned as one table."""
    file, total = _open(ws, path)
    tables = pdfread.read_tables(file, parse_pages(pages, total), check=check_deadline)
    if not tables:
        return f"no ruled tables found in {ws.rel(file)} (pages: {pages or 'all'})"
    out = [f"{len(tables)} table{'s' if len(tables) != 1 else ''} in {ws.rel(file)}"]
    for i, table in enumerate(tables, start=1):
        shape = f"{len(table.rows) - 1} rows x {max(len(r) for r in table.rows)} columns"
        out.append(f"\ntable {i} (page {table.page}, header + {shape}):")
        out.append(markdown_table(table.rows))
    return "\n".join(out)


@TOOLS.tool(read_only=True)
def pdf_search(
    ws: Workspace,
    path: PathArg,
    query: Annotated[str, Field(description="Text to find (case-insensitive) or a regex.")],
    regex: Annotated[
        bool, Field(description="Treat the query as a Python regular expression.")
    ] = False,
    context_lines: Annotated[
        int, Field(ge=0, le=10, description="Lines to show before and after each match.")
    ] = 1,
) -> str:
    """Find text in one PDF; each match comes with its page number and the lines around it.
    Whitespace in the query matches line breaks too. To search many files at once, use
    fs_search_content."""
    file, total = _open(ws, path)
    try:
        expr = query if regex else r"\s+".join(re.escape(w) for w in query.split())
        matcher = re.compile(expr, re.IGNORECASE)
    except re.error as exc:
        raise ToolFailure(FailureKind.invalid_argument, f"bad regular expression: {exc}") from exc
    _, texts = pdfread.read_pages(file, check=check_deadline)
    hits: list[str] = []
    for page in texts:
        lines = page.text.splitlines()
        joined = "\n".join(lines)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        for match in matcher.finditer(joined):
            row = max(i for i, s in enumerate(starts[:-1]) if s <= match.start())
            lo, hi = max(0, row - context_lines), min(len(lines), row + context_lines + 1)
            snippet = "\n".join(f"  {line}" for line in lines[lo:hi])
            hits.append(f"page {page.number}, line {row + 1}: {match.group(0)!r}\n{snippet}")
    if not hits:
        return f"no match for {query!r} in {ws.rel(file)} ({total} pages)"
    count = f"{len(hits)} match{'es' if len(hits) != 1 else ''}"
    return f"{count} in {ws.rel(file)}:\n" + "\n".join(hits)


def _flowables(blocks: list[Block]) -> list[Any]:
    styles = getSampleStyleSheet()
    body = styles["BodyText"]
    bullet = ParagraphStyle("bullet", parent=body, leftIndent=18, bulletIndent=6)
    out: list[Any] = []
    for block in blocks:
        text = escape(block.text)
        if block.kind == "heading":
            out.append(Paragraph(text, styles[f"Heading{block.level}"]))
        elif block.kind == "paragraph":
            out.append(Paragraph(text, body))
        elif block.kind == "bullet":
            out.append(Paragraph(text, bullet, bulletText="-"))
        elif block.kind == "page_break":
            out.append(PageBreak())
        elif block.kind == "table":
            rows = block.table_rows()
            if not rows:
                raise ToolFailure(FailureKind.invalid_argument, "a table block needs rows")
            width = max(len(r) for r in rows)
            cells = [
                [Paragraph(escape(c), body) for c in r + [""] * (width - len(r))] for r in rows
            ]
            table = Table(cells, repeatRows=1, hAlign="LEFT")
            table.setStyle(
                TableStyle(
                    [
                        ("GRID", (0, 0), (-1, -1), 0.5, colors.black),
                        ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey),
                        ("VALIGN", (0, 0), (-1, -1), "TOP"),
                    ]
                )
            )
            out += [table, Spacer(1, 0.15 * inch)]
    return out


@TOOLS.tool(read_only=False)
def pdf_create(
    ws: Workspace,
    path: PathArg,
    title: Annotated[str, Field(description="Document title, shown at the top of page 1.")],
    blocks: Blocks,
    overwrite: Overwrite = False,
) -> str:
    """Create a PDF (US Letter) from a title and content blocks: headings, paragraphs, bullets,
    ruled tables (the header row repeats on each page) and page breaks."""
    target = ws.target(path, (".pdf",), overwrite=overwrite)
    story: list[Any] = [Paragraph(escape(title), getSampleStyleSheet()["Title"])]
    story += _flowables(blocks)

    def save(tmp: Path) -> None:
        doc = SimpleDocTemplate(str(tmp), pagesize=LETTER, title=title, author="bureau agent")
        doc.build(story)

    ws.atomic_save(target, save)
    pages = pdfread.page_count(target)
    return (
        f"wrote {ws.rel(target)}: {pages} page{'s' if pages != 1 else ''}, "
        f"title {title!r}, {describe_blocks(blocks)}"
    )


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["pdf"])
