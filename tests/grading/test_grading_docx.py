from pathlib import Path

import docx
import pytest
from docx.enum.style import WD_STYLE_TYPE
from grading_helpers import GradeOne

PATH = "output/memo.docx"


@pytest.fixture(autouse=True)
def memo(workspace: Path) -> Path:
    document = docx.Document()
    document.add_heading("Termination Memo", level=0)
    document.add_heading("Notice", level=1)
    document.add_paragraph("The agreement requires a notice period of 90 days.")
    custom = document.styles.add_style("Key Finding", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 1"]
    document.add_paragraph("Liability is capped", style="Key Finding")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Counterparty"
    table.cell(1, 1).text = "Acme Corp"
    path = workspace / PATH
    document.save(str(path))
    return path


def content(**fields: object) -> dict[str, object]:
    return {"type": "docx_content", "path": PATH, **fields}


def test_contains_is_a_normalized_substring(grade_one: GradeOne) -> None:
    result = grade_one(content(contains="NOTICE period of 90 days"))
    assert (result.passed, result.reason) == (
        True,
        "paragraph 3 ('Normal') contains 'NOTICE period of 90 days'",
    )
    missing = grade_one(content(contains="notice period of 60 days"))
    assert (missing.passed, missing.reason) == (
        False,
        "no paragraph of output/memo.docx contains 'notice period of 60 days'",
    )


def test_table_cells_are_searched(grade_one: GradeOne) -> None:
    assert grade_one(content(contains="acme corp")).passed


def test_style_must_match(grade_one: GradeOne) -> None:
    assert grade_one(content(contains="Notice", style="Heading 1")).passed
    assert grade_one(content(contains="termination memo", style="Title")).passed
    body = grade_one(content(contains="90 days", style="Heading 1"))
    assert (body.passed, body.reason) == (
        False,
        "'90 days' is only in ['Normal'] paragraphs, not 'Heading 1'",
    )


def test_style_based_on_heading_counts(grade_one: GradeOne) -> None:
    assert grade_one(content(contains="liability is capped", style="Heading 1")).passed


def test_corrupt_document_fails(grade_one: GradeOne, memo: Path) -> None:
    memo.write_bytes(b"PK\x03\x04 truncated")
    result = grade_one(content(contains="notice"))
    assert not result.passed
    assert result.reason.startswith("could not open output/memo.docx:")
