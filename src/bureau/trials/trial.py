"""One trial: start, agent setup, agent run, verification, teardown.

Every phase has a timeout and every failure is attributed to the phase it came from. The
sandbox is stopped in `finally`, whatever happened; an agent that runs out of time is
`agent_timeout`, never a verifier failure; a verifier that leaves no valid reward file is a
system error, never a zero reward.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import posixpath
import secrets
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import Runtime, Sandbox
from bureau.tasks.errors import RewardFileError
from bureau.tasks.image import resolve_env_templates
from bureau.tasks.reward import read_reward
from bureau.tasks.taskdir import TaskDir
from bureau.trials.agents import Agent, AgentContext, AgentResult
from bureau.trials.result import Timing, TrialResult, kind_of, now, task_checksum

if TYPE_CHECKING:  # the MCP SDK is an extra (`tools`); only tool-using trials import it
    from bureau.trials.mcp_link import ToolLink
    from bureau.trials.pool import WarmPool

Kind = SystemErrorKind


@dataclass(frozen=True)
class TrialConfig:
    """Timeouts: task.toml's values times the multipliers; start and build have their own."""

    agent_timeout_multiplier: float = 1.0
    verifier_timeout_multiplier: float = 1.0
    sandbox_start_timeout_s: float = 120.0
    tool_server_timeout_s: float = 60.0
    max_agent_timeout_s: float | None = None  # a cap, e.g. for smoke runs


@asynccontextmanager
async def nullcontext_async() -> AsyncIterator[None]:
    yield


@contextmanager
def timed(timing: Timing) -> Iterator[None]:
    timing.started_at = now()
    try:
        yield
    finally:
        timing.finished_at = now()


def new_trial_dir(trials_dir: Path, task: TaskDir) -> Path:
    # Harbor names trials by the task's short name: "org/name" becomes "name__<suffix>".
    short = task.name.rsplit("/", 1)[-1] or task.path.name
    trial_dir = trials_dir / f"{short}__{secrets.token_hex(4)}"
    for sub in ("agent", "verifier"):
        (trial_dir / sub).mkdir(parents=True)
    return trial_dir


async def run_trial(
    task: TaskDir,
    agent: Agent,
    runtime: Runtime,
    trials_dir: Path,
    config: TrialConfig | None = None,
    *,
    start_gate: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    pool: WarmPool | None = None,
) -> TrialResult:
    """Run `agent` on `task` in a fresh sandbox; tool-using agents take warm ones from `pool`."""
    config = config or TrialConfig()
    gate = start_gate or nullcontext_async
    trial_dir = new_trial_dir(trials_dir, task)
    result = TrialResult(
        task_name=task.name,
        trial_name=trial_dir.name,
        trial_uri=trial_dir.resolve().as_uri(),
        task_id={"path": str(task.path)},
        task_checksum=task_checksum(task.path),
        agent_info={"name": agent.name, "version": agent.version},
    )
    agent_timeout = task.config.agent.timeout_sec * config.agent_timeout_multiplier
    if config.max_agent_timeout_s is not None:
        agent_timeout = min(agent_timeout, config.max_agent_timeout_s)
    verifier_timeout = task.config.verifier.timeout_sec * config.verifier_timeout_multiplier
    (trial_dir / "config.json").write_text(
        json.dumps(
            {
                "task": str(task.path),
                "agent": agent.name,
                "runtime": runtime.name,
                "agent_timeout_s": agent_timeout,
                "verifier_timeout_s": verifier_timeout,
                **asdict(config),
            },
            indent=2,
        )
        + "\n"
    )
    sandbox: Sandbox | None = None
    tools: ToolLink | None = None
    try:
        async with gate():
            with timed(result.environment_setup):
                if pool is not None and agent.uses_tools:
                    slot = await pool.acquire(task, agent.tool_groups())
                    sandbox, tools = slot.sandbox, slot.tools
                else:
                    sandbox = await _start(runtime, task, config.sandbox_start_timeout_s)
        with timed(result.agent_setup):
            if agent.uses_tools and tools is None:
                from bureau.trials.mcp_link import open_tool_link

                tools = await open_tool_link(
                    sandbox, timeout_s=config.tool_server_timeout_s, groups=agent.tool_groups()
                )
        ctx = AgentContext(task, sandbox, agent_timeout, trial_dir / "agent", tools)
        with timed(result.agent_execution):
            outcome = await _run_agent(agent, ctx)
            result.agent_metadata = dict(outcome.metadata)
        if tools is not None:  # nothing of the agent's may run while the verifier does
            await tools.close()
            tools = None
        with timed(result.verifier):
            if task.separate_verifier:
                # Harbor's separate-verifier mode: test.sh runs in a fresh environment of its
                # own, which gets only the artifacts the agent handed over.
                agent_sandbox, sandbox = sandbox, None
                sandbox = await _separate_verifier(
                    runtime, task, agent_sandbox, trial_dir, config.sandbox_start_timeout_s
                )
            await _verify(task, sandbox, trial_dir, verifier_timeout, result)
    except BureauSystemError as exc:
        result.fail(exc.kind, exc)
    except Exception as exc:  # a bug in bureau itself: still a reported, masked trial
        result.fail(Kind.internal_error, exc)
    finally:
        if tools is not None:
            await tools.close()
        if sandbox is not None:
            try:
                await asyncio.to_thread(sandbox.stop)
            except Exception as exc:
                result.fail(kind_of(exc, Kind.internal_error), exc)
        result.finished_at = now()
        result.write(trial_dir)
    return result


