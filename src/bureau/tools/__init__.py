"""MCP tool servers that give an agent the workspace of one trial.

Nine groups, each a module with a `register(server, workspace)` function and a standalone
entry point (`python -m bureau.tools.pdf`); `python -m bureau.tools [--groups a,b]
[--workspace DIR] [--max-output-chars N] [--call-timeout-s S]` serves any set of them from one
process over stdio (see `bureau.tools.cli`). Tool names carry their group's prefix (`fs_`,
`pdf_`, `sheet_`, `slides_`, `docx_`, `mail_`, `chat_`, `cal_`, `code_`) so they stay unique when
groups share a server.

What every tool guarantees (`bureau.tools.core`):

- it only touches the workspace: paths are relative to it or absolute inside it, and `..` or
  symlinks that leave it are refused with `path_outside_workspace`;
- it returns text that says what it found or did ("wrote 3 cells to Sheet1!B2:B4"), never an
  empty result;
- a failure is an MCP error result (`isError`) reading `kind: message`, without a traceback;
- a long result keeps its head and tail around a note saying how much was cut;
- a call has a deadline; one that overruns it is answered with a `timeout` error at once, and
  its worker thread stops at its next deadline check (see `core` for what that means for
  writes).

Agent code (the `code_` tools) runs isolated from the server process; `bureau.tools.runner`
explains how, and what is weaker when the server does not run as root.

This file imports nothing heavy, so the group table can be read without starting MCP.
"""

from collections.abc import Sequence

GROUPS: dict[str, str] = {
    "filesystem": "bureau.tools.filesystem",
    "pdf": "bureau.tools.pdf",
    "spreadsheet": "bureau.tools.spreadsheet",
    "slides": "bureau.tools.slides",
    "documents": "bureau.tools.documents",
    "mail": "bureau.tools.mail",
    "chat": "bureau.tools.chat",
    "calendar": "bureau.tools.calendar",
    "code": "bureau.tools.code",
}
"""Group name -> module that registers it."""

PREFIXES: dict[str, str] = {
    "filesystem": "fs_",
    "pdf": "pdf_",
    "spreadsheet": "sheet_",
    "slides": "slides_",
    "documents": "docx_",
    "mail": "mail_",
    "chat": "chat_",
    "calendar": "cal_",
    "code": "code_",
}
"""Group name -> the prefix of its tool names."""


def groups_for(tool_prefixes: Sequence[str] | None) -> list[str]:
    """The groups that hold every tool whose name starts with one of `tool_prefixes` (a
    harness's `tool_prefixes`): `["code_run_python"]` needs `code`, `["f"]` needs `filesystem`.
    None means every tool, so every group."""
    if tool_prefixes is None:
        return list(GROUPS)
    return [
        group
        for group, prefix in PREFIXES.items()
        if any(prefix.startswith(p) or p.startswith(prefix) for p in tool_prefixes)
    ]


ZYGOTE_PRELOAD = ("bureau.tools.cli", "bureau.tools.server", *GROUPS.values())
"""What a zygote that forks tool servers imports ahead (`bureau.sandbox.zygote`): everything a
server of any groups imports at start, so each forked server shares it."""


def zygote_warm() -> None:
    """Run by a zygote after `ZYGOTE_PRELOAD`, before it forks: builds what the SDK derives
    from every tool's signature (`bureau.tools.core.ToolSet.tools`), so each forked server
    copies it instead of deriving it again."""
    from pathlib import Path

    from bureau.tools.core import ToolSettings, Workspace
    from bureau.tools.server import build_server

    build_server(list(GROUPS), Workspace(Path("/nonexistent-bureau-workspace"), ToolSettings()))


__all__ = ["GROUPS", "PREFIXES", "ZYGOTE_PRELOAD", "groups_for", "zygote_warm"]
