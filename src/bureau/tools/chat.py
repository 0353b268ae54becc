"""Chat tools over the workspace's channels: `chat/<name>.json` files.

A channel file holds `{"channel", "members", "messages": [{"ts", "time", "user", "text",
"thread_ts"?}]}`. A message's `ts` is its id; a reply carries the `ts` of the message that
started its thread in `thread_ts`. Posting appends to the file in the same format, so the
verifier and later reads see the post like any other message.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from bureau.tools.core import (
    FailureKind,
    ToolFailure,
    ToolSet,
    Workspace,
    check_deadline,
    count,
)

TOOLS = ToolSet("chat", "chat_")
CHAT_DIR = "chat"
ChannelArg = Annotated[str, Field(description="Channel name, e.g. '#legal-ops' or 'legal-ops'.")]
Message = dict[str, Any]


def _channel_files(ws: Workspace) -> dict[str, Path]:
    folder = ws.resolve(CHAT_DIR, must_exist=False)
    if not folder.is_dir():
        raise ToolFailure(FailureKind.not_found, "this workspace has no chat (no chat/ folder)")
    files: dict[str, Path] = {}
    for path in sorted(folder.glob("*.json")):
        if not path.is_symlink():
            files[_load(path).get("channel", path.stem).lstrip("#")] = path
    return files


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolFailure(FailureKind.unreadable_file, f"{path.name} is not valid JSON") from exc
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ToolFailure(FailureKind.unreadable_file, f"{path.name} is not a chat channel file")
    return data


def _channel(ws: Workspace, channel: str) -> tuple[Path, dict[str, Any]]:
    files = _channel_files(ws)
    key = channel.strip().lstrip("#").removesuffix(".json")
    path = files.get(key) or next((p for p in files.values() if p.stem == key), None)
    if path is None:
        raise ToolFailure(
            FailureKind.not_found,
            f"no channel {channel!r}; channels: {', '.join('#' + c for c in files) or 'none'}",
        )
    return path, _load(path)


def _name(data: dict[str, Any], path: Path) -> str:
    return "#" + str(data.get("channel", path.stem)).lstrip("#")


def _is_reply(m: Message) -> bool:
    return bool(m.get("thread_ts")) and m.get("thread_ts") != m.get("ts")


def _line(m: Message, replies: int = 0) -> str:
    when = str(m.get("time", ""))[:16].replace("T", " ")
    extra = (
        f"  ({replies} repl{'ies' if replies != 1 else 'y'}; thread_ts={m['ts']})"
        if replies
        else ""
    )
    return f"[{m.get('ts')}] {when} {m.get('user', '?')}: {m.get('text', '')}{extra}"


@TOOLS.tool(read_only=True)
def chat_list_channels(ws: Workspace) -> str:
    """List the chat channels with their members, message counts and latest activity."""
    files = _channel_files(ws)
    if not files:
        return "the chat/ folder has no channels"
    lines = [count(len(files), "channel")]
    for path in files.values():
        data = _load(path)
        messages = data["messages"]
        threads = sum(
            1
            for m in messages
            if not _is_reply(m)
            and any(r.get("thread_ts") == m.get("ts") for r in messages if _is_reply(r))
        )
        last = max((str(m.get("time", "")) for m in messages), default="")[:16].replace("T", " ")
        lines.append(
            f"- {_name(data, path)}: {count(len(messages), 'message')}, "
            f"{count(threads, 'thread')}, "
            f"last {last or '-'}; members: {', '.join(data.get('members', [])) or '(not listed)'}"
        )
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def chat_read(
    ws: Workspace,
    channel: ChannelArg,
    include_replies: Annotated[
        bool, Field(description="Show thread replies indented under their message.")
    ] = False,
    offset: Annotated[int, Field(ge=0, description="Skip this many top-level messages.")] = 0,
    limit: Annotated[
        int, Field(ge=1, le=1000, description="Most top-level messages to show.")
    ] = 100,
) -> str:
    """Read a channel's history, oldest first: '[ts] time user: text'. Messages that started a
    thread show their reply count; read a thread with chat_read_thread or pass
    include_replies=true."""
    path, data = _channel(ws, channel)
    messages = data["messages"]
    replies: dict[str, list[Message]] = {}
    for m in messages:
        if _is_reply(m):
            replies.setdefault(str(m["thread_ts"]), []).append(m)
    top = [m for m in messages if not _is_reply(m)]
    window = top[offset : offset + limit]
    n_replies = count(len(messages) - len(top), "thread reply", "thread replies")
    head = f"{_name(data, path)}: {count(len(top), 'message')} ({n_replies})"
    if offset + limit < len(top):
        head += (
            f"; showing {offset + 1}-{offset + len(window)}, continue with offset={offset + limit}"
        )
    lines = [head]
    for m in window:
        thread = replies.get(str(m.get("ts")), [])
        lines.append(_line(m, len(thread)))
        if include_replies:
            lines += ["    " + _line(r) for r in thread]
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def chat_read_thread(
    ws: Workspace,
    channel: ChannelArg,
    thread_ts: Annotated[str, Field(description="The ts of the message that started the thread.")],
) -> str:
    """Read one thread: the message that started it, then its replies in order."""
    path, data = _channel(ws, channel)
    messages = data["messages"]
    parent = next((m for m in messages if str(m.get("ts")) == thread_ts), None)
    if parent is None:
        raise ToolFailure(FailureKind.not_found, f"no message with ts {thread_ts} in {channel}")
    thread = [m for m in messages if _is_reply(m) and str(m["thread_ts"]) == thread_ts]
    count = f"{len(thread)} repl{'ies' if len(thread) != 1 else 'y'}"
    lines = [f"thread in {_name(data, path)} ({count})", _line(parent)]
    return "\n".join(lines + ["    " + _line(r) for r in thread])


@TOOLS.tool(read_only=True)
def chat_search(
    ws: Workspace,
    query: Annotated[str, Field(description="Words to find in messages (case-insensitive).")],
    channel: Annotated[str | None, Field(description="Only this channel; omit for all.")] = None,
    user: Annotated[str | None, Field(description="Only messages by this user.")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="Most messages to list.")] = 100,
) -> str:
    """Search messages across channels (or one channel), oldest first, each with its channel,
    ts (use it as thread_ts to read or reply to its thread) and author."""
    words = query.lower().split()
    targets = (
        [_channel(ws, channel)] if channel else [(p, _load(p)) for p in _channel_files(ws).values()]
    )
    hits = []
    for path, data in targets:
        check_deadline()
        for m in data["messages"]:
            if user and str(m.get("user", "")).lower() != user.lower():
                continue
            if all(w in str(m.get("text", "")).lower() for w in words):
                where = f" (reply in thread {m['thread_ts']})" if _is_reply(m) else ""
                hits.append(f"{_name(data, path)} {_line(m)}{where}")
    if not hits:
        return f"no message matches {query!r}"
    more = f" (showing {limit})" if len(hits) > limit else ""
    return f"{count(len(hits), 'message')} match{more}:\n" + "\n".join(hits[:limit])


@TOOLS.tool(read_only=False)
def chat_post(
    ws: Workspace,
    channel: ChannelArg,
    text: Annotated[str, Field(min_length=1, description="The message.")],
    thread_ts: Annotated[
        str | None, Field(description="Reply in the thread of the message with this ts.")
    ] = None,
    user: Annotated[str, Field(description="Name to post as.")] = "agent",
) -> str:
    """Post a message to a channel, or a reply to a thread (pass the thread's ts)."""
    path, data = _channel(ws, channel)
    messages: list[Message] = data["messages"]
    if thread_ts is not None and not any(str(m.get("ts")) == thread_ts for m in messages):
        raise ToolFailure(FailureKind.not_found, f"no message with ts {thread_ts} in {channel}")
    last = max((float(m["ts"]) for m in messages if "ts" in m), default=0.0)
    ts = f"{max(time.time(), last + 1e-6):.6f}"
    post: Message = {
        "ts": ts,
        "time": datetime.now().isoformat(timespec="seconds"),
        "user": user,
        "text": text,
    }
    if thread_ts is not None:
        post["thread_ts"] = thread_ts
    messages.append(post)
    body = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    ws.atomic_save(path, lambda tmp: tmp.write_text(body, encoding="utf-8"))
    where = f"thread {thread_ts} of {_name(data, path)}" if thread_ts else _name(data, path)
    return (
        f"posted to {where} as {user!r} (ts {ts}); {ws.rel(path)} now has {len(messages)} messages"
    )


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["chat"])
