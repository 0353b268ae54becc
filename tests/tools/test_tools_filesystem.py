"""Filesystem tools against the fixture workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from bureau.tools import filesystem as fs
from bureau.tools.core import FailureKind, ToolFailure, Workspace


def test_list_shows_folders_then_files(ws: Workspace) -> None:
    out = fs.fs_list(ws, "notes")
    lines = out.splitlines()
    assert lines[0] == "notes/  (4 entries)"
    assert any(line.startswith("readme.txt  42 B") for line in lines)
    assert "inside_link.txt -> notes/readme.txt  (link)" in lines
    assert "passwd_link  (link to outside the workspace, not readable)" in lines
    top = fs.fs_list(ws)
    assert top.splitlines()[1:3] == ["calendar/  (2 entries)", "chat/  (1 entry)"]


def test_tree_limits_depth(ws: Workspace) -> None:
    out = fs.fs_tree(ws, max_depth=1)
    assert "  mail/  (5 entries inside, not expanded)" in out
    deep = fs.fs_tree(ws, max_depth=3)
    assert "      2025-03-01_contract.eml" in deep
    assert deep.splitlines()[-1].endswith("files")


def test_find_by_glob_and_words(ws: Workspace) -> None:
    assert fs.fs_find(ws, "*.pdf").splitlines()[1:] == [
        "reports/contract.pdf",
        "reports/review.pdf",
    ]
    assert "finance/budget.xlsx" in fs.fs_find(ws, "BUDGET")
    assert fs.fs_find(ws, "mail/*/*.eml").startswith("3 matches")
    assert fs.fs_find(ws, "nothing-like-this").startswith("no file or folder")


def test_search_content_reads_inside_documents(ws: Workspace) -> None:
    out = fs.fs_search_content(ws, "harbour")
    for where in [
        "chat/general.json (line",
        "decks/review.pptx (slide 2): Mention the harbour deal",
        "docs/memo.docx (paragraph 2): The board approved the harbour project",
        "reports/review.pdf (page 1): Alpha column text says the harbour project",
    ]:
        assert where in out
    assert "budget.xlsx (Budget!row 3): Staff | 1800 | 0.6" in fs.fs_search_content(ws, "staff")
    assert "mail/inbox/2025-03-05_lunch.eml (header): Subject: Lunch" in fs.fs_search_content(
        ws, "lunch", path="mail"
    )


def test_search_content_finds_phrases_wrapped_across_lines(ws: Workspace) -> None:
    out = fs.fs_search_content(ws, "to the other party", file_glob="*.pdf")
    assert out.splitlines() == [
        "1 match in 2 files searched:",
        "reports/contract.pdf (page 1): Either party may terminate this Agreement for "
        "convenience by giving not less than 90 days' written notice to the other / party, and "
        "at once for a material breach.",
    ]


def test_search_content_options(ws: Workspace) -> None:
    assert fs.fs_search_content(ws, "harbour", include_documents=False).startswith("1 match ")
    assert fs.fs_search_content(ws, r"line 19\d\d$", regex=True, path="notes").startswith(
        "100 matches"
    )
    with pytest.raises(ToolFailure, match="bad regular expression"):
        fs.fs_search_content(ws, "(", regex=True)


def test_read_text_windows_with_line_numbers(ws: Workspace) -> None:
    out = fs.fs_read_text(ws, "notes/long.txt", offset=10, limit=3)
    assert out.splitlines() == [
        "notes/long.txt: lines 10-12 of 2000; continue with offset=13",
        "    10  line 10",
        "    11  line 11",
        "    12  line 12",
    ]
    with pytest.raises(ToolFailure, match="past the end"):
        fs.fs_read_text(ws, "notes/long.txt", offset=3000)


def test_read_text_points_documents_to_their_tool(ws: Workspace) -> None:
    with pytest.raises(ToolFailure) as info:
        fs.fs_read_text(ws, "reports/review.pdf")
    assert info.value.kind == FailureKind.wrong_file_type
    assert "read it with pdf_read_pages" in info.value.message
    with pytest.raises(ToolFailure, match="not a text file"):
        fs.fs_read_text(ws, "data/blob.bin")
    with pytest.raises(ToolFailure) as escape:
        fs.fs_read_text(ws, "notes/passwd_link")
    assert escape.value.kind == FailureKind.path_outside_workspace


def test_info_describes_documents(ws: Workspace) -> None:
    assert "pages: 2" in fs.fs_info(ws, "reports/review.pdf")
    assert "sheets: Budget (4x3), Summary (2x2)" in fs.fs_info(ws, "finance/budget.xlsx")
    assert "slides: 4" in fs.fs_info(ws, "decks/review.pptx")
    assert "lines: 2000" in fs.fs_info(ws, "notes/long.txt")
    assert "type: folder" in fs.fs_info(ws, "mail")


def test_write_text_modes(ws: Workspace, ws_root: Path) -> None:
    out = fs.fs_write_text(ws, "output/answer.json", '{"a": 1}\n')
    assert out == "created output/answer.json: 9 bytes, 1 lines"
    assert (ws_root / "output" / "answer.json").read_text() == '{"a": 1}\n'
    with pytest.raises(ToolFailure) as info:
        fs.fs_write_text(ws, "output/answer.json", "x")
    assert info.value.kind == FailureKind.already_exists
    assert fs.fs_write_text(ws, "output/answer.json", "{}", mode="overwrite").startswith("replaced")
    assert "now 4 bytes" in fs.fs_write_text(ws, "output/answer.json", "\n\n", mode="append")
    with pytest.raises(ToolFailure) as escape:
        fs.fs_write_text(ws, "link_out/evil", "x")
    assert escape.value.kind == FailureKind.path_outside_workspace
