from pathlib import Path

import pytest
from grading_helpers import GradeOne
from pptx import Presentation
from pptx.util import Inches

PATH = "output/deck.pptx"
TITLE_ONLY, BLANK = 5, 6


@pytest.fixture(autouse=True)
def deck(workspace: Path) -> Path:
    presentation = Presentation()
    intro = presentation.slides.add_slide(presentation.slide_layouts[TITLE_ONLY])
    intro.shapes.title.text = "Overview"
    box = intro.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1))
    box.text_frame.text = "Enterprise demand is growing"

    market = presentation.slides.add_slide(presentation.slide_layouts[TITLE_ONLY])
    market.shapes.title.text = "Market Size"
    table = market.shapes.add_table(3, 3, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([["Segment", "TAM", "Growth"], ["Enterprise", "12.5", "8%"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(2, 0).text = "SMB"
    table.cell(2, 1).text = "$3.1bn"

    blank = presentation.slides.add_slide(presentation.slide_layouts[BLANK])
    group = blank.shapes.add_group_shape()
    grouped = group.shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1))
    grouped.text_frame.text = "Appendix: method notes"

    path = workspace / PATH
    presentation.save(str(path))
    return path


def content(**fields: object) -> dict[str, object]:
    return {"type": "pptx_content", "path": PATH, "slide": None, **fields}


def test_title_on_a_pinned_slide(grade_one: GradeOne) -> None:
    assert grade_one(content(slide=2, title="market size")).passed
    result = grade_one(content(slide=1, title="Market Size"))
    assert (result.passed, result.reason) == (False, "slide 1: title is 'Overview'")


def test_contains_searches_text_boxes_tables_and_groups(grade_one: GradeOne) -> None:
    assert grade_one(content(slide=1, contains="enterprise DEMAND")).passed
    assert grade_one(content(slide=2, contains="Enterprise")).passed
    assert grade_one(content(contains="method notes")).passed
    assert not grade_one(content(contains="consumer")).passed


def test_table_cell(grade_one: GradeOne) -> None:
    spec = {"row_label": "Enterprise", "column": "TAM", "expected": 12.5}
    assert grade_one(content(slide=2, table_cell=spec)).passed
    smb = {"row_label": "SMB", "column": "tam", "expected": 3.1e9}
    assert grade_one(content(table_cell=smb)).passed
    wrong = grade_one(content(slide=2, table_cell={**spec, "expected": 13}))
    assert wrong.reason == (
        "slide 2: table cell 'Enterprise'/'TAM': expected 13 ±0.013, got '12.5' = 12.5"
    )
    growth = {"row_label": "Enterprise", "column": "Growth", "expected": "8%"}
    assert grade_one(content(slide=2, table_cell=growth)).passed


def test_all_conditions_must_hold_on_one_slide(grade_one: GradeOne) -> None:
    assert grade_one(content(title="Market Size", contains="SMB")).passed
    result = grade_one(content(title="Overview", contains="SMB"))
    assert (result.passed, result.reason) == (
        False,
        "no slide meets all conditions; closest slide 1: no text contains 'SMB'",
    )


def test_slide_without_title_placeholder_and_out_of_range(grade_one: GradeOne) -> None:
    no_title = grade_one(content(slide=3, title="Appendix"))
    assert (no_title.passed, no_title.reason) == (False, "slide 3: no title placeholder")
    out = grade_one(content(slide=9, contains="x"))
    assert (out.passed, out.reason) == (False, "deck has 3 slides, no slide 9")


def test_missing_deck(grade_one: GradeOne, deck: Path) -> None:
    deck.unlink()
    result = grade_one(content(contains="x"))
    assert (result.passed, result.reason) == (False, "output/deck.pptx missing")


def _hedge(deck: Path, values: list[str], *, title: str = "Market Size") -> None:
    """Add a slide titled `title` with one candidate table per value."""
    presentation = Presentation(str(deck))
    slide = presentation.slides.add_slide(presentation.slide_layouts[TITLE_ONLY])
    slide.shapes.title.text = title
    for k, value in enumerate(values):
        shape = slide.shapes.add_table(2, 2, Inches(1), Inches(1 + k), Inches(4), Inches(1))
        for (r, c), text in {(0, 0): "Segment", (0, 1): "TAM", (1, 0): "Enterprise"}.items():
            shape.table.cell(r, c).text = text
        shape.table.cell(1, 1).text = value
    presentation.save(str(deck))


def test_candidate_tables_for_one_cell_fail(grade_one: GradeOne, deck: Path) -> None:
    spec = {"row_label": "Enterprise", "column": "TAM", "expected": 12.5}
    criterion = content(title="Market Size", table_cell=spec)
    assert grade_one(criterion).passed
    _hedge(deck, ["11", "12.5", "14"])  # a second slide with the title, three candidates
    result = grade_one(criterion)
    assert not result.passed
    assert result.reason.startswith("slide 4 gives table cell 'Enterprise'/'TAM' another value")
    # The same value repeated is no conflict, and a slide outside the named place is not read.
    _hedge(deck, ["99"], title="Backup")
    assert not grade_one(criterion).passed
    pinned = grade_one(content(slide=2, table_cell=spec))
    assert pinned.passed


def test_agreeing_copies_of_a_cell_pass(grade_one: GradeOne, deck: Path) -> None:
    _hedge(deck, ["12.5", "12.50"])
    _hedge(deck, ["99"], title="Backup")
    spec = {"row_label": "Enterprise", "column": "TAM", "expected": 12.5}
    assert grade_one(content(title="Market Size", table_cell=spec)).passed
