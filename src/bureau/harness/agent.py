"""The harness as a trial agent: one episode against the trial's MCP tool servers.

The agent keeps its record in memory (`trajectory()`, which `bureau.trials.attempt` joins to
the trial's outcome) and writes it (`agent/record.json`) and its ATIF trajectory
(`agent/trajectory.json`) into the trial directory before it returns or raises, so nothing is
lost when the engine or a tool server fails: the trial is then a system error (masked from
training) and the record says where the trajectory stopped.

The answer convention of bureau tasks is a JSON file, `output/answer.json`, which the model
writes with the filesystem tool. A model that instead puts a JSON object in its final message
gets it written for it (with `fs_write_text` in `create` mode, so an answer file it wrote itself
is never replaced); the trial's metadata says so.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.harness.export import to_atif
from bureau.harness.loop import Episode, HarnessConfig, ToolOutput
from bureau.harness.render import Message, Renderer, tool_schema
from bureau.inference.client import Sampler
from bureau.inference.retrying import RetryingSampler
from bureau.records import TrajectoryRecord
from bureau.tools import PREFIXES, groups_for
from bureau.trials.agents import Agent, AgentContext, AgentResult

if TYPE_CHECKING:
    from bureau.trials.faults import TrialFaults
    from bureau.trials.mcp_link import ToolLink

ANSWER_PATH = "output/answer.json"
RECORD_FILE = "record.json"
METADATA_FILE = "metadata.json"
ATIF_FILE = "trajectory.json"
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


class MCPTools:
    """`ToolBackend` over the trial's MCP link.

    A tool server that dies or hangs under a call is restarted in the same sandbox (the files
    stay), up to `max_restarts` times per trial, and the model reads an error for that call
    (outcome `tool_failed`): one broken call need not end a long trajectory. A sandbox that is
    gone cannot restart anything: that is `sandbox_crashed`. `faults` injects tool hangs,
    server kills and a sandbox kill for drills (`bureau.trials.faults`).
    """

    def __init__(
        self,
        link: ToolLink,
        *,
        max_restarts: int = 0,
        restart_timeout_s: float = 60.0,
        faults: TrialFaults | None = None,
    ) -> None:
        self.link = link
        self.max_restarts, self.restart_timeout_s = max_restarts, restart_timeout_s
        self.faults = faults
        self.calls = 0

    def specs(self) -> list[Message]:
        return [tool_schema(t.name, t.description, dict(t.input_schema)) for t in self.link.tools]

    async def _inject(self, name: str, number: int) -> bool:
        """Inject this call's faults; whether the call is to hang."""
        faults = self.faults
        if faults is None:
            return False
        if faults.kill_sandbox_at == number and self.link.sandbox is not None:
            faults.record("sandbox_kill", "agent", call=number, tool=name)
            await asyncio.to_thread(self.link.sandbox.stop)
            return False
        if faults.injected("tool_server_kill", "agent", call=number, tool=name):
            self.link.proc.kill()
            await asyncio.to_thread(self.link.proc.wait)
            return False
        return faults.injected("tool_hang", "agent", call=number, tool=name)

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutput:
        from mcp.shared.exceptions import MCPError

        number = self.calls
        self.calls += 1
        hang = await self._inject(name, number)
        try:
            result = await self.link.call(name, arguments, timeout_s, hang=hang)
        except MCPError as exc:  # a JSON-RPC error from a live server: the model's to read
            return ToolOutput(f"error: {exc}", True)
        except BureauSystemError as exc:
            if exc.kind != SystemErrorKind.tool_server_failed:
                raise
            if self.link.restarts >= self.max_restarts:
                raise
            await self.link.restart(self.restart_timeout_s)
            return ToolOutput(
                f"error: the tool server failed during this call ({exc.message[:200]}). It has "
                "been restarted and your files are as they were; call the tool again if you "
                "still need it.",
                True,
                failed=True,
            )
        parts = [
            c.text if c.type == "text" else f"[{c.type} content omitted]"
            for c in result.content
            if hasattr(c, "type")
        ]
        return ToolOutput("\n".join(str(p) for p in parts), bool(result.is_error))


