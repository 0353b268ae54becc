"""Mail tools over the workspace mailbox: the `.eml` files under `mail/` (inbox, sent, ...).

A message is named by its path under `mail/`, e.g. `inbox/2025-11-02_revised-growth.eml`, as
listed by mail_list. Sending or replying writes a complete RFC 5322 message (Message-ID, Date,
threading headers, attachments) into `mail/sent/`; nothing leaves the sandbox. The sender is
the mailbox owner, recognised as the usual From of `mail/sent/`, else the usual To of the rest.
"""

from __future__ import annotations

import functools
import mimetypes
import re
from collections import Counter
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, make_msgid
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from bureau.tools import readers
from bureau.tools.core import (
    FailureKind,
    Overwrite,
    ToolFailure,
    ToolSet,
    Workspace,
    check_deadline,
    count,
)

TOOLS = ToolSet("mail", "mail_")
MAILBOX = "mail"
MessageArg = Annotated[
    str, Field(description="Message id as listed by mail_list, e.g. 'inbox/2025-11-02_x.eml'.")
]
FolderArg = Annotated[
    str | None, Field(description="Mail folder such as 'inbox' or 'sent'; omit for all.")
]
AddressList = Annotated[
    list[str], Field(description="Addresses, e.g. ['Ana Ruiz <ana@acme.example.com>'].")
]


def _mailbox(ws: Workspace) -> Path:
    box = ws.resolve(MAILBOX, must_exist=False)
    if not box.is_dir():
        raise ToolFailure(FailureKind.not_found, "this workspace has no mailbox (no mail/ folder)")
    return box


def _messages(ws: Workspace, folder: str | None) -> list[readers.MailMessage]:
    box = _mailbox(ws)
    top = box if folder is None else ws.folder(f"{MAILBOX}/{folder.strip('/')}")
    out = []
    for path in sorted(top.rglob("*.eml")):
        check_deadline()
        if not path.is_symlink():
            out.append(readers.read_mail(path))
    return sorted(out, key=_sort_date, reverse=True)


def _sort_date(m: readers.MailMessage) -> datetime:
    # A Date of -0000 parses without a zone; it is compared as UTC.
    if m.date is None:
        return datetime.min.replace(tzinfo=UTC)
    return m.date if m.date.tzinfo else m.date.replace(tzinfo=UTC)


def _mail_file(ws: Workspace, message: str) -> Path:
    name = message.strip().removeprefix("/")
    if not name.startswith(f"{MAILBOX}/"):
        name = f"{MAILBOX}/{name}"
    file = ws.file(name, (".eml",))
    if _mailbox(ws) not in file.parents:
        raise ToolFailure(FailureKind.invalid_argument, f"{message} is not a message in mail/")
    return file


def _id(ws: Workspace, m: readers.MailMessage) -> str:
    return ws.rel(m.path).removeprefix(f"{MAILBOX}/")


def _summary(ws: Workspace, m: readers.MailMessage) -> str:
    date = m.date.strftime("%Y-%m-%d %H:%M") if m.date else "(no date)"
    att = f"  [{len(m.attachments)} attachment{'s' if len(m.attachments) != 1 else ''}]"
    return f"{_id(ws, m)} | {date} | {m.sender} | {m.subject}{att if m.attachments else ''}"


@TOOLS.tool(read_only=True)
def mail_list(
    ws: Workspace,
    folder: FolderArg = None,
    offset: Annotated[int, Field(ge=0, description="Skip this many of the newest messages.")] = 0,
    limit: Annotated[int, Field(ge=1, le=500, description="Most messages to list.")] = 50,
) -> str:
    """List messages newest first: id | date | from | subject | attachments. Read one with
    mail_read using its id."""
    messages = _messages(ws, folder)
    folders = Counter(_id(ws, m).split("/")[0] if "/" in _id(ws, m) else "." for m in messages)
    window = messages[offset : offset + limit]
    per_folder = ", ".join(f"{f}: {n}" for f, n in sorted(folders.items()))
    head = f"{count(len(messages), 'message')} ({per_folder})"
    if offset + limit < len(messages):
        head += (
            f"; showing {offset + 1}-{offset + len(window)}, continue with offset={offset + limit}"
        )
    return "\n".join([head, *(_summary(ws, m) for m in window)])


