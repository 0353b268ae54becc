"""Slide tools: reading text, tables and charts; creating and editing decks."""

from __future__ import annotations

from pathlib import Path

import pytest
from pptx import Presentation

from bureau.tools import slides as sl
from bureau.tools.core import ToolFailure, Workspace

DECK = "decks/review.pptx"


def test_read_deck_shows_text_tables_charts_and_notes(ws: Workspace) -> None:
    out = sl.slides_read(ws, DECK)
    assert out.startswith("decks/review.pptx: 4 slides\n--- slide 1: Quarterly review")
    assert (
        "--- slide 2: Highlights  [Title and Content]\n  Revenue up 12%\n  Two new clients" in out
    )
    assert "  notes: Mention the harbour deal" in out
    assert "| Region | Revenue |\n|---|---|\n| North | 4.2 |" in out
    assert "  chart (COLUMN_CLUSTERED)\n    categories: ['2024', '2025']" in out
    assert "    series 'Revenue': [7.0, 7.3]" in out


def test_read_one_slide(ws: Workspace) -> None:
    out = sl.slides_read(ws, DECK, slide=3)
    assert out.startswith("decks/review.pptx: slide 3 of 4\n--- slide 3: Regions")
    assert "Highlights" not in out
    with pytest.raises(ToolFailure, match="slide 9 does not exist: the deck has 4"):
        sl.slides_read(ws, DECK, slide=9)


def test_create_add_edit_and_tables(ws: Workspace, ws_root: Path) -> None:
    path = "output/deck.pptx"
    assert sl.slides_create(ws, path, "Plan", "2026") == (
        "created output/deck.pptx with 1 slide (cover: 'Plan')"
    )
    assert sl.slides_add_slide(
        ws, path, "Goals", ["Grow", "Hire"], [["k", "v"], ["a", 1]], "n"
    ) == (
        "added slide 2 'Goals' to output/deck.pptx (2 bullets, a 2-row table, notes); "
        "the deck has 2 slides"
    )
    assert sl.slides_add_slide(ws, path, "Agenda", position=2).startswith("added slide 2 'Agenda'")
    assert sl.slides_edit_slide(ws, path, 3, title="Targets", bullets=["Grow 10%"]) == (
        "edited slide 3 of output/deck.pptx: title -> 'Targets'; body -> 1 bullet"
    )
    assert sl.slides_set_table(ws, path, 3, [["k", "v", "w"], ["a", 1, 2], ["b", 3, 4]]) == (
        "replaced table 1 on slide 3 of output/deck.pptx: 3 rows x 3 columns"
    )
    assert sl.slides_set_table(ws, path, 2, [["only"]]).startswith("added a table on slide 2")
    deck = Presentation(str(ws_root / path))
    assert [s.shapes.title.text for s in deck.slides] == ["Plan", "Agenda", "Targets"]
    out = sl.slides_read(ws, path, slide=3)
    assert "  Grow 10%\n" in out and "| b | 3 | 4 |" in out and "notes: n" in out
    with pytest.raises(ToolFailure, match="nothing to change"):
        sl.slides_edit_slide(ws, path, 1)
