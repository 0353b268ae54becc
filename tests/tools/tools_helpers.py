"""A fixture workspace drawn with the world generator's renderers, for the tool tests.

It holds one file of every kind the tools read, each with content a test can check: a
two-column PDF with a watermark and a table that runs over two pages, a workbook whose formulas
carry cached values, a deck with a table and a chart, a memo, a mailbox with an attachment, a
chat channel with a thread, text files, and symlinks that point out of the workspace.
"""

from __future__ import annotations

import os
import stat
import sys
from datetime import date, datetime
from pathlib import Path

from bureau.worlds.render.calendar import Attendee, CalendarEvent, Moved, write_ics
from bureau.worlds.render.documents import DocSpec, write_docx
from bureau.worlds.render.messages import ChatMessage, Email, write_chat, write_eml
from bureau.worlds.render.pdf import PdfDoc
from bureau.worlds.render.sheets import Formula, WorkbookSpec, write_workbook
from bureau.worlds.render.slides import DeckSpec, write_pptx

LEFT = "Alpha column text says the harbour project starts in spring and runs two years."
RIGHT = "Beta column text says the mountain project is cancelled after review by the board."
NOTICE = (
    "Either party may terminate this Agreement for convenience by giving not less than "
    "90 days' written notice to the other party, and at once for a material breach."
)
OWNER = "Dana Lee <dana.lee@acme.example.com>"


def _pdfs(root: Path) -> None:
    doc = PdfDoc(root / "reports" / "review.pdf", "Portfolio review", watermark="DRAFT")
    doc.para("Summary line above the columns.")
    doc.two_columns([LEFT, RIGHT])
    doc.para("Full width line below the columns.")
    rows = [[f"P-{i:03d}", f"Project {i}", str(1000 + i)] for i in range(1, 61)]
    doc.table(["Code", "Name", "Budget"], rows)
    doc.save()
    plain = PdfDoc(root / "reports" / "contract.pdf", "Service Agreement")
    plain.heading("4. Termination")
    plain.para(NOTICE)
    plain.save()


def _workbook(root: Path) -> None:
    spec = WorkbookSpec(title="Budget")
    budget = spec.sheet("Budget")
    budget.append(["Item", "Amount", "Share"])
    budget.append(["Rent", 1200, 0.4])
    budget.append(["Staff", 1800, 0.6])
    budget.append(["Total", Formula("=SUM(B2:B3)", 3000), Formula("=SUM(C2:C3)", 1.0)])
    budget.number_formats[3] = "0.0%"
    summary = spec.sheet("Summary")
    summary.append(["Measure", "Value"])
    summary.append(["Total", Formula("=Budget!B4", 3000)])
    spec.names["GrandTotal"] = "Summary!$B$2"
    write_workbook(root / "finance" / "budget.xlsx", spec)


def _deck(root: Path) -> None:
    deck = DeckSpec("Quarterly review", subtitle="Q3 2025")
    deck.add("Highlights", ["Revenue up 12%", "Two new clients"], notes="Mention the harbour deal")
    deck.add("Regions", table=(["Region", "Revenue"], [["North", "4.2"], ["South", "3.1"]]))
    deck.add("Mix", chart=("bar", ["2024", "2025"], {"Revenue": [7.0, 7.3]}))
    write_pptx(root / "decks" / "review.pptx", deck)


def _memo(root: Path) -> None:
    spec = DocSpec("Board memo")
    spec.h1("Decision")
    spec.p("The board approved the harbour project on 2025-03-04.")
    spec.bullet("Budget capped at USD 2,000,000")
    spec.table(["Owner", "Task"], [["Dana", "Plan"], ["Eli", "Review"]])
    write_docx(root / "docs" / "memo.docx", spec)


def _mail(root: Path) -> None:
    inbox, sent = root / "mail" / "inbox", root / "mail" / "sent"
    inbox.mkdir(parents=True)
    sent.mkdir(parents=True)
    write_eml(
        inbox / "2025-03-01_contract.eml",
        Email(
            "Eli Park <eli.park@vendor.example.com>",
            [OWNER],
            "Signed contract",
            "Hi Dana,\n\nThe signed contract is attached. Notice is 90 days.\n\nEli",
            datetime(2025, 3, 1, 9, 30),
            cc=["Ann Roe <ann.roe@acme.example.com>"],
            attachments=[root / "reports" / "contract.pdf"],
        ),
        domain="vendor.example.com",
    )
    write_eml(
        inbox / "2025-03-05_lunch.eml",
        Email(
            "Ann Roe <ann.roe@acme.example.com>",
            [OWNER],
            "Lunch",
            "Lunch on Friday?",
            datetime(2025, 3, 5, 12, 0),
        ),
        domain="acme.example.com",
    )
    write_eml(
        sent / "2025-02-20_request.eml",
        Email(
            OWNER,
            ["Eli Park <eli.park@vendor.example.com>"],
            "Contract request",
            "Please send the contract.",
            datetime(2025, 2, 20, 8, 0),
        ),
        domain="acme.example.com",
    )