@TOOLS.tool(read_only=True)
def mail_search(
    ws: Workspace,
    query: Annotated[str, Field(description="Words to find (case-insensitive, all must occur).")],
    field: Annotated[
        Literal["any", "from", "to", "subject", "body", "attachment"],
        Field(description="Where to look: one part of the message, or any."),
    ] = "any",
    folder: FolderArg = None,
    limit: Annotated[int, Field(ge=1, le=500, description="Most messages to list.")] = 50,
) -> str:
    """Search messages by sender, recipients (To and Cc), subject, body or attachment names;
    results are newest first."""
    words = query.lower().split()
    if not words:
        raise ToolFailure(FailureKind.invalid_argument, "the query is empty")
    hits = []
    for m in _messages(ws, folder):
        parts = {
            "from": m.sender,
            "to": f"{m.to} {m.cc}",
            "subject": m.subject,
            "body": m.body,
            "attachment": " ".join(a.filename for a in m.attachments),
        }
        haystack = " ".join(parts.values()) if field == "any" else parts[field]
        if all(w in haystack.lower() for w in words):
            hits.append(_summary(ws, m))
    if not hits:
        return f"no message matches {query!r} (field: {field})"
    more = f" (showing {limit})" if len(hits) > limit else ""
    return f"{count(len(hits), 'message')} match{more}:\n" + "\n".join(hits[:limit])


@TOOLS.tool(read_only=True)
def mail_read(ws: Workspace, message: MessageArg) -> str:
    """Read one message: headers, plain-text body (HTML is converted to text) and attachments
    (save them with mail_save_attachments to read them with the document tools)."""
    m = readers.read_mail(_mail_file(ws, message))
    lines = [f"id: {_id(ws, m)}", f"From: {m.sender}", f"To: {m.to}"]
    lines += [f"Cc: {m.cc}"] if m.cc else []
    lines += [f"Date: {m.date.isoformat() if m.date else '(none)'}", f"Subject: {m.subject}"]
    lines += [f"In-Reply-To: {m.in_reply_to}"] if m.in_reply_to else []
    for a in m.attachments:
        lines.append(f"Attachment: {a.filename} ({a.content_type}, {a.size:,} bytes)")
    return "\n".join([*lines, "", m.body or "(empty body)"])


@TOOLS.tool(read_only=False)
def mail_save_attachments(
    ws: Workspace,
    message: MessageArg,
    folder: Annotated[
        str | None,
        Field(description="Workspace folder to save into; default 'attachments/<message name>'."),
    ] = None,
    filename: Annotated[str | None, Field(description="Save only this attachment.")] = None,
    overwrite: Overwrite = False,
) -> str:
    """Save a message's attachments as workspace files, so the pdf_, sheet_, docx_ and slides_
    tools can read them."""
    file = _mail_file(ws, message)
    msg = readers.parse_eml_bytes(file)
    parts = [a for a in msg.iter_attachments() if filename in (None, a.get_filename())]
    if not parts:
        names = [a.get_filename() for a in msg.iter_attachments()]
        raise ToolFailure(
            FailureKind.not_found,
            f"no attachment {filename!r} in {message}; it has: {names}"
            if filename
            else f"{message} has no attachments",
        )
    dest = folder if folder is not None else f"attachments/{file.stem}"
    saved = []
    for part in parts:
        # The attachment's own name could hold a path; only its last component is used.
        name = Path(part.get_filename() or "attachment.bin").name or "attachment.bin"
        target = ws.target(f"{dest.rstrip('/')}/{name}", overwrite=overwrite)
        data = part.get_payload(decode=True) or b""
        assert isinstance(data, bytes)
        ws.atomic_save(target, functools.partial(Path.write_bytes, data=data))
        saved.append(f"{ws.rel(target)} ({len(data):,} bytes)")
    return f"saved {len(saved)} attachment{'s' if len(saved) != 1 else ''}:\n" + "\n".join(saved)


def _owner(ws: Workspace) -> str:
    """The mailbox owner's address, as 'Name <addr>'."""
    sent: Counter[str] = Counter()
    received: Counter[str] = Counter()
    for m in _messages(ws, None):
        if _id(ws, m).startswith("sent/"):
            sent[m.sender] += 1
        else:
            for name, addr in getaddresses([m.to]):
                received[f"{name} <{addr}>" if name else addr] += 1
    for counter in (sent, received):
        if counter:
            return counter.most_common(1)[0][0]
    return "me@localhost"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:50] or "message"


