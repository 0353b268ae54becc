"""Chat tools over the fixture channel: list, history, threads, search and post."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bureau.tools import chat
from bureau.tools.core import FailureKind, ToolFailure, Workspace


def _thread_ts(ws_root: Path) -> str:
    data = json.loads((ws_root / "chat" / "general.json").read_text())
    return str(data["messages"][1]["ts"])


def test_list_channels(ws: Workspace) -> None:
    assert chat.chat_list_channels(ws).splitlines() == [
        "1 channel",
        "- #general: 3 messages, 1 thread, last 2025-03-02 11:00; members: Dana Lee, Eli Park",
    ]


def test_read_history_and_thread(ws: Workspace, ws_root: Path) -> None:
    ts = _thread_ts(ws_root)
    out = chat.chat_read(ws, "#general")
    assert out.splitlines()[0] == "#general: 2 messages (1 thread reply)"
    assert f"Eli Park: Who owns the budget?  (1 reply; thread_ts={ts})" in out
    assert "Ann owns the budget." not in out
    inline = chat.chat_read(ws, "general", include_replies=True)
    assert "\n    [" in inline and "Dana Lee: Ann owns the budget." in inline
    thread = chat.chat_read_thread(ws, "general", ts).splitlines()
    assert thread[0] == "thread in #general (1 reply)"
    assert thread[2].startswith("    [") and thread[2].endswith("Dana Lee: Ann owns the budget.")
    with pytest.raises(ToolFailure) as info:
        chat.chat_read(ws, "#random")
    assert str(info.value) == "not_found: no channel '#random'; channels: #general"


def test_search(ws: Workspace) -> None:
    out = chat.chat_search(ws, "budget")
    assert out.startswith("2 messages match")
    assert "(reply in thread" in out
    assert chat.chat_search(ws, "budget", user="eli park").startswith("1 message match")


def test_post_and_reply_append_to_the_file(ws: Workspace, ws_root: Path) -> None:
    ts = _thread_ts(ws_root)
    out = chat.chat_post(ws, "general", "Budget is approved.", user="Dana Lee")
    assert out.startswith("posted to #general as 'Dana Lee' (ts ")
    assert out.endswith("chat/general.json now has 4 messages")
    reply = chat.chat_post(ws, "#general", "Thanks!", thread_ts=ts)
    assert reply.startswith(f"posted to thread {ts} of #general as 'agent'")
    data = json.loads((ws_root / "chat" / "general.json").read_text())
    assert data["members"] == ["Dana Lee", "Eli Park"]
    assert [m["text"] for m in data["messages"][-2:]] == ["Budget is approved.", "Thanks!"]
    assert data["messages"][-1]["thread_ts"] == ts
    assert float(data["messages"][-1]["ts"]) > float(data["messages"][-2]["ts"])
    with pytest.raises(ToolFailure) as info:
        chat.chat_post(ws, "general", "x", thread_ts="1.0")
    assert info.value.kind == FailureKind.not_found
