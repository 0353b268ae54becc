import datetime
import zipfile
from pathlib import Path

import openpyxl
import pytest
from grading_helpers import GradeOne

PATH = "output/summary.xlsx"


@pytest.fixture
def workbook(workspace: Path) -> Path:
    wb = openpyxl.Workbook()
    wb.active.title = "Notes"
    sheet = wb.create_sheet("Expiring")
    sheet.append(["Contract", "Value", "Counterparty", "Ends"])
    sheet.append(["C-104", 1200000, "Acme Corp", datetime.datetime(2027, 3, 5)])
    sheet.append(["C-105", "$2.5m", "Globex", None])
    sheet.append([2024, 7, "numeric label", None])
    sheet["B6"] = "=B2+B5"
    path = workspace / PATH
    wb.save(path)
    return path


def cell(**fields: object) -> dict[str, object]:
    return {"type": "xlsx_cell", "path": PATH, "sheet": "Expiring", **fields}


@pytest.mark.usefixtures("workbook")
def test_cell_by_address(grade_one: GradeOne) -> None:
    assert grade_one(cell(cell="B2", expected=1200000, abs_tol=0.5)).passed
    result = grade_one(cell(cell="B2", expected=1300000, abs_tol=0.5))
    assert (result.passed, result.reason) == (
        False,
        "Expiring!B2: expected 1300000 ±1300, got 1200000",
    )


@pytest.mark.usefixtures("workbook")
def test_cell_by_labels(grade_one: GradeOne) -> None:
    assert grade_one(cell(row_label="C-104", column="Value", expected=1200000)).passed
    assert grade_one(cell(row_label="c 105", column="value", expected=2500000)).passed
    assert grade_one(cell(row_label="2024", column="Value", expected=7)).passed
    assert grade_one(cell(row_label="C-104", column="Counterparty", expected="ACME corp.")).passed
    assert grade_one(cell(row_label="C-104", column="Ends", expected="2027-03-05")).passed
    assert not grade_one(cell(row_label="C-105", column="Counterparty", expected="Acme")).passed


@pytest.mark.usefixtures("workbook")
def test_missing_labels_and_sheets_fail_with_reasons(grade_one: GradeOne) -> None:
    no_row = grade_one(cell(row_label="C-999", column="Value", expected=1))
    assert no_row.reason == "no row labelled 'C-999' in column A of sheet Expiring"
    no_column = grade_one(cell(row_label="C-104", column="Price", expected=1))
    assert no_column.reason == "no column headed 'Price' in row 1 of sheet Expiring"
    no_sheet = grade_one(cell(sheet="Renewals", cell="B2", expected=1))
    assert no_sheet.reason.startswith("no sheet 'Renewals' in output/summary.xlsx")
    empty = grade_one(cell(cell="D3", expected=1))
    assert (empty.passed, empty.reason) == (False, "Expiring!D3: cell is empty")


@pytest.mark.usefixtures("workbook")
def test_sheet_name_case_and_active_sheet(grade_one: GradeOne) -> None:
    assert grade_one(cell(sheet="expiring", cell="B2", expected=1200000)).passed
    assert not grade_one(cell(sheet=None, cell="B2", expected=1200000)).passed


@pytest.mark.usefixtures("workbook")
def test_formula_without_cached_value_fails(grade_one: GradeOne) -> None:
    result = grade_one(cell(cell="B6", expected=1200000))
    assert not result.passed
    assert result.reason == "Expiring!B6: formula '=B2+B5' without a cached value"


def test_formula_with_cached_value_uses_it(grade_one: GradeOne, workbook: Path) -> None:
    _add_cached_value(workbook, "xl/worksheets/sheet2.xml", "<f>B2+B5</f><v></v>", "1200000")
    assert grade_one(cell(cell="B6", expected=1200000)).passed
    assert not grade_one(cell(cell="B6", expected=5)).passed


def test_corrupt_workbook_fails_the_criterion(grade_one: GradeOne, workspace: Path) -> None:
    (workspace / PATH).write_bytes(b"this is not a zip file")
    result = grade_one(cell(cell="B2", expected=1))
    assert not result.passed
    assert result.reason.startswith("could not open output/summary.xlsx: BadZipFile:")


def test_missing_workbook_fails_the_criterion(grade_one: GradeOne) -> None:
    result = grade_one(cell(cell="B2", expected=1))
    assert (result.passed, result.reason) == (False, "output/summary.xlsx missing")


def _add_cached_value(path: Path, member: str, formula_xml: str, value: str) -> None:
    # openpyxl never writes cached results, so patch one in the way Excel stores it.
    with zipfile.ZipFile(path) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    xml = members[member].decode()
    assert formula_xml in xml
    patched = formula_xml.replace("<v></v>", f"<v>{value}</v>")
    members[member] = xml.replace(formula_xml, patched).encode()
    with zipfile.ZipFile(path, "w") as target:
        for name, data in members.items():
            target.writestr(name, data)