def _write_sent(
    ws: Workspace,
    *,
    to: list[str],
    cc: list[str],
    subject: str,
    body: str,
    attachments: list[str],
    in_reply_to: str = "",
    references: str = "",
) -> str:
    if not to:
        raise ToolFailure(FailureKind.invalid_argument, "a message needs at least one recipient")
    sender = _owner(ws)
    now = datetime.now(UTC)
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    if cc:
        msg["Cc"] = ", ".join(cc)
    msg["Subject"] = subject
    msg["Date"] = format_datetime(now)
    domain = sender.rsplit("@", 1)[-1].strip(">") if "@" in sender else "localhost"
    msg["Message-ID"] = make_msgid(domain=domain)
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        msg["References"] = f"{references} {in_reply_to}".strip()
    msg.set_content(body)
    for path in attachments:
        file = ws.file(path)
        ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        maintype, subtype = ctype.split("/", 1)
        msg.add_attachment(
            file.read_bytes(), maintype=maintype, subtype=subtype, filename=file.name
        )
    stem = f"{MAILBOX}/sent/{now:%Y-%m-%d}_{_slug(subject)}"
    target = ws.resolve(f"{stem}.eml", must_exist=False)
    n = 2
    while target.exists():
        target = ws.resolve(f"{stem}-{n}.eml", must_exist=False)
        n += 1
    data = bytes(msg)
    ws.atomic_save(target, lambda tmp: tmp.write_bytes(data))
    n_att = len(attachments)
    extra = f" with {n_att} attachment{'s' if n_att != 1 else ''}" if attachments else ""
    return (
        f"sent {subject!r} from {sender} to {', '.join(to)}{' cc ' + ', '.join(cc) if cc else ''}"
        f"{extra}; saved as {ws.rel(target)}"
    )


@TOOLS.tool(read_only=False)
def mail_send(
    ws: Workspace,
    to: AddressList,
    subject: Annotated[str, Field(description="Subject line.")],
    body: Annotated[str, Field(description="Plain-text body.")],
    cc: Annotated[list[str] | None, Field(description="Cc addresses.")] = None,
    attachments: Annotated[
        list[str] | None, Field(description="Workspace paths of files to attach.")
    ] = None,
) -> str:
    """Send a new message: it is written to mail/sent/ as a complete .eml file."""
    return _write_sent(
        ws, to=to, cc=cc or [], subject=subject, body=body, attachments=attachments or []
    )


@TOOLS.tool(read_only=False)
def mail_reply(
    ws: Workspace,
    message: MessageArg,
    body: Annotated[str, Field(description="Plain-text reply; the original is quoted below.")],
    reply_all: Annotated[bool, Field(description="Also reply to the other recipients.")] = False,
    attachments: Annotated[
        list[str] | None, Field(description="Workspace paths of files to attach.")
    ] = None,
) -> str:
    """Reply to a message (threaded with In-Reply-To/References, subject 'Re: ...', the
    original quoted); written to mail/sent/."""
    original_file = _mail_file(ws, message)
    original = readers.read_mail(original_file)
    raw = readers.parse_eml_bytes(original_file)
    owner_addr = getaddresses([_owner(ws)])[0][1].lower()
    to = [str(raw["Reply-To"] or original.sender)]
    cc: list[str] = []
    if reply_all:
        for name, addr in getaddresses([original.to, original.cc]):
            if addr and addr.lower() not in {owner_addr, getaddresses(to)[0][1].lower()}:
                cc.append(f"{name} <{addr}>" if name else addr)
    subject = original.subject
    if not subject.lower().startswith("re:"):
        subject = f"Re: {subject}"
    when = original.date.strftime("%a, %d %b %Y %H:%M") if original.date else "an earlier date"
    quoted = "\n".join(f"> {line}" for line in original.body.splitlines())
    full_body = f"{body.rstrip()}\n\nOn {when}, {original.sender} wrote:\n{quoted}\n"
    return _write_sent(
        ws,
        to=to,
        cc=cc,
        subject=subject,
        body=full_body,
        attachments=attachments or [],
        in_reply_to=original.message_id,
        references=str(raw["References"] or ""),
    )


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["mail"])
