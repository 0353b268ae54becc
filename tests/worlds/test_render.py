"""The renderers write real files that the real libraries open, deterministically."""

from __future__ import annotations

import hashlib
import sys
from email import policy
from email.parser import BytesParser
from pathlib import Path

import docx
import openpyxl
import pytest
from pptx import Presentation

from bureau.worlds.naive import naive_number_after, naive_text
from bureau.worlds.render.documents import DocSpec, write_docx
from bureau.worlds.render.messages import Email, write_eml
from bureau.worlds.render.pdf import PdfDoc
from bureau.worlds.render.sheets import Formula, WorkbookSpec, write_workbook
from bureau.worlds.render.slides import DeckSpec, write_pptx

ORACLES = Path(__file__).parents[2] / "src" / "bureau" / "worlds" / "oracles"


@pytest.fixture(scope="module")
def oracle_lib():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ORACLES))
    try:
        import oracle_lib

        yield oracle_lib
    finally:
        sys.path.remove(str(ORACLES))


def _clauses() -> list[str]:
    return [
        f"{i}. Clause {i}|This item runs for {i * 10} days and costs USD {i * 1000:,} in total, "
        "payable on the terms described in the schedule to this agreement."
        for i in range(1, 13)
    ]


def _contract(path: Path) -> Path:
    doc = PdfDoc(path, "Services Agreement", footer="ref", watermark="DRAFT")
    doc.para("This agreement is made between Alpha Corp and Beta LLC on 2025-03-01.")
    doc.two_columns(_clauses())
    doc.table(["Role", "Rate (USD)"], [["Analyst", "150"], ["Engineer", "210"], ["Lead", "320"]])
    doc.save()
    return path


def test_two_column_pdf_reads_in_column_order(tmp_path: Path, oracle_lib) -> None:  # type: ignore[no-untyped-def]
    text = oracle_lib.pdf_text(_contract(tmp_path / "c.pdf"))
    for i in range(1, 13):
        assert oracle_lib.number_after(text, f"{i}. Clause {i}") == i * 10
    # Content-stream order interleaves the columns: clause 7 sits in the right column, so the
    # first number after its heading in naive text belongs to a left-column clause.
    naive = naive_text(tmp_path / "c.pdf")
    assert naive_number_after(naive, "7. Clause 7") != 70


def test_ruled_table_rows_survive_column_major_drawing(tmp_path: Path, oracle_lib) -> None:  # type: ignore[no-untyped-def]
    path = _contract(tmp_path / "c.pdf")
    rows = oracle_lib.pdf_table_with(path, "Rate")
    assert [(r["Role"], r["Rate (USD)"]) for r in rows] == [
        ("Analyst", "150"),
        ("Engineer", "210"),
        ("Lead", "320"),
    ]
    assert naive_number_after(naive_text(path), "Engineer") != 210


def test_pdf_bytes_are_deterministic(tmp_path: Path) -> None:
    a = _contract(tmp_path / "a.pdf").read_bytes()
    b = _contract(tmp_path / "b.pdf").read_bytes()
    assert a == b


def test_workbook_has_cached_formula_values_and_named_range(tmp_path: Path) -> None:
    spec = WorkbookSpec(title="model")
    sheet = spec.sheet("IS")
    sheet.append(["Line", "FY25"])
    sheet.append(["Revenue", 1200])
    sheet.append(["Costs", 450.5])
    sheet.append(["EBITDA", Formula("=B2-B3", 749.5)])
    sheet.append(["Label", Formula('=IF(B4>0,"profit","loss")', "profit")])
    spec.names["EBITDA_FY25"] = "IS!$B$4"
    path = tmp_path / "m.xlsx"
    write_workbook(path, spec)
    values = openpyxl.load_workbook(path, data_only=True)
    assert values["IS"]["B4"].value == 749.5
    assert values["IS"]["B5"].value == "profit"
    formulas = openpyxl.load_workbook(path)
    assert formulas["IS"]["B4"].value == "=B2-B3"
    dest = next(iter(formulas.defined_names["EBITDA_FY25"].destinations))
    assert dest == ("IS", "$B$4")
    again = tmp_path / "m2.xlsx"
    write_workbook(again, spec)
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(again.read_bytes()).digest()


def test_docx_and_pptx_open_and_are_deterministic(tmp_path: Path) -> None:
    doc = DocSpec("Memo")
    doc.h1("Findings")
    doc.p("The notice period is 90 days.")
    doc.table(["Field", "Detail"], [["Court", "High Court"]])
    write_docx(tmp_path / "a.docx", doc)
    write_docx(tmp_path / "b.docx", doc)
    assert (tmp_path / "a.docx").read_bytes() == (tmp_path / "b.docx").read_bytes()
    d = docx.Document(str(tmp_path / "a.docx"))
    assert [p.text for p in d.paragraphs if p.style.name == "Heading 1"] == ["Findings"]
    assert d.tables[0].cell(1, 1).text == "High Court"

    deck = DeckSpec("Market", "2026")
    deck.add("Sizing", ["TAM grows"], table=(["Segment", "TAM"], [["SMB", 12.5]]))
    deck.add("Share", chart=("pie", ["North", "South"], {"Share": [60.0, 40.0]}))
    write_pptx(tmp_path / "a.pptx", deck)
    write_pptx(tmp_path / "b.pptx", deck)
    assert (tmp_path / "a.pptx").read_bytes() == (tmp_path / "b.pptx").read_bytes()
    slides = list(Presentation(str(tmp_path / "a.pptx")).slides)
    assert slides[1].shapes.title.text == "Sizing"
    chart = next(s.chart for s in slides[2].shapes if s.has_chart)
    assert list(chart.plots[0].series[0].values) == [60.0, 40.0]


def test_eml_with_attachment_parses(tmp_path: Path, oracle_lib) -> None:  # type: ignore[no-untyped-def]
    from datetime import datetime

    attachment = _contract(tmp_path / "letter.pdf")
    (tmp_path / "mail").mkdir()
    write_eml(
        tmp_path / "mail" / "m.eml",
        Email(
            sender="A <a@x.example.com>",
            to=["B <b@x.example.com>"],
            subject="Amendment",
            body="Notice changes from 30 days to 60 days.",
            sent=datetime(2025, 5, 1, 9, 30),
            attachments=[attachment],
        ),
        domain="x.example.com",
    )
    with (tmp_path / "mail" / "m.eml").open("rb") as fh:
        msg = BytesParser(policy=policy.default).parse(fh)
    parts = list(msg.iter_attachments())
    assert [p.get_filename() for p in parts] == ["letter.pdf"]
    assert parts[0].get_content() == attachment.read_bytes()
    mails = oracle_lib.read_mailbox(tmp_path / "mail")
    assert mails[0]["attachments"] == ["letter.pdf"]
    assert "60 days" in mails[0]["body"]
