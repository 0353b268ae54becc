"""pptx decks written with python-pptx: title slides, bullets, tables and charts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE, XL_LEGEND_POSITION
from pptx.util import Inches, Pt

from .ziputil import normalize_ooxml

CHART_TYPES = {
    "bar": XL_CHART_TYPE.COLUMN_CLUSTERED,
    "pie": XL_CHART_TYPE.PIE,
    "line": XL_CHART_TYPE.LINE_MARKERS,
}


@dataclass
class Slide:
    title: str
    bullets: list[str] = field(default_factory=list)
    table: tuple[list[str], list[list[str]]] | None = None
    chart: tuple[str, list[str], dict[str, list[float]]] | None = None  # kind, categories, series
    notes: str = ""


@dataclass
class DeckSpec:
    title: str
    subtitle: str = ""
    slides: list[Slide] = field(default_factory=list)

    def add(
        self,
        title: str,
        bullets: Sequence[str] = (),
        *,
        table: tuple[Sequence[str], Sequence[Sequence[object]]] | None = None,
        chart: tuple[str, Sequence[str], dict[str, list[float]]] | None = None,
        notes: str = "",
    ) -> None:
        t = None if table is None else (list(table[0]), [[str(c) for c in r] for r in table[1]])
        ch = None if chart is None else (chart[0], list(chart[1]), chart[2])
        self.slides.append(Slide(title, list(bullets), t, ch, notes))


def write_pptx(path: Path, spec: DeckSpec) -> None:
    prs = Presentation()
    prs.core_properties.author = "bureau world generator"
    prs.core_properties.title = spec.title
    cover = prs.slides.add_slide(prs.slide_layouts[0])
    cover.shapes.title.text = spec.title
    cover.placeholders[1].text = spec.subtitle
    for slide_spec in spec.slides:
        layout = prs.slide_layouts[1] if slide_spec.bullets else prs.slide_layouts[5]
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = slide_spec.title
        top = Inches(1.5)
        if slide_spec.bullets:
            body = slide.placeholders[1]
            frame = body.text_frame
            frame.text = slide_spec.bullets[0]
            for text in slide_spec.bullets[1:]:
                frame.add_paragraph().text = text
            if slide_spec.table or slide_spec.chart:
                body.top, body.height = Inches(1.3), Inches(1.6)
                top = Inches(3.0)
        if slide_spec.table:
            header, rows = slide_spec.table
            shape = slide.shapes.add_table(
                len(rows) + 1,
                len(header),
                Inches(0.5),
                top,
                Inches(9),
                Inches(0.3) * (len(rows) + 1),
            )
            for j, text in enumerate(header):
                shape.table.cell(0, j).text = text
            for i, row in enumerate(rows, start=1):
                for j, text in enumerate(row):
                    cell = shape.table.cell(i, j)
                    cell.text = text
                    cell.text_frame.paragraphs[0].font.size = Pt(12)
        if slide_spec.chart:
            kind, categories, series = slide_spec.chart
            data = CategoryChartData()
            data.categories = categories
            for name, values in series.items():
                data.add_series(name, values)
            graphic = slide.shapes.add_chart(
                CHART_TYPES[kind],
                Inches(1),
                top,
                Inches(8),
                Inches(4.8) - (top - Inches(1.5)),
                data,
            )
            chart = graphic.chart
            chart.has_legend = kind == "pie" or len(series) > 1
            if chart.has_legend:
                chart.legend.position = XL_LEGEND_POSITION.BOTTOM
                chart.legend.include_in_layout = False
        if slide_spec.notes:
            slide.notes_slide.notes_text_frame.text = slide_spec.notes
    prs.save(str(path))
    normalize_ooxml(path)
