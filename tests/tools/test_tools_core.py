"""The rules every tool shares: paths stay in the workspace, results are cut with a note,
failures read as 'kind: message', and a call that overruns its deadline is abandoned."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from bureau.tools.core import (
    FailureKind,
    ToolFailure,
    ToolSet,
    ToolSettings,
    Workspace,
    check_deadline,
    truncate,
)
from bureau.tools.server import build_server


# -- truncation ------------------------------------------------------------------------------
def test_truncate_keeps_short_text() -> None:
    assert truncate("abc", 200) == "abc"


def test_truncate_keeps_head_and_tail_and_says_how_much() -> None:
    text = "".join(f"row {i}\n" for i in range(10_000))
    out = truncate(text, 1000)
    assert len(out) < 1300
    assert out.startswith("row 0\nrow 1\n")
    assert out.endswith("row 9999\n")
    head, _, tail = out.partition("[... ")
    cut = int(tail.split(" of ")[0].replace(",", ""))
    assert f"of {len(text):,} characters cut" in out
    kept = len(head.rstrip("\n")) + len(out.split("...]\n", 1)[1])
    assert kept + cut == len(text)


# -- paths -----------------------------------------------------------------------------------
def test_resolve_accepts_relative_and_absolute_inside(ws: Workspace, ws_root: Path) -> None:
    assert ws.resolve("notes/readme.txt") == ws_root.resolve() / "notes/readme.txt"
    assert ws.resolve(str(ws_root / "notes" / "readme.txt")).name == "readme.txt"
    assert ws.resolve("notes/../notes/readme.txt").name == "readme.txt"
    assert ws.resolve("notes/inside_link.txt").name == "readme.txt"
    assert ws.resolve("") == ws_root.resolve()


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "notes/../../x", "/etc/passwd", "link_out/passwd", "notes/passwd_link"],
)
def test_resolve_refuses_escapes(ws: Workspace, path: str) -> None:
    with pytest.raises(ToolFailure) as info:
        ws.resolve(path, must_exist=False)
    assert info.value.kind == FailureKind.path_outside_workspace


def test_resolve_reports_missing_files_relative(ws: Workspace) -> None:
    with pytest.raises(ToolFailure) as info:
        ws.resolve("notes/missing.txt")
    assert str(info.value) == "not_found: no file or folder notes/missing.txt"


def test_target_refuses_to_replace_without_overwrite(ws: Workspace) -> None:
    with pytest.raises(ToolFailure) as info:
        ws.target("notes/readme.txt", overwrite=False)
    assert info.value.kind == FailureKind.already_exists
    assert ws.target("notes/readme.txt", overwrite=True).name == "readme.txt"


def test_atomic_save_leaves_no_temporary_file(ws: Workspace, ws_root: Path) -> None:
    dest = ws.target("out/new.txt", overwrite=False)
    ws.atomic_save(dest, lambda tmp: tmp.write_text("hello"))
    assert dest.read_text() == "hello"
    assert [p.name for p in (ws_root / "out").iterdir()] == ["new.txt"]

    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        ws.atomic_save(dest, fail)
    assert dest.read_text() == "hello"
    assert [p.name for p in (ws_root / "out").iterdir()] == ["new.txt"]


def test_toolset_requires_the_group_prefix() -> None:
    tools = ToolSet("demo", "demo_")
    with pytest.raises(ValueError, match="must start with 'demo_'"):

        @tools.tool(read_only=True)
        def other(ws: Workspace) -> str:
            return ""


# -- the server wrapper ----------------------------------------------------------------------
DEMO = ToolSet("demo", "demo_")
RELEASED = threading.Event()


@DEMO.tool(read_only=True)
def demo_echo(ws: Workspace, text: str, repeat: int = 1) -> str:
    """Echo text."""
    return text * repeat


@DEMO.tool(read_only=True)
def demo_slow(ws: Workspace, seconds: float) -> str:
    """Sleep in small steps, checking the deadline like a long read does."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        check_deadline()
        time.sleep(0.01)
    RELEASED.set()
    return "done"


@DEMO.tool(read_only=True)
def demo_fail(ws: Workspace, kind: str) -> str:
    """Fail in the way asked."""
    if kind == "missing":
        (ws.real_root() / "nope.txt").read_text()
    if kind == "value":
        raise ValueError("bad value")
    if kind == "bug":
        raise AttributeError("'NoneType' object has no attribute 'x'")
    return ""


