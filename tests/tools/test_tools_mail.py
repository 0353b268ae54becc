"""Mail tools over the fixture mailbox: list, search, read, attachments, send and reply."""

from __future__ import annotations

from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

import pytest

from bureau.tools import mail
from bureau.tools.core import FailureKind, ToolFailure, Workspace

CONTRACT = "inbox/2025-03-01_contract.eml"


def test_list_newest_first(ws: Workspace) -> None:
    assert mail.mail_list(ws).splitlines() == [
        "3 messages (inbox: 2, sent: 1)",
        "inbox/2025-03-05_lunch.eml | 2025-03-05 12:00 | Ann Roe <ann.roe@acme.example.com>"
        " | Lunch",
        "inbox/2025-03-01_contract.eml | 2025-03-01 09:30 | Eli Park <eli.park@vendor.example.com>"
        " | Signed contract  [1 attachment]",
        "sent/2025-02-20_request.eml | 2025-02-20 08:00 | Dana Lee <dana.lee@acme.example.com>"
        " | Contract request",
    ]
    assert mail.mail_list(ws, folder="sent", limit=1).startswith("1 message (sent: 1)")


def test_search_by_field(ws: Workspace) -> None:
    assert mail.mail_search(ws, "contract", field="subject").startswith("2 messages match")
    assert mail.mail_search(ws, "ann.roe", field="to").startswith("1 message match")
    assert "contract.eml" in mail.mail_search(ws, "contract.pdf", field="attachment")
    assert mail.mail_search(ws, "90 days", field="body").count("\n") == 1
    assert mail.mail_search(ws, "zebra").startswith("no message matches")


def test_read_message(ws: Workspace) -> None:
    out = mail.mail_read(ws, CONTRACT)
    assert out.splitlines()[:7] == [
        "id: inbox/2025-03-01_contract.eml",
        "From: Eli Park <eli.park@vendor.example.com>",
        "To: Dana Lee <dana.lee@acme.example.com>",
        "Cc: Ann Roe <ann.roe@acme.example.com>",
        "Date: 2025-03-01T09:30:00",
        "Subject: Signed contract",
        "Attachment: contract.pdf (application/pdf, 1,7" + out.split("1,7", 1)[1].split("\n")[0],
    ]
    assert out.endswith("The signed contract is attached. Notice is 90 days.\n\nEli")
    assert mail.mail_read(ws, f"mail/{CONTRACT}") == out


def test_message_ids_stay_in_the_mailbox(ws: Workspace) -> None:
    with pytest.raises(ToolFailure) as info:
        mail.mail_read(ws, "../notes/readme.txt")
    assert info.value.kind == FailureKind.wrong_file_type
    (ws.real_root() / "notes" / "x.eml").write_bytes(b"Subject: x\n\nbody")
    with pytest.raises(ToolFailure, match="is not a message in mail/"):
        mail.mail_read(ws, "../notes/x.eml")


def test_save_attachments(ws: Workspace, ws_root: Path) -> None:
    out = mail.mail_save_attachments(ws, CONTRACT)
    assert out.startswith("saved 1 attachment:\nattachments/2025-03-01_contract/contract.pdf (")
    saved = ws_root / "attachments" / "2025-03-01_contract" / "contract.pdf"
    assert saved.read_bytes() == (ws_root / "reports" / "contract.pdf").read_bytes()
    with pytest.raises(ToolFailure) as again:
        mail.mail_save_attachments(ws, CONTRACT)
    assert again.value.kind == FailureKind.already_exists
    with pytest.raises(ToolFailure, match=r"no attachment 'x\.pdf'"):
        mail.mail_save_attachments(ws, CONTRACT, filename="x.pdf")


def _parse(path: Path) -> EmailMessage:
    with path.open("rb") as fh:
        msg = BytesParser(policy=policy.default).parse(fh)
    assert isinstance(msg, EmailMessage)
    return msg


def test_send_writes_a_complete_eml(ws: Workspace, ws_root: Path) -> None:
    out = mail.mail_send(
        ws,
        ["Eli Park <eli.park@vendor.example.com>"],
        "Budget 2026",
        "See attached.",
        cc=["ann.roe@acme.example.com"],
        attachments=["finance/budget.xlsx"],
    )
    assert out.startswith(
        "sent 'Budget 2026' from Dana Lee <dana.lee@acme.example.com> to Eli Park "
        "<eli.park@vendor.example.com> cc ann.roe@acme.example.com with 1 attachment; saved as "
        "mail/sent/"
    )
    (sent,) = (ws_root / "mail" / "sent").glob("*_budget-2026.eml")
    msg = _parse(sent)
    assert msg["From"] == "Dana Lee <dana.lee@acme.example.com>"
    assert msg["Message-ID"].endswith("@acme.example.com>")
    names = [a.get_filename() for a in msg.iter_attachments()]
    assert names == ["budget.xlsx"]
    assert "sent/" in mail.mail_list(ws, folder="sent").splitlines()[1]


def test_reply_threads_and_quotes(ws: Workspace, ws_root: Path) -> None:
    out = mail.mail_reply(ws, CONTRACT, "Thanks, received.", reply_all=True)
    assert "to Eli Park <eli.park@vendor.example.com> cc Ann Roe <ann.roe@acme.example.com>" in out
    (sent,) = (ws_root / "mail" / "sent").glob("*_re-signed-contract.eml")
    msg = _parse(sent)
    original = _parse(ws_root / "mail" / CONTRACT)
    assert msg["Subject"] == "Re: Signed contract"
    assert msg["In-Reply-To"] == original["Message-ID"]
    part = msg.get_body()
    assert part is not None
    body = part.get_content()
    assert body.startswith("Thanks, received.\n\nOn Sat, 01 Mar 2025 09:30, Eli Park")
    assert "> The signed contract is attached. Notice is 90 days." in body