def final_json(content: str) -> dict[str, Any] | None:
    """The JSON object in a final message: a fenced block, or the whole message."""
    candidates = [*_FENCED.findall(content), content.strip()]
    for text in candidates:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


@dataclass
class HarnessAgent(Agent):
    """Drives `sampler` through the task with the trial's tools; see the module docstring."""

    sampler: Sampler
    renderer: Renderer
    config: HarnessConfig
    model_name: str
    deadline_margin_s: float = 5.0
    name = "harness"
    version = "1"
    uses_tools = True
    supports_steps = True

    def tool_groups(self) -> list[str] | None:
        return harness_tool_groups(self.config)

    def trajectory(self) -> TrajectoryRecord | None:
        return getattr(self, "_record", None)

    async def run(self, ctx: AgentContext) -> AgentResult:
        """One episode; for a later step of a multi-step task, the same episode goes on with
        the step's prompt (`Episode.resume`), so its record covers every step."""
        episode: Episode | None = getattr(self, "_episode", None)
        if episode is None or ctx.task.step is None:
            self._record: TrajectoryRecord | None = None
        if ctx.tools is None:
            raise BureauSystemError(SystemErrorKind.tool_server_failed, "no tool link")
        margin = min(self.deadline_margin_s, ctx.timeout_s * 0.1)
        sampler: Sampler = self.sampler
        if ctx.faults is not None:
            from bureau.trials.faults import FaultySampler

            sampler = FaultySampler(sampler, ctx.faults)
        engine = RetryingSampler(
            sampler, self.config.engine_retries, self.config.engine_retry_backoff_s
        )
        tools = MCPTools(
            ctx.tools,
            max_restarts=self.config.max_tool_restarts,
            restart_timeout_s=self.config.tool_restart_timeout_s,
            faults=ctx.faults,
        )
        deadline = time.monotonic() + ctx.timeout_s - margin
        if episode is None or ctx.task.step is None:
            episode = Episode(
                engine,
                self.renderer,
                tools,
                self.config,
                task_name=ctx.task.name,
                model=self.model_name,
                deadline=deadline,
            )
            self._episode = episode
            record = await episode.run(ctx.task.instruction, step=ctx.task.step)
        else:
            episode.sampler, episode.tools, episode.deadline = engine, tools, deadline
            record = await episode.resume(ctx.task.instruction, ctx.task.step)
        self._record = record
        metadata: dict[str, Any] = {
            "stop_reason": record.stop_reason,
            "num_turns": record.num_turns,
            "num_sampled_tokens": record.num_sampled_tokens,
            "num_tool_calls": len(record.tool_calls),
            "llm_time_s": record.llm_time_s,
            "tool_time_s": record.tool_time_s,
            "trajectory_id": record.trajectory_id,
            "engine_resends": engine.events,
            "tool_restarts": ctx.tools.restarts,
        }
        if record.stop_reason == "answered" and episode.error is None:
            metadata["answer_written_by_harness"] = await self._write_answer(ctx.tools, record)
        (ctx.log_dir / RECORD_FILE).write_text(json.dumps(record.to_dict()) + "\n")
        # Also when the episode ended in a system error (the trial's metadata is then lost).
        (ctx.log_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=1) + "\n")
        (ctx.log_dir / ATIF_FILE).write_text(
            json.dumps(to_atif(record, agent_version=self.version), indent=1) + "\n"
        )
        if episode.error is not None:
            raise episode.error
        return AgentResult(metadata)

    async def _write_answer(self, tools: ToolLink, record: TrajectoryRecord) -> bool:
        answer = final_json(str(record.messages[-1].get("content") or ""))
        if answer is None:
            return False
        output = await MCPTools(tools).call(
            "fs_write_text",
            {"path": ANSWER_PATH, "content": json.dumps(answer), "mode": "create"},
            self.config.tool_timeout_s,
        )
        return not output.is_error


def harness_tool_groups(config: HarnessConfig) -> list[str] | None:
    """The tool groups a harness episode needs: those of its exposed tools, and `filesystem`
    for the answer file the harness writes; None (all) when every tool is exposed."""
    if config.tool_prefixes is None:
        return None
    return groups_for([*config.tool_prefixes, PREFIXES["filesystem"]])