def _call(server: MCPServer[Any], name: str, args: dict[str, Any]) -> tuple[bool, str]:
    async def go() -> tuple[bool, str]:
        try:
            result = await server.call_tool(name, args)
        except Exception as exc:  # what the SDK turns into an isError result
            return True, str(exc)
        assert not isinstance(result, BaseException)
        text = "".join(getattr(c, "text", "") for c in getattr(result, "content", []))
        return bool(getattr(result, "is_error", False)), text

    return anyio.run(go)


@pytest.fixture
def demo_server(ws_root: Path) -> MCPServer[Any]:
    settings = ToolSettings(max_output_chars=300, call_timeout_s=0.5)
    server = build_server([], Workspace(ws_root, settings))
    DEMO.register(server, Workspace(ws_root, settings))
    return server


def test_servers_of_two_workspaces_share_the_derived_schema_and_keep_their_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK derives a tool's argument model and schema once per process (what a zygote
    does before it forks); every server copies it with a call bound to its own workspace."""
    from mcp.server.mcpserver.tools.base import Tool

    derived: list[str] = []
    original = Tool.from_function

    def counting(*args: Any, **kwargs: Any) -> Tool:
        derived.append(kwargs["name"])
        return original(*args, **kwargs)

    monkeypatch.setattr(Tool, "from_function", counting)
    roots = [tmp_path / "a", tmp_path / "b"]
    servers = []
    for root in roots:
        root.mkdir()
        (root / "note.txt").write_text(f"this is {root.name}\n")
        servers.append(build_server(["filesystem"], Workspace(root, ToolSettings())))
    names = [t.name for t in anyio.run(servers[0].list_tools)]
    # At most once each (none when an earlier test in this process derived them already).
    assert len(derived) == len(set(derived)) and set(derived) <= set(names), derived
    schemas = [{t.name: t.input_schema for t in anyio.run(s.list_tools)} for s in servers]
    assert schemas[0] == schemas[1] and "fs_read_text" in schemas[0]
    for server, root in zip(servers, roots, strict=True):
        failed, text = _call(server, "fs_read_text", {"path": "note.txt"})
        assert not failed and f"this is {root.name}" in text, text


def test_schema_leaves_out_the_workspace(demo_server: MCPServer[Any]) -> None:
    tools = {t.name: t for t in anyio.run(demo_server.list_tools)}
    schema = tools["demo_echo"].input_schema
    assert set(schema["properties"]) == {"text", "repeat"}
    assert schema["required"] == ["text"]
    assert tools["demo_echo"].description == "Echo text."
    assert tools["demo_echo"].annotations is not None
    assert tools["demo_echo"].annotations.read_only_hint is True


def test_results_are_truncated_to_the_limit(demo_server: MCPServer[Any]) -> None:
    failed, text = _call(demo_server, "demo_echo", {"text": "x", "repeat": 5000})
    assert not failed
    assert len(text) < 450
    assert "characters cut here" in text


def test_empty_result_is_replaced(demo_server: MCPServer[Any]) -> None:
    assert _call(demo_server, "demo_fail", {"kind": "none"}) == (
        False,
        "(the tool produced no text)",
    )


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing", "not_found: No such file or directory: nope.txt"),
        ("value", "invalid_argument: bad value"),
        ("bug", "internal_error: AttributeError: 'NoneType' object has no attribute 'x'"),
    ],
)
def test_failures_read_kind_and_message(
    demo_server: MCPServer[Any], kind: str, expected: str
) -> None:
    failed, text = _call(demo_server, "demo_fail", {"kind": kind})
    assert failed
    assert text == f"Error executing tool demo_fail: {expected}"
    assert "Traceback" not in text


def test_argument_errors_are_short(demo_server: MCPServer[Any]) -> None:
    failed, text = _call(demo_server, "demo_echo", {"repeat": "many"})
    assert failed
    assert "invalid_argument" in text and "text: Field required" in text
    assert "pydantic.dev" not in text
    failed, text = _call(demo_server, "demo_echo", {"text": "a", "repaet": 2})
    assert failed
    assert "unknown argument(s) repaet; demo_echo takes text, repeat" in text


def test_overrunning_call_is_abandoned_and_stops(demo_server: MCPServer[Any]) -> None:
    RELEASED.clear()
    start = time.monotonic()
    failed, text = _call(demo_server, "demo_slow", {"seconds": 5})
    assert failed
    assert "timeout: demo_slow did not finish within 0.5 s" in text
    assert time.monotonic() - start < 3
    # The abandoned thread sees the deadline at its next check and ends without finishing.
    time.sleep(0.2)
    assert not RELEASED.is_set()
    assert _call(demo_server, "demo_slow", {"seconds": 0.01}) == (False, "done")
