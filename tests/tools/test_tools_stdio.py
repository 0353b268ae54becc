"""The tool servers as an agent harness meets them: a real MCP client over stdio.

One server process (all groups) serves the whole module; it is driven from the test thread
through an anyio blocking portal, so each test is a plain function.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tools_helpers import build_workspace, code_python

from bureau.tools import GROUPS, groups_for
from bureau.tools import PREFIXES as GROUP_PREFIXES
from bureau.tools.core import ToolSettings, Workspace
from bureau.tools.server import build_server

PREFIXES = ("fs_", "pdf_", "sheet_", "slides_", "docx_", "mail_", "chat_", "cal_", "code_")


@contextlib.asynccontextmanager
async def _session(
    args: list[str], errlog: Any, cwd: Path | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=args, cwd=cwd)
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Client:
    """A sync face on one MCP session."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def tools(self) -> list[Any]:
        return self.portal.call(self.session.list_tools).tools

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        async def bounded() -> Any:
            # A server that dies mid-call never answers: fail the test instead of hanging it.
            with anyio.fail_after(120):
                return await self.session.call_tool(name, arguments)

        result = self.portal.call(bounded)
        text = "".join(getattr(block, "text", "") for block in result.content)
        return bool(result.is_error), text


@contextlib.contextmanager
def serving(args: list[str], cwd: Path | None = None) -> Iterator[Client]:
    with (
        tempfile.TemporaryFile("w+") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(args, errlog, cwd)) as session,
    ):
        yield Client(portal, session)


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="bureau-tools-stdio-", dir="/tmp"))
    parent.chmod(0o755)  # code runs as another uid and must reach the workspace
    workspace = parent / "workspace"
    workspace.mkdir()
    build_workspace(workspace)
    yield workspace
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[Client]:
    args = ["-m", "bureau.tools", "--workspace", str(root), "--max-output-chars", "3000"]
    with serving([*args, "--code-python", code_python()]) as c:
        yield c


def test_list_tools_covers_every_group_with_unique_prefixed_names(client: Client) -> None:
    tools = client.tools()
    names = [t.name for t in tools]
    assert len(names) == len(set(names)) == 43
    assert all(name.startswith(PREFIXES) for name in names)
    assert {p for p in PREFIXES if any(n.startswith(p) for n in names)} == set(PREFIXES)
    for tool in tools:
        assert len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object"
        properties = tool.input_schema.get("properties", {})
        assert "ws" not in properties
        undocumented = [k for k, v in properties.items() if "description" not in v]
        assert undocumented == [], tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint is not None
    by_name = {t.name: t for t in tools}
    assert by_name["pdf_read_pages"].annotations.read_only_hint is True
    assert by_name["sheet_write"].annotations.read_only_hint is False
    path_doc = by_name["pdf_read_pages"].input_schema["properties"]["path"]["description"]
    assert "relative to the workspace root" in path_doc


def test_each_group_names_its_tools_with_its_own_prefix(root: Path) -> None:
    assert set(GROUP_PREFIXES) == set(GROUPS)
    assert tuple(GROUP_PREFIXES.values()) == PREFIXES
    for group, prefix in GROUP_PREFIXES.items():
        server = build_server([group], Workspace(root, ToolSettings()))
        names = [t.name for t in anyio.run(server.list_tools)]
        assert names, group
        assert all(name.startswith(prefix) for name in names), (group, names)


PLANTED = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED-" + __name__).write_text("agent code ran in the server")
raise ImportError("planted")
"""


def test_a_module_the_agent_plants_is_never_imported_by_the_server(tmp_path: Path) -> None:
    """A server with the filesystem group imports the document libraries only when a tool needs
    them. Started from the workspace with `python -m` (which puts the working directory first
    on the import path), it must still import the real libraries, not the agent's files."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    build_workspace(workspace)
    for name in ("openpyxl", "docx", "pptx", "pdfplumber"):
        (workspace / f"{name}.py").write_text(PLANTED)
    args = ["-m", "bureau.tools", "--groups", "filesystem", "--workspace", str(workspace)]
    with serving(args, cwd=workspace) as c:
        results = [
            c.call("fs_info", {"path": "finance/budget.xlsx"}),
            c.call("fs_info", {"path": "docs/memo.docx"}),
            c.call("fs_info", {"path": "decks/review.pptx"}),
            c.call("fs_search_content", {"query": "Alpha column", "include_documents": True}),
        ]
    assert [error for error, _ in results] == [False] * 4, results
    assert "sheets: " in results[0][1] and "paragraphs: " in results[1][1]
    assert "slides: " in results[2][1] and "review.pdf" in results[3][1]
    assert sorted(p.name for p in workspace.glob("IMPORTED-*")) == []


