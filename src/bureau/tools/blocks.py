"""Shared shapes of content: the blocks a model writes documents from, and how tables read.

`Block` is the one input format for writing PDFs and Word documents (headings, paragraphs,
bullets, tables, page breaks), so a model learns it once. `markdown_table` is the one output
format for tables read from any file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, Field

CellInput = str | int | float | bool | None


class Block(BaseModel):
    """One piece of a document, in reading order."""

    kind: Literal["heading", "paragraph", "bullet", "table", "page_break"] = Field(
        description="What this block is."
    )
    text: str = Field(default="", description="Text of a heading, paragraph or bullet.")
    level: int = Field(default=1, ge=1, le=3, description="Heading level: 1 is the largest.")
    rows: list[list[CellInput]] = Field(
        default_factory=list, description="For a table: rows of cells, the first row the header."
    )

    def table_rows(self) -> list[list[str]]:
        return [[cell_text(c) for c in row] for row in self.rows]


Blocks = Annotated[
    list[Block],
    Field(
        description="Content in order, e.g. [{'kind':'heading','text':'Summary','level':1}, "
        "{'kind':'paragraph','text':'...'}, {'kind':'table','rows':[['Item','Amount'],"
        "['Fees',1200]]}]."
    ),
]


def cell_text(value: CellInput) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def describe_blocks(blocks: Sequence[Block]) -> str:
    """'2 headings, 3 paragraphs, 1 table (4 rows)' for a write's result."""
    counts: dict[str, int] = {}
    for b in blocks:
        counts[b.kind] = counts.get(b.kind, 0) + 1
    parts = [f"{n} {kind.replace('_', ' ')}{'s' if n != 1 else ''}" for kind, n in counts.items()]
    rows = sum(len(b.rows) for b in blocks if b.kind == "table")
    if rows:
        parts.append(f"{rows} table row{'s' if rows != 1 else ''} in all")
    return ", ".join(parts) or "no content"


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as a Markdown table, the first row as header; ragged rows are padded."""
    if not rows:
        return "(empty table)"
    width = max(len(r) for r in rows)

    def line(row: Sequence[str]) -> str:
        cells = [str(c).replace("|", "\\|").replace("\n", " ") for c in row]
        cells += [""] * (width - len(cells))
        return "| " + " | ".join(cells) + " |"

    return "\n".join([line(rows[0]), "|" + "---|" * width, *(line(r) for r in rows[1:])])