async def _start(
    runtime: Runtime, task: TaskDir, timeout_s: float, *, verifier: bool = False
) -> Sandbox:
    start = functools.partial(runtime.start, task, timeout_s=timeout_s)
    if verifier:
        start = functools.partial(start, verifier=True)
    try:
        return await asyncio.wait_for(asyncio.to_thread(start), timeout_s * 1.1 + 1)
    except TimeoutError as exc:
        raise BureauSystemError(Kind.sandbox_start_timeout, f"no sandbox in {timeout_s} s") from exc
    except BureauSystemError:
        raise
    except Exception as exc:
        raise BureauSystemError(Kind.sandbox_start_failed, f"{type(exc).__name__}: {exc}") from exc


ARTIFACTS_DIR = "/logs/artifacts"


def artifact_sources(task: TaskDir) -> list[str]:
    """Inside paths the agent hands to a separate verifier: Harbor's convention folder, then
    each `artifacts` entry of task.toml (a path, or a table with a `source`)."""
    sources = [ARTIFACTS_DIR]
    declared = (task.config.model_extra or {}).get("artifacts")
    for entry in declared if isinstance(declared, list) else []:
        source = entry.get("source") if isinstance(entry, dict) else entry
        if isinstance(source, str) and source and source not in sources:
            sources.append(posixpath.join(task.config.environment.workdir, source))
    return sources


async def _separate_verifier(
    runtime: Runtime, task: TaskDir, agent_sandbox: Sandbox, trial_dir: Path, timeout_s: float
) -> Sandbox:
    """Move the artifacts out of the agent's sandbox, stop it, and start the verifier's."""
    if not runtime.supports_separate_verifier:
        await asyncio.to_thread(agent_sandbox.stop)
        raise BureauSystemError(
            Kind.sandbox_start_failed,
            f"the {runtime.name} runtime cannot start a separate verifier environment",
        )
    staged = trial_dir / "artifacts"
    kept: list[tuple[str, Path]] = []
    try:
        for source in artifact_sources(task):
            # Kept with the trial as Harbor keeps them: the convention folder's files at the
            # top, every other entry under its inside path.
            target = staged if source == ARTIFACTS_DIR else staged / source.lstrip("/")
            try:
                await asyncio.to_thread(agent_sandbox.download, source, target)
            except (FileNotFoundError, BureauSystemError):
                continue  # not produced, or not a file the sandbox hands out: Harbor skips it
            kept.append((source, target))
    finally:
        await asyncio.to_thread(agent_sandbox.stop)
    sandbox = await _start(runtime, task, timeout_s, verifier=True)
    try:
        for source, copy in kept:
            await asyncio.to_thread(sandbox.upload, copy, source)
    except Exception as exc:
        await asyncio.to_thread(sandbox.stop)
        raise BureauSystemError(Kind.upload_failed, f"artifacts: {exc}") from exc
    return sandbox


async def _run_agent(agent: Agent, ctx: AgentContext) -> AgentResult:
    try:
        return await asyncio.wait_for(agent.run(ctx), ctx.timeout_s + 1)
    except TimeoutError as exc:
        raise BureauSystemError(
            Kind.agent_timeout, f"{agent.name} ran past {ctx.timeout_s:.0f} s"
        ) from exc
    except BureauSystemError:
        raise
    except Exception as exc:
        raise BureauSystemError(Kind.agent_error, f"{type(exc).__name__}: {exc}") from exc


async def _verify(
    task: TaskDir, sandbox: Sandbox, trial_dir: Path, timeout_s: float, result: TrialResult
) -> None:
    verifier_dir = trial_dir / "verifier"
    image = task.verifier_image if task.separate_verifier else None
    bundled = image is not None and any(copy.target == "/tests" for copy in image.copies)
    try:
        if not bundled:  # a separate verifier's image already holds its tests
            await asyncio.to_thread(sandbox.upload, task.tests_dir, "/tests")
    except Exception as exc:
        raise BureauSystemError(Kind.upload_failed, f"tests/: {exc}") from exc
    # Paths come from the environment so the same command runs under every runtime
    # (`--isolation none` has no /tests).
    try:
        env = resolve_env_templates(task.config.verifier.env, dict(os.environ))
    except KeyError as exc:
        raise BureauSystemError(Kind.verifier_error, f"[verifier.env] {exc.args[0]}") from None
    run = await asyncio.to_thread(
        sandbox.exec,
        ["bash", "-c", 'exec bash "${BUREAU_TESTS_DIR:-/tests}/test.sh"'],
        timeout_s=timeout_s,
        phase="verifier",
        env=env,
    )
    (verifier_dir / "test-stdout.txt").write_text(run.stdout + run.stderr, encoding="utf-8")
    if run.timed_out:
        raise BureauSystemError(Kind.verifier_timeout, f"test.sh ran past {timeout_s:.0f} s")
    shutil.rmtree(verifier_dir / "logs", ignore_errors=True)
    await asyncio.to_thread(sandbox.download, "/logs/verifier", verifier_dir)
    if not any((verifier_dir / name).exists() for name in ("reward.json", "reward.txt")):
        raise BureauSystemError(
            Kind.reward_file_missing,
            f"test.sh exited {run.returncode} without writing a reward: "
            f"{(run.stderr or run.stdout).strip()[-300:]}",
        )
    try:
        reward = read_reward(verifier_dir)
    except RewardFileError as exc:
        raise BureauSystemError(Kind.verifier_error, str(exc)) from exc
    result.reward = reward.reward
    result.verifier_result = {"rewards": reward.values}