def test_the_groups_a_harness_needs_follow_its_tool_prefixes() -> None:
    assert groups_for(None) == list(GROUPS)
    assert groups_for(["code_run_python"]) == ["code"]
    assert groups_for(["fs_", "code_run_python"]) == ["filesystem", "code"]
    assert groups_for(["f"]) == ["filesystem"]  # a shorter prefix reaches a group's tools
    assert groups_for(["s"]) == ["spreadsheet", "slides"]
    assert groups_for([""]) == list(GROUPS)
    assert groups_for(["nothing_"]) == []


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("fs_tree", {}, "reports/"),
        ("pdf_read_pages", {"path": "reports/review.pdf", "pages": "1"}, "Alpha column text"),
        ("sheet_read", {"path": "finance/budget.xlsx", "formulas": True}, "3000 [=SUM(B2:B3)]"),
        ("slides_read", {"path": "decks/review.pptx", "slide": 3}, "| North | 4.2 |"),
        ("docx_read", {"path": "docs/memo.docx"}, "[1] (Heading 1) Decision"),
        ("mail_list", {}, "3 messages (inbox: 2, sent: 1)"),
        ("chat_read", {"channel": "#general"}, "Who owns the budget?"),
        (
            "cal_events",
            {"start": "2025-03-11", "end": "2025-03-11", "timezone": "Europe/London"},
            "2025-03-11 Tue 13:00-14:00 GMT  Vendor review",
        ),
        ("code_run_python", {"code": "print(6 * 7)"}, "--- stdout ---\n42\n"),
    ],
)
def test_representative_calls(
    client: Client, name: str, arguments: dict[str, Any], expected: str
) -> None:
    failed, text = client.call(name, arguments)
    assert not failed, text
    assert expected in text


def test_writes_take_structured_arguments(client: Client, root: Path) -> None:
    blocks = [{"kind": "heading", "text": "Result"}, {"kind": "table", "rows": [["a", 1]]}]
    failed, text = client.call("docx_create", {"path": "output/r.docx", "blocks": blocks})
    assert (failed, text) == (
        False,
        "created output/r.docx: 1 heading, 1 table, 1 table row in all",
    )
    failed, text = client.call(
        "fs_write_text", {"path": "output/answer.json", "content": json.dumps({"x": 1})}
    )
    assert not failed and text.startswith("created output/answer.json")
    assert json.loads((root / "output" / "answer.json").read_text()) == {"x": 1}


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "fs_read_text",
            {"path": "../../etc/passwd"},
            "Error executing tool fs_read_text: path_outside_workspace: ../../etc/passwd leaves "
            "the workspace",
        ),
        (
            "fs_read_text",
            {"path": "notes/passwd_link"},
            "Error executing tool fs_read_text: path_outside_workspace: notes/passwd_link goes "
            "through a symlink that points outside the workspace",
        ),
        (
            "pdf_read_pages",
            {"path": "reports/review.pdf", "pages": "9"},
            "Error executing tool pdf_read_pages: invalid_argument: pages 9 do not exist: the "
            "PDF has 2",
        ),
        (
            "sheet_read",
            {"path": "finance/budget.xlsx", "formulas": "maybe"},
            "Error executing tool sheet_read: invalid_argument: formulas: Input should be a "
            "valid boolean, unable to interpret input",
        ),
        (
            "fs_list",
            {"folder": "notes"},
            "Error executing tool fs_list: invalid_argument: unknown argument(s) folder; fs_list "
            "takes path, include_hidden",
        ),
        (
            "cal_free_slots",
            {"people": [], "start": "2025-03-11", "end": "2025-03-11"},
            "Error executing tool cal_free_slots: invalid_argument: people: List should have at "
            "least 1 item after validation, not 0",
        ),
        ("fs_delete", {}, "Unknown tool: fs_delete"),
    ],
)
def test_errors_are_readable(
    client: Client, name: str, arguments: dict[str, Any], expected: str
) -> None:
    failed, text = client.call(name, arguments)
    assert failed
    assert text == expected


