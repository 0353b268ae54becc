"""One MCP server holding any set of tool groups.

`build_server` imports the chosen group modules, and with them their document libraries, so a
process pays for imports once at start (a warm pool hides that) and calls stay fast. The server
is an `MCPServer` whose only change is the wording of argument errors: the SDK reports them as
a pydantic dump with links; the model gets `invalid_argument: <field>: <problem>` instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from bureau.tools import GROUPS
from bureau.tools.core import FailureKind, Workspace
from bureau.tools.runner import protect_server

INSTRUCTIONS = """\
Tools over the files of one company workspace ({root}). Paths are relative to that folder.
Groups: {groups}. Tool names start with their group's prefix (fs_, pdf_, sheet_, slides_,
docx_, mail_, chat_, cal_, code_). Long results are cut in the middle with a note; ask for a smaller
part to see the rest. Errors read 'kind: message'."""


def _argument_problems(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)


class BureauServer(MCPServer[Any]):
    """An `MCPServer` that words argument errors for a model and refuses unknown arguments
    (pydantic would drop them silently, hiding a misspelt parameter name)."""

    _parameters: dict[str, list[str]] | None = None

    async def _check_names(self, name: str, arguments: dict[str, Any]) -> None:
        if self._parameters is None:
            self._parameters = {
                t.name: list(t.input_schema.get("properties", {})) for t in await self.list_tools()
            }
        known = self._parameters.get(name)
        unknown = sorted(set(arguments) - set(known)) if known is not None else []
        if unknown:
            raise ToolError(
                f"Error executing tool {name}: {FailureKind.invalid_argument.value}: unknown "
                f"argument(s) {', '.join(unknown)}; {name} takes {', '.join(known or []) or 'none'}"
            )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        await self._check_names(name, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(
                    f"Error executing tool {name}: {FailureKind.invalid_argument.value}: "
                    f"{_argument_problems(cause)}"
                ) from cause
            raise


def build_server(
    groups: Sequence[str], workspace: Workspace, *, name: str = "bureau-tools"
) -> BureauServer:
    """A server with the tools of `groups` (names from `bureau.tools.GROUPS`) registered."""
    tools = []
    seen: set[str] = set()
    for group in groups:
        made = importlib.import_module(GROUPS[group]).TOOLS.tools(workspace)
        duplicated = seen.intersection(t.name for t in made)
        if duplicated:
            raise ValueError(f"tool names registered twice: {sorted(duplicated)}")
        seen.update(t.name for t in made)
        tools += made
    return BureauServer(
        name,
        instructions=INSTRUCTIONS.format(root=workspace.root, groups=", ".join(groups)),
        log_level="WARNING",
        tools=tools,
    )


def serve(groups: Sequence[str], workspace: Workspace, *, name: str = "bureau-tools") -> None:
    """Build the server and answer MCP over stdio until stdin closes."""
    server = build_server(groups, workspace, name=name)
    protect_server()
    server.run("stdio")
