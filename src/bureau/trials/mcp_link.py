"""A link from the host to a sandbox's MCP tool servers, over the server's stdio.

The sandbox starts `python -m bureau.tools` with `Sandbox.spawn`; this module speaks MCP's
newline-delimited JSON-RPC over that process's pipes, using the SDK's `ClientSession`. (The
SDK's own stdio client wants to start the process itself; the sandbox must start it, so the
pipes are bridged here.) A dead or silent server is `tool_server_failed`; `ToolLink.restart`
starts a fresh one in the same sandbox (`sandbox_crashed` when the sandbox itself is gone).
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import Sandbox

# The sandbox starts the tool server with `tool_server=True`: it then runs agent code as the
# sandbox's second uid (BUREAU_CODE_UID), which cannot signal, trace or read the server. `-P`
# keeps the working directory (the agent's workspace) off the server's import path, so a module
# the agent writes there is never imported by a tool that imports a library late.
TOOL_SERVER_CMD = ["python3", "-P", "-m", "bureau.tools"]


def tool_server_cmd(groups: Sequence[str] | None = None) -> list[str]:
    """The server's command line: every group, or only `groups`."""
    if groups is None:
        return list(TOOL_SERVER_CMD)
    if not groups:
        raise ValueError("a tool server needs at least one group")
    return [*TOOL_SERVER_CMD, "--groups", ",".join(groups)]


@asynccontextmanager
async def popen_streams(
    proc: subprocess.Popen[bytes],
) -> AsyncIterator[tuple[Any, Any]]:
    """MCP read/write streams over a running process's stdout/stdin."""
    assert proc.stdout is not None and proc.stdin is not None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), proc.stdout)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, proc.stdin)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](16)

    async def pump_out() -> None:
        async with to_session:
            while line := await reader.readline():
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await to_session.send(exc)
                    continue
                await to_session.send(SessionMessage(message))

    async def pump_in() -> None:
        async with from_session:
            async for item in from_session:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                transport.write(data.encode() + b"\n")

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_out)
        tg.start_soon(pump_in)
        try:
            yield from_server, to_server
        finally:
            transport.close()
            tg.cancel_scope.cancel()


class ToolLink:
    """An initialized MCP session with the sandbox's tool servers.

    anyio requires a task group to be exited by the task that entered it, while a pooled link
    is opened by one task and used and closed by others. So one owner task holds the
    transport and the session open until `close()`; calls from any task go through the
    session's streams.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        sandbox: Sandbox | None = None,
        cmd: list[str] | None = None,
    ) -> None:
        self.sandbox, self.cmd = sandbox, cmd
        self.restarts = 0
        self.session: ClientSession | None = None
        self.tools: list[types.Tool] = []
        self._attach(proc)

    def _attach(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._closing = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None
        # Drain stderr continuously: a server blocked on a full stderr pipe would hang.
        self._stderr: deque[bytes] = deque(maxlen=256)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        if self.proc.stderr is not None:
            for line in iter(self.proc.stderr.readline, b""):
                self._stderr.append(line)

    @property
    def stderr_tail(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")[-2000:]

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            async with popen_streams(self.proc) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                self.tools = list((await s.list_tools()).tools)
                self.session = s
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None

    async def call(
        self, name: str, arguments: dict[str, Any], timeout_s: float, *, hang: bool = False
    ) -> types.CallToolResult:
        """Call one tool. `hang` (fault injection) makes the call never answer, so that it
        goes the way of a hung server: `tool_server_failed` after `timeout_s`."""
        session = self.session
        if session is None or self.proc.poll() is not None:
            raise BureauSystemError(
                SystemErrorKind.tool_server_failed,
                f"tool server is not running: {self.stderr_tail.strip()[-300:]}",
            )
        try:
            with anyio.fail_after(timeout_s):
                if hang:
                    await anyio.sleep_forever()
                return await session.call_tool(name, arguments)
        except TimeoutError as exc:
            raise BureauSystemError(
                SystemErrorKind.tool_server_failed, f"{name} gave no answer in {timeout_s} s"
            ) from exc
        except MCPError as exc:
            # A JSON-RPC error from a live server is the caller's to handle (an unknown tool,
            # say); a closed connection means the server is gone.
            if self.proc.poll() is None and "closed" not in str(exc).lower():
                raise
            raise BureauSystemError(
                SystemErrorKind.tool_server_failed,
                f"{name}: the tool server exited ({self.proc.poll()}): "
                f"{self.stderr_tail.strip()[-300:]}",
            ) from exc

    async def close(self) -> None:
        """Close the session and stop the server process. Safe to call twice."""
        self._closing.set()
        if self._owner is not None and not self._owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._owner), 5)
            except (TimeoutError, Exception):
                self._owner.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
        await asyncio.to_thread(self.proc.wait)

    async def start(self, timeout_s: float) -> None:
        """Complete the MCP handshake with the attached process (closing it on failure)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready))
        try:
            await asyncio.wait_for(ready, timeout_s)
        except BaseException as exc:
            await self.close()
            await asyncio.to_thread(self._drain.join, 2.0)
            detail = self.stderr_tail.strip()[-500:]
            if isinstance(exc, TimeoutError):
                raise BureauSystemError(
                    SystemErrorKind.tool_server_failed, f"not ready in {timeout_s} s: {detail}"
                ) from exc
            if isinstance(exc, Exception):
                raise BureauSystemError(
                    SystemErrorKind.tool_server_failed, f"{type(exc).__name__}: {exc} {detail}"
                ) from exc
            raise

    async def restart(self, timeout_s: float) -> None:
        """Stop this server and start a fresh one in the same sandbox (the workspace and
        everything the agent wrote stay). Raises what starting raises: `sandbox_crashed`
        when the sandbox is gone, `tool_server_failed` when the server will not come up."""
        if self.sandbox is None or self.cmd is None:
            raise BureauSystemError(
                SystemErrorKind.tool_server_failed, "this tool link cannot restart its server"
            )
        await self.close()
        self.restarts += 1
        self.session, self.tools = None, []
        self._attach(self.sandbox.spawn(self.cmd, phase="agent", tool_server=True))
        await self.start(timeout_s)


async def open_tool_link(
    sandbox: Sandbox,
    *,
    timeout_s: float,
    cmd: list[str] | None = None,
    groups: Sequence[str] | None = None,
) -> ToolLink:
    """Start the tool servers in `sandbox` (every group, or only `groups`) and complete the
    MCP handshake."""
    cmd = cmd or tool_server_cmd(groups)
    link = ToolLink(sandbox.spawn(cmd, phase="agent", tool_server=True), sandbox, cmd)
    await link.start(timeout_s)
    return link
