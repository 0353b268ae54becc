"""Emails as .eml files (with attachments) and chat channels as JSON."""

from __future__ import annotations

import hashlib
import json
import mimetypes
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path


@dataclass
class Email:
    sender: str  # "Name <addr>"
    to: list[str]
    subject: str
    body: str
    sent: datetime
    cc: list[str] = field(default_factory=list)
    attachments: list[Path] = field(default_factory=list)
    in_reply_to: str = ""
    message_id: str = ""


def write_eml(path: Path, mail: Email, *, domain: str) -> str:
    """Write one message; returns its Message-ID so replies can thread to it."""
    msg = EmailMessage()
    msg["From"] = mail.sender
    msg["To"] = ", ".join(mail.to)
    if mail.cc:
        msg["Cc"] = ", ".join(mail.cc)
    msg["Subject"] = mail.subject
    msg["Date"] = format_datetime(mail.sent)
    # Message-ID and MIME boundary derive from the content: the same world, the same bytes.
    digest = hashlib.sha256(f"{path.name}|{mail.subject}|{mail.sent}|{mail.body}".encode())
    message_id = mail.message_id or f"<{path.stem}.{digest.hexdigest()[:16]}@{domain}>"
    msg["Message-ID"] = message_id
    if mail.in_reply_to:
        msg["In-Reply-To"] = mail.in_reply_to
        msg["References"] = mail.in_reply_to
    msg.set_content(mail.body)
    for attachment in mail.attachments:
        ctype = mimetypes.guess_type(attachment.name)[0] or "application/octet-stream"
        maintype, subtype = ctype.split("/", 1)
        msg.add_attachment(
            attachment.read_bytes(), maintype=maintype, subtype=subtype, filename=attachment.name
        )
    if msg.is_multipart():
        msg.set_boundary(f"===============bureau-{digest.hexdigest()[16:40]}==")
    path.write_bytes(bytes(msg))
    return message_id


@dataclass
class ChatMessage:
    user: str
    text: str
    ts: datetime
    thread_of: int | None = None  # index of the parent message in the channel


def write_chat(path: Path, channel: str, members: list[str], messages: list[ChatMessage]) -> None:
    ordered = sorted(range(len(messages)), key=lambda i: messages[i].ts)
    ids = {i: f"{messages[i].ts.timestamp():.6f}" for i in ordered}
    out = []
    for i in ordered:
        m = messages[i]
        entry: dict[str, object] = {"ts": ids[i], "time": m.ts.isoformat(), "user": m.user}
        entry["text"] = m.text
        if m.thread_of is not None:
            entry["thread_ts"] = ids[m.thread_of]
        out.append(entry)
    doc = {"channel": channel, "members": members, "messages": out}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