def _chat(root: Path) -> None:
    (root / "chat").mkdir()
    kickoff = "Kickoff for the harbour project is Monday."
    messages = [
        ChatMessage("Dana Lee", kickoff, datetime(2025, 3, 1, 9)),
        ChatMessage("Eli Park", "Who owns the budget?", datetime(2025, 3, 2, 10)),
        ChatMessage("Dana Lee", "Ann owns the budget.", datetime(2025, 3, 2, 11), thread_of=1),
    ]
    write_chat(root / "chat" / "general.json", "#general", ["Dana Lee", "Eli Park"], messages)


DANA = Attendee("Dana Lee", "dana.lee@acme.example.com")
ELI = Attendee("Eli Park", "eli.park@vendor.example.com")
ANN_DECLINED = Attendee("Ann Roe", "ann.roe@acme.example.com", "DECLINED")


def _calendar(root: Path) -> None:
    """Dana's calendar (New York) and Eli's (London), in March 2025: US summer time starts on
    the 9th, the UK's on the 30th, so London is 4 hours ahead in between, 5 before."""
    (root / "calendar").mkdir()
    sync = CalendarEvent(
        "sync@acme",
        "Weekly deal sync",
        datetime(2025, 3, 3, 9),
        datetime(2025, 3, 3, 9, 30),
        "America/New_York",
        DANA,
        [ELI, ANN_DECLINED],
        "Room 4",
        repeat={"freq": "weekly", "count": 6},
        skipped=[datetime(2025, 3, 17, 9)],
        overrides=[
            Moved(
                datetime(2025, 3, 10, 9), datetime(2025, 3, 11, 14), datetime(2025, 3, 11, 14, 30)
            )
        ],
        sequence=1,
    )
    one_on_one = CalendarEvent(
        "1on1@acme",
        "1:1 Dana / Eli",
        datetime(2025, 3, 5, 16),
        datetime(2025, 3, 5, 16, 30),
        "America/New_York",
        DANA,
        [ELI],
        repeat={"freq": "weekly", "count": 4},
        overrides=[Moved(datetime(2025, 3, 19, 16))],
    )
    events = [
        sync,
        one_on_one,
        CalendarEvent(
            "prep@acme",
            "Board prep",
            datetime(2025, 3, 12, 10),
            datetime(2025, 3, 12, 11),
            "America/New_York",
            DANA,
            [Attendee("Ann Roe", "ann.roe@acme.example.com")],
            description="Review the Q1 board pack.",
        ),
        CalendarEvent(
            "counsel@acme",
            "London call with counsel",
            datetime(2025, 3, 13, 15),
            datetime(2025, 3, 13, 16),
            "Europe/London",
            DANA,
            [ELI],
        ),
        CalendarEvent("offsite@acme", "Offsite", date(2025, 3, 20), date(2025, 3, 22)),
    ]
    write_ics(root / "calendar" / "dana-lee.ics", "Dana Lee", "America/New_York", events)
    vendor = CalendarEvent(
        "review@vendor",
        "Vendor review",
        datetime(2025, 3, 11, 13),
        datetime(2025, 3, 11, 14),
        "Europe/London",
        ELI,
    )
    counsel = events[3]  # an invitation: on the calendars of both
    write_ics(root / "calendar" / "eli-park.ics", "Eli Park", "Europe/London", [vendor, counsel])


def build_workspace(root: Path) -> None:
    """Fill `root` (which must exist) with the fixture files."""
    for folder in ("reports", "finance", "decks", "docs", "notes", "data"):
        (root / folder).mkdir()
    _pdfs(root)
    _workbook(root)
    _deck(root)
    _memo(root)
    _mail(root)
    _chat(root)
    _calendar(root)
    (root / "notes" / "readme.txt").write_text("Project notes\nquarterly budget review\nend\n")
    (root / "notes" / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 2001)))
    (root / "data" / "blob.bin").write_bytes(b"\x00\x01binary\x00" * 10)
    (root / "link_out").symlink_to("/etc")
    (root / "notes" / "passwd_link").symlink_to("/etc/passwd")
    (root / "notes" / "inside_link.txt").symlink_to("readme.txt")


def reachable_by_others(path: str) -> bool:
    """Whether a process of another uid can reach `path` (every parent searchable)."""
    real = Path(os.path.realpath(path))
    return all(p.stat().st_mode & stat.S_IXOTH for p in real.parents)


def code_python() -> str:
    """The interpreter code runs with in tests: the server's own when the code uid can reach
    it, else the system one (the venv may live under a private home)."""
    if os.geteuid() != 0 or reachable_by_others(sys.executable):
        return sys.executable
    return "/usr/bin/python3"
