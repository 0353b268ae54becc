"""docx documents written with python-docx: headings, paragraphs, tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import docx

from .ziputil import normalize_ooxml


@dataclass
class DocSpec:
    """Blocks in order: ("h1"|"h2"|"p"|"bullet", text) or ("table", header, rows)."""

    title: str
    blocks: list[tuple[object, ...]] = field(default_factory=list)

    def h1(self, text: str) -> None:
        self.blocks.append(("h1", text))

    def h2(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullet(self, text: str) -> None:
        self.blocks.append(("bullet", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.blocks.append(("table", list(header), [list(r) for r in rows]))


def write_docx(path: Path, spec: DocSpec) -> None:
    document = docx.Document()
    document.core_properties.author = "bureau world generator"
    document.core_properties.title = spec.title
    document.add_heading(spec.title, level=0)
    for block in spec.blocks:
        kind = block[0]
        if kind == "h1":
            document.add_heading(str(block[1]), level=1)
        elif kind == "h2":
            document.add_heading(str(block[1]), level=2)
        elif kind == "p":
            document.add_paragraph(str(block[1]))
        elif kind == "bullet":
            document.add_paragraph(str(block[1]), style="List Bullet")
        elif kind == "table":
            header, rows = block[1], block[2]
            assert isinstance(header, list) and isinstance(rows, list)
            table = document.add_table(rows=1 + len(rows), cols=len(header))
            table.style = "Table Grid"
            for j, text in enumerate(header):
                table.cell(0, j).text = str(text)
            for i, row in enumerate(rows, start=1):
                for j, text in enumerate(row):
                    table.cell(i, j).text = str(text)
        else:
            raise ValueError(f"unknown docx block kind {kind!r}")
    document.save(str(path))
    normalize_ooxml(path)
