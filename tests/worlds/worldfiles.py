"""Opening generated files the way an agent would, for the world tests."""

from __future__ import annotations

import csv
import json
from email import policy
from email.parser import BytesParser
from pathlib import Path

import docx
import icalendar
import openpyxl
import pdfplumber
import recurring_ical_events
from pptx import Presentation

STANDARD_WORLD_SUFFIXES = frozenset(
    {".pdf", ".xlsx", ".docx", ".pptx", ".eml", ".json", ".ics", ".csv", ".md", ".txt"}
)
"""The kinds of file a crowded standard world holds."""


def open_with_library(path: Path) -> None:
    """Open `path` with its library and read something; raises if it is not what it claims."""
    suffix = path.suffix
    if suffix == ".pdf":
        with pdfplumber.open(path) as pdf:
            first = pdf.pages[0]
            scanned = "scanned" in str(pdf.metadata.get("Subject", ""))
            assert first.extract_text() or (scanned and first.images)  # a scan: its page image
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
    elif suffix == ".ics":
        cal = icalendar.Calendar.from_ical(path.read_bytes())
        events = cal.walk("VEVENT")
        assert events and all(e.get("DTSTART") and e.get("UID") for e in events)
        # Every event expands to at least one occurrence over the years the calendar spans,
        # recurring meetings included, time zones resolved.
        years = [e.decoded("DTSTART").year for e in events]
        expanded = recurring_ical_events.of(cal).between((min(years), 1, 1), (max(years) + 1, 1, 1))
        assert {str(e["UID"]) for e in expanded} >= {str(e["UID"]) for e in events}
    elif suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        assert len(rows) > 1 and all(len(r) == len(rows[0]) for r in rows)
    elif suffix in (".md", ".txt"):
        assert path.read_text(encoding="utf-8").strip()
    else:
        raise AssertionError(f"unexpected file type {path}")


def templates_asked(out: Path) -> set[str]:
    """The templates a built split's tasks ask, a brief's items included (their params)."""
    asked = set()
    for task in json.loads((out / "bureau-dataset.json").read_text())["tasks"]:
        asked.add(task["template"])
        task_dir = out / task["path"]
        parts = (
            [task_dir] if not task.get("steps") else [task_dir / "steps" / s for s in task["steps"]]
        )
        for part in parts:
            params = json.loads((part / "solution" / "params.json").read_text())
            asked.update(item["template"] for item in params.get("items", []))
    return asked
