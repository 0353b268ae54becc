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


def _append(memo: Path, *paragraphs: tuple[str, str]) -> None:
    document = docx.Document(str(memo))
    for text, style in paragraphs:
        document.add_paragraph(text, style=style)
    document.save(str(memo))


def test_a_labelled_statement_with_candidate_values_fails(grade_one: GradeOne, memo: Path) -> None:
    criterion = content(contains="serve notice by: 2025-03-01", label="serve notice by:")
    _append(memo, ("Serve notice by: 2025-03-01", "Normal"))
    assert grade_one(criterion).passed
    _append(memo, ("serve notice by: 2025-02-28", "Normal"), ("or 2025-03-02", "Normal"))
    result = grade_one(criterion)
    assert (result.passed, result.reason) == (
        False,
        "paragraph 6 gives another 'serve notice by:': 'serve notice by: 2025-02-28' "
        "(one statement, one value)",
    )


def test_the_first_heading_is_the_one_that_counts(grade_one: GradeOne, memo: Path) -> None:
    # The fixture's first "Heading 1" paragraph is "Notice" (the title uses style "Title").
    assert grade_one(content(contains="notice", style="Heading 1", first=True)).passed
    _append(memo, ("Termination of the Lease", "Heading 1"))
    assert grade_one(content(contains="Termination of the Lease", style="Heading 1")).passed
    first = grade_one(content(contains="Termination of the Lease", style="Heading 1", first=True))
    assert (first.passed, first.reason) == (
        False,
        "the first 'Heading 1' paragraph (2) reads 'Notice'",
    )


def test_places_must_be_consistent(grade_one: GradeOne) -> None:
    from pydantic import ValidationError

    from bureau.grading.rubric import DocxContentCriterion

    with pytest.raises(ValidationError, match="first needs a style"):
        DocxContentCriterion.model_validate(
            content(contains="x", first=True, description="d", id="c1")
        )
    with pytest.raises(ValidationError, match="label must be part"):
        DocxContentCriterion.model_validate(
            content(contains="x: 1", label="y:", description="d", id="c1")
        )


def test_a_sentence_about_the_label_is_not_a_statement(grade_one: GradeOne, memo: Path) -> None:
    _append(
        memo,
        ("We used the large-cap peer set for this note.", "Normal"),
        ("Peer set:  Large-cap", "Normal"),
    )
    assert grade_one(content(contains="peer set: large-cap", label="peer set:")).passed


def test_candidates_in_one_paragraph_fail_too(grade_one: GradeOne, memo: Path) -> None:
    _append(memo, ("Serve notice by: 2025-03-01; serve notice by: 2025-03-02", "Normal"))
    criterion = content(contains="serve notice by: 2025-03-01", label="serve notice by:")
    assert not grade_one(criterion).passed
