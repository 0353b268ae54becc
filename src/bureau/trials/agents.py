"""The agent interface of a trial, and the two built-in agents.

An agent gets the trial's sandbox (and, if it asks for them, a link to the sandbox's MCP tool
servers) and a time budget. It produces files in the workspace and logs in `log_dir`; the
verifier grades what it left. The token-in/token-out harness implements this same interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.records import TrajectoryRecord
from bureau.sandbox.base import Sandbox
from bureau.tasks.image import resolve_env_templates
from bureau.tasks.taskdir import TaskDir

if TYPE_CHECKING:
    from bureau.trials.faults import TrialFaults
    from bureau.trials.mcp_link import ToolLink


@dataclass
class AgentContext:
    task: TaskDir
    sandbox: Sandbox
    timeout_s: float
    log_dir: Path  # host folder, copied into the trial directory as agent/
    tools: ToolLink | None = None
    faults: TrialFaults | None = None
    """Faults to inject into the agent's tool calls and engine requests (drills only)."""


@dataclass
class AgentResult:
    """What the agent reports about its run (token counts and the like come later)."""

    metadata: dict[str, object] = field(default_factory=dict)


class Agent(ABC):
    name: str = "agent"
    version: str = "0"
    uses_tools: bool = False
    supports_steps: bool = False
    """Whether it runs multi-step tasks: once per step, on the step's prompt, in one sandbox."""

    def tool_groups(self) -> list[str] | None:
        """The tool groups (`bureau.tools.GROUPS` names) its server must hold; None: all.
        A server with fewer groups imports fewer libraries, so it starts sooner."""
        return None

    def trajectory(self) -> TrajectoryRecord | None:
        """The token-level record of its last run (`bureau.trials.attempt` joins it to the
        trial's outcome), in memory; None for agents that sample nothing, or when the run was
        cut off before it had one."""
        return None

    @abstractmethod
    async def run(self, ctx: AgentContext) -> AgentResult:
        """Work on the task inside `ctx.sandbox` within `ctx.timeout_s` seconds."""


class NopAgent(Agent):
    """Does nothing: every task must score 0 with it."""

    name = "nop"
    supports_steps = True

    async def run(self, ctx: AgentContext) -> AgentResult:
        return AgentResult()


class OracleAgent(Agent):
    """Runs the task's `solution/solve.sh` inside the sandbox: every task must score 1.

    As in Harbor, `[solution.env]` is set for solve.sh, and the verifier runs whatever exit
    code solve.sh returned (it is recorded in the agent's metadata and oracle.txt): a script
    whose last command fails may still have solved the task.
    """

    name = "oracle"
    supports_steps = True

    async def run(self, ctx: AgentContext) -> AgentResult:
        import asyncio
        import os

        solve = ctx.task.solution_dir / "solve.sh"
        if not solve.exists():
            raise BureauSystemError(SystemErrorKind.agent_error, f"{solve} does not exist")
        table = ctx.task.config.solution.get("env") or {}
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in table.items()
        ):
            raise BureauSystemError(
                SystemErrorKind.agent_error,
                f"{ctx.task.config_path}: [solution.env] must map names to strings",
            )
        try:
            env = resolve_env_templates(table, dict(os.environ))
        except KeyError as exc:
            raise BureauSystemError(
                SystemErrorKind.agent_error, f"[solution.env] {exc.args[0]}"
            ) from None
        await asyncio.to_thread(ctx.sandbox.upload, ctx.task.solution_dir, "/solution")
        result = await asyncio.to_thread(
            ctx.sandbox.exec,
            ["bash", "-c", 'exec bash "${BUREAU_SOLUTION_DIR:-/solution}/solve.sh"'],
            timeout_s=ctx.timeout_s,
            phase="solution",
            env=env,
        )
        (ctx.log_dir / "oracle.txt").write_text(
            f"exit code {result.returncode} in {result.duration_s:.2f} s\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}\n",
            encoding="utf-8",
        )
        if result.timed_out:
            raise TimeoutError(f"solve.sh ran past {ctx.timeout_s:.0f} s")
        return AgentResult(
            {"solve_seconds": round(result.duration_s, 3), "solve_exit_code": result.returncode}
        )


BUILTIN_AGENTS: dict[str, type[Agent]] = {"nop": NopAgent, "oracle": OracleAgent}
