"""Opening generated files the way an agent would, for the world tests."""

from __future__ import annotations

import json
from email import policy
from email.parser import BytesParser
from pathlib import Path

import docx
import openpyxl
import pdfplumber
from pptx import Presentation


def open_with_library(path: Path) -> None:
    """Open `path` with its library and read something; raises if it is not what it claims."""
    suffix = path.suffix
    if suffix == ".pdf":
        with pdfplumber.open(path) as pdf:
            assert pdf.pages and pdf.pages[0].extract_text()
    elif suffix == ".xlsx":
        assert openpyxl.load_workbook(path, data_only=True).sheetnames
    elif suffix == ".docx":
        assert docx.Document(str(path)).paragraphs
    elif suffix == ".pptx":
        assert len(Presentation(str(path)).slides) > 0
    elif suffix == ".eml":
        with path.open("rb") as fh:
            msg = BytesParser(policy=policy.default).parse(fh)
        assert msg["From"] and msg["Date"] and msg["Subject"]
        assert msg.get_body(preferencelist=("plain",)) is not None
    elif suffix == ".json":
        assert json.loads(path.read_text(encoding="utf-8"))["messages"]
    else:
        raise AssertionError(f"unexpected file type {path}")