def test_long_results_are_cut_with_a_note(client: Client) -> None:
    failed, text = client.call("fs_read_text", {"path": "notes/long.txt", "limit": 2000})
    assert not failed
    assert len(text) < 3300
    assert "notes/long.txt: lines 1-2000 of 2000" in text
    assert "characters cut here" in text
    assert text.endswith("2000  line 2000")


def test_code_cannot_kill_the_server_and_timeouts_are_errors(client: Client) -> None:
    failed, text = client.call("code_run_shell", {"command": "kill -9 $PPID; echo rc=$?"})
    assert not failed
    if os.geteuid() == 0:
        assert "rc=1" in text and "Operation not permitted" in text
        assert client.call("fs_info", {"path": "notes/readme.txt"})[0] is False
    failed, text = client.call("code_run_shell", {"command": "sleep 20", "timeout_s": 0.5})
    assert failed
    assert text.startswith("Error executing tool code_run_shell: timeout: the run did not finish")
    assert client.call("chat_list_channels", {}) == (
        False,
        "1 channel\n- #general: 3 messages, 1 thread, last 2025-03-02 11:00; members: Dana Lee, "
        "Eli Park",
    )


def test_one_group_runs_standalone(root: Path) -> None:
    with serving(["-m", GROUPS["pdf"], "--workspace", str(root)]) as pdf_only:
        names = sorted(t.name for t in pdf_only.tools())
        assert names == ["pdf_create", "pdf_extract_tables", "pdf_read_pages", "pdf_search"]
        failed, text = pdf_only.call("pdf_search", {"path": "reports/contract.pdf", "query": "90"})
        assert not failed and text.startswith("1 match in reports/contract.pdf")


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Path]:
    """A workspace of files that have broken tools: a name that is not UTF-8, a FIFO (opening
    it blocks), a socket, a device, a sparse file of 20 GiB, a NUL-free binary."""
    import socket

    workspace = tmp_path / "hostile"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the needle is here\n")
    os.close(os.open(os.fsencode(workspace) + b"/caf\xe9-\xff.txt", os.O_CREAT | os.O_WRONLY))
    with open(os.fsencode(workspace) + b"/caf\xe9-\xff.txt", "w") as f:
        f.write("needle in a file named in Latin-1\n")
    os.mkfifo(workspace / "pipe.txt")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(workspace / "sock.txt"))
    if os.geteuid() == 0:
        os.mknod(workspace / "null.txt", 0o600 | 0o020000, os.makedev(1, 3))
    with open(workspace / "sparse.txt", "wb") as f:
        f.truncate(20 * 2**30)
    yield workspace
    server.close()


def test_every_tool_answers_for_any_file_and_the_server_keeps_serving(hostile: Path) -> None:
    args = ["-m", "bureau.tools", "--groups", "filesystem", "--workspace", str(hostile)]
    with serving([*args, "--call-timeout-s", "20"]) as client:
        listings = {"fs_list": {"path": "."}, "fs_tree": {"path": "."}, "fs_find": {"pattern": "*"}}
        for name, arguments in listings.items():
            error, text = client.call(name, arguments)
            assert not error, text
            assert "caf\\xe9-\\xff.txt" in text, text  # the bytes shown, not a crash
        error, text = client.call("fs_search_content", {"query": "needle"})
        assert not error and "notes.txt" in text and "caf\\xe9-\\xff.txt" in text, text
        for name, kind in [
            ("pipe.txt", "named pipe"),
            ("sock.txt", "socket"),
            ("null.txt", "device"),
        ]:
            if not (hostile / name).exists():
                continue
            error, text = client.call("fs_read_text", {"path": name})
            assert error and kind in text, text
            # Metadata without opening it: a FIFO opened for its line count blocked the call
            # until its timeout (20 s here).
            error, text = client.call("fs_info", {"path": name})
            assert not error and f"type: {kind}" in text, text
        error, text = client.call("fs_read_text", {"path": "sparse.txt"})
        assert error and "file_too_large" in text, text
        error, text = client.call("fs_list", {"path": "."})
        assert not error and "notes.txt" in text  # still serving
