"""One trial: start, agent setup, agent run, verification, teardown.

Every phase has a timeout and every failure is attributed to the phase it came from. The
sandbox is stopped in `finally`, whatever happened; an agent that runs out of time is
`agent_timeout`, never a verifier failure; a verifier that leaves no valid reward file is a
system error, never a zero reward.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import json
import math
import os
import posixpath
import secrets
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import Runtime, Sandbox
from bureau.tasks.errors import RewardFileError
from bureau.tasks.image import resolve_env_templates
from bureau.tasks.reward import Reward, read_reward
from bureau.tasks.taskdir import TaskDir
from bureau.trials.agents import Agent, AgentContext, AgentResult
from bureau.trials.faults import FaultInjector, TrialFaults
from bureau.trials.judging import JUDGE_REQUESTS, MissingJudge
from bureau.trials.result import Timing, TrialResult, kind_of, now, task_checksum

if TYPE_CHECKING:  # the MCP SDK is an extra (`tools`); only tool-using trials import it
    from bureau.judge import JudgeClient
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
    missing_judge: MissingJudge = "fail"  # judge criteria with no judge: system error, or skip
    verifier_reruns: int = 2
    """Runs of test.sh after one that crashed (no reward, or one that cannot be read). The
    agent's output is fixed by then, so a rerun grades the same work again; a verifier that
    keeps crashing is a masked `verifier_error` or `reward_file_missing`."""


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
    judge: JudgeClient | None = None,
    faults: FaultInjector | None = None,
) -> TrialResult:
    """Run `agent` on `task` in a fresh sandbox; tool-using agents take warm ones from `pool`;
    `judge` answers the verifier's questions for LLM-judge criteria (`trials.judging`);
    `faults` injects failures for drills (`trials.faults`)."""
    config = config or TrialConfig()
    gate = start_gate or nullcontext_async
    trial_dir = new_trial_dir(trials_dir, task)
    injected = faults.for_trial(task.name) if faults is not None else None
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
    judging = Judging(judge, config.missing_judge, injected)
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
        if task.steps:
            handed, tools = tools, None  # _run_steps opens (and closes) a link per step
            sandbox = await _run_steps(
                task, agent, runtime, sandbox, trial_dir, config, result, judging, handed
            )
            return result
        ctx = AgentContext(task, sandbox, agent_timeout, trial_dir / "agent", tools, injected)
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
            reward = await _verify_with_reruns(
                task, sandbox, trial_dir, verifier_timeout, judging, config, result
            )
            result.reward, result.verifier_result = reward.reward, {"rewards": reward.values}
    except BureauSystemError as exc:
        result.fail(exc.kind, exc)
    except Exception as exc:  # a bug in bureau itself: still a reported, masked trial
        result.fail(Kind.storage_full if _disk_full(exc) else Kind.internal_error, exc)
    finally:
        if injected is not None:
            result.injected_faults = injected.events
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
    runtime: Runtime,
    task: TaskDir,
    agent_sandbox: Sandbox,
    trial_dir: Path,
    timeout_s: float,
    *,
    keep_agent_sandbox: bool = False,
) -> Sandbox:
    """Move the artifacts out of the agent's sandbox, stop it (unless a later step still
    needs it), and start the verifier's."""
    if not runtime.supports_separate_verifier:
        await asyncio.to_thread(agent_sandbox.stop)
        raise BureauSystemError(
            Kind.sandbox_start_failed,
            f"the {runtime.name} runtime cannot start a separate verifier environment",
        )
    staged = trial_dir / "artifacts"
    kept: list[tuple[str, Path]] = []
    refused = []
    try:
        for source in artifact_sources(task):
            # Kept with the trial as Harbor keeps them: the convention folder's files at the
            # top, every other entry under its inside path.
            target = staged if source == ARTIFACTS_DIR else staged / source.lstrip("/")
            try:
                await asyncio.to_thread(agent_sandbox.download, source, target)
            except (FileNotFoundError, BureauSystemError):
                continue  # not produced, or not a file the sandbox hands out: Harbor skips it
            except OSError as exc:
                if not _disk_full(exc):
                    raise
                # The agent decides how much it hands over: a full disk here is not a retry.
                refused.append(f"{source}: {exc}")
                continue
            kept.append((source, target))
    finally:
        if not keep_agent_sandbox:
            await asyncio.to_thread(agent_sandbox.stop)
    sandbox = await _start(runtime, task, timeout_s, verifier=True)
    # What the agent wrote is the agent's: an artifact that cannot be placed (too large for the
    # verifier's storage, a tree no copy survives) is left out, as Harbor leaves out what it
    # refuses, and the verifier grades without it. Failing the trial instead would let an
    # agent turn its own output into a masked system error.
    for source, copy in kept:
        try:
            await asyncio.to_thread(sandbox.upload, copy, source)
        except Exception as exc:
            refused.append(f"{source}: {type(exc).__name__}: {exc}")
    if refused:
        (staged / "not-handed-over.txt").write_text("\n".join(refused) + "\n")
    return sandbox


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


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
        if _disk_full(exc):  # the host's trial folder, not the agent's storage
            raise BureauSystemError(Kind.storage_full, f"{exc}") from exc
        raise BureauSystemError(Kind.agent_error, f"{type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class Judging:
    """What the verifier phase needs besides the sandbox: the judge, what to do without one,
    and the trial's injected faults."""

    judge: JudgeClient | None = None
    missing: MissingJudge = "fail"
    faults: TrialFaults | None = None


RERUN_KINDS = frozenset({Kind.reward_file_missing, Kind.verifier_error})
"""Verifier failures worth a second run: a crash. A timeout would only cost its time again,
and a judge that stayed away has had its own retries."""


async def _verify_with_reruns(
    task: TaskDir,
    sandbox: Sandbox,
    trial_dir: Path,
    timeout_s: float,
    judging: Judging,
    config: TrialConfig,
    result: TrialResult,
    reruns: list[dict[str, str]] | None = None,
) -> Reward:
    """`_verify`, run again (up to `config.verifier_reruns` times) after a crash; the crashed
    runs are listed in `result.verifier_reruns` (or `reruns`), their output kept beside."""
    listed = result.verifier_reruns if reruns is None else reruns
    verifier_dir = trial_dir / "verifier"
    for number in range(config.verifier_reruns + 1):
        try:
            return await _verify(task, sandbox, trial_dir, timeout_s, judging)
        except BureauSystemError as exc:
            if exc.kind not in RERUN_KINDS or number == config.verifier_reruns:
                raise
            listed.append({"kind": exc.kind.value, "message": exc.message[:300]})
            stdout = verifier_dir / "test-stdout.txt"
            if stdout.exists():
                stdout.rename(verifier_dir / f"test-stdout.crashed-{number + 1}.txt")
            for name in ("reward.json", "reward.txt", "grading.json", JUDGE_REQUESTS):
                (verifier_dir / name).unlink(missing_ok=True)
            await _clear_verifier_logs(sandbox)
    raise AssertionError("unreachable")


async def _verify(
    task: TaskDir,
    sandbox: Sandbox,
    trial_dir: Path,
    timeout_s: float,
    judging: Judging | None = None,
) -> Reward:
    judging = judging or Judging()
    faults = judging.faults
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
    if faults is not None:  # the host writes the verifier's output into the trial folder
        faults.check_disk(verifier_dir)
    command = 'exec bash "${BUREAU_TESTS_DIR:-/tests}/test.sh"'
    if faults is not None and faults.injected("verifier_crash", "verifier"):
        command = "kill -KILL $$"  # test.sh dies before it writes anything
    run = await asyncio.to_thread(
        sandbox.exec,
        ["bash", "-c", command],
        timeout_s=timeout_s,
        phase="verifier",
        env=env,
    )
    (verifier_dir / "test-stdout.txt").write_text(run.stdout + run.stderr, encoding="utf-8")
    if run.timed_out:
        raise BureauSystemError(Kind.verifier_timeout, f"test.sh ran past {timeout_s:.0f} s")
    shutil.rmtree(verifier_dir / "logs", ignore_errors=True)
    await asyncio.to_thread(sandbox.download, "/logs/verifier", verifier_dir)
    rewarded = any((verifier_dir / name).exists() for name in ("reward.json", "reward.txt"))
    if not rewarded and (verifier_dir / JUDGE_REQUESTS).exists():
        from bureau.trials.judging import complete_with_judge

        await complete_with_judge(verifier_dir, judging.judge, judging.missing, faults)
    if not any((verifier_dir / name).exists() for name in ("reward.json", "reward.txt")):
        raise BureauSystemError(
            Kind.reward_file_missing,
            f"test.sh exited {run.returncode} without writing a reward: "
            f"{(run.stderr or run.stdout).strip()[-300:]}",
        )
    try:
        return read_reward(verifier_dir)
    except RewardFileError as exc:
        raise BureauSystemError(Kind.verifier_error, str(exc)) from exc


async def _run_steps(
    task: TaskDir,
    agent: Agent,
    runtime: Runtime,
    sandbox: Sandbox,
    trial_dir: Path,
    config: TrialConfig,
    result: TrialResult,
    judging: Judging,
    tools: ToolLink | None = None,
) -> Sandbox | None:
    """A multi-step task, as Harbor runs one: in the same sandbox, each step stages its
    `workdir/` files (and runs their setup.sh), runs the agent on the step's prompt (with a
    tool server of its own for an agent that uses tools, `tools` for the first step, closed
    before the step is verified), and is verified (shared, or in a separate verifier of its
    own); a step below its `min_reward` ends the trial. The reward is the mean over the
    verified steps, per key (a key a step did not report counts 0), or the last step's with
    `multi_step_reward_strategy = "final"`.

    A setup.sh that fails after the first step may have been broken by the agent's own
    earlier work: that step scores 0 and the trial ends, a model failure like any other.
    Returns the sandbox still to stop.
    """
    if not agent.supports_steps:
        raise BureauSystemError(
            Kind.agent_error, f"the {agent.name} agent does not run multi-step tasks"
        )
    steps: list[dict[str, Any]] = []
    names = [str(step["name"]) for step in task.steps]
    current: Sandbox | None = sandbox
    for index, name in enumerate(names):
        part = task.for_step(name)
        step_dir = trial_dir / "steps" / name
        for sub in ("agent", "verifier"):
            (step_dir / sub).mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {"step_name": name}
        steps.append(record)
        assert current is not None
        failure = await _prepare_step(task, name, current, config, first=index == 0)
        if failure is not None:
            record["rewards"], record["reason"] = {"reward": 0.0}, failure
            break
        timeout = part.config.agent.timeout_sec * config.agent_timeout_multiplier
        if config.max_agent_timeout_s is not None:
            timeout = min(timeout, config.max_agent_timeout_s)
        # The trial's agent and verifier timings span all steps: first start to last finish.
        agent_time, verifier_time = Timing(), Timing()
        try:
            if agent.uses_tools and tools is None:
                from bureau.trials.mcp_link import open_tool_link

                tools = await open_tool_link(
                    current, timeout_s=config.tool_server_timeout_s, groups=agent.tool_groups()
                )
            ctx = AgentContext(part, current, timeout, step_dir / "agent", tools, judging.faults)
            with timed(agent_time):
                outcome = await _run_agent(agent, ctx)
        finally:
            if tools is not None:  # nothing of the agent's may run while the verifier does
                await tools.close()
                tools = None
        _extend(result.agent_execution, agent_time)
        record["agent_metadata"] = dict(outcome.metadata)
        verifier_timeout = part.config.verifier.timeout_sec * config.verifier_timeout_multiplier
        with timed(verifier_time):
            if part.separate_verifier:
                last = index == len(names) - 1
                verifier = await _separate_verifier(
                    runtime, part, current, step_dir, config.sandbox_start_timeout_s,
                    keep_agent_sandbox=not last,
                )  # fmt: skip
                current = current if not last else None
                try:
                    reward = await _verify_with_reruns(
                        part, verifier, step_dir, verifier_timeout, judging, config, result
                    )
                finally:
                    await asyncio.to_thread(verifier.stop)
            else:
                await _reset_verifier_folders(current)
                reward = await _verify_with_reruns(
                    part, current, step_dir, verifier_timeout, judging, config, result
                )
        _extend(result.verifier, verifier_time)
        record["rewards"] = reward.values
        threshold = part.min_reward
        if threshold is not None and _below(reward.values, threshold):
            record["reason"] = f"below min_reward {threshold}: remaining steps not run"
            break
    result.agent_metadata = {"steps": [s.get("agent_metadata", {}) for s in steps]}
    rewards = _combine_steps([s["rewards"] for s in steps], task.config)
    result.verifier_result = {"rewards": rewards, "step_results": steps}
    result.reward = rewards["reward"] if "reward" in rewards else fmean(rewards.values())
    return current


def _extend(total: Timing, part: Timing) -> None:
    total.started_at = total.started_at or part.started_at
    total.finished_at = part.finished_at


async def _prepare_step(
    task: TaskDir, name: str, sandbox: Sandbox, config: TrialConfig, *, first: bool
) -> str | None:
    """Stage steps/<name>/workdir/ into the workdir and run its setup.sh; the reason when a
    setup.sh after the first step fails (a failing first one is the task's own defect)."""
    staged = task.path / "steps" / name / "workdir"
    if not staged.is_dir():
        return None
    try:
        await asyncio.to_thread(sandbox.upload, staged, sandbox.workdir)
    except Exception as exc:
        raise BureauSystemError(Kind.upload_failed, f"steps/{name}/workdir: {exc}") from exc
    if not (staged / "setup.sh").is_file():
        return None
    run = await asyncio.to_thread(
        sandbox.exec,
        ["bash", posixpath.join(sandbox.workdir, "setup.sh")],
        timeout_s=config.sandbox_start_timeout_s,
        phase="setup",
    )
    if run.returncode == 0 and not run.timed_out:
        return None
    why = f"steps/{name}/workdir/setup.sh exited {run.returncode}: {run.stderr.strip()[-300:]}"
    if first:
        raise BureauSystemError(Kind.sandbox_start_failed, why)
    return why


async def _clear_verifier_logs(sandbox: Sandbox) -> None:
    """Before a verifier's rerun: nothing of the crashed run's output."""
    await _empty_inside(sandbox, "/logs/verifier")


async def _reset_verifier_folders(sandbox: Sandbox) -> None:
    """Before a shared verifier of a later step: no tests or rewards of an earlier one."""
    await _empty_inside(sandbox, "/tests", "/logs/verifier")


async def _empty_inside(sandbox: Sandbox, *folders: str) -> None:
    globs = " ".join(f"{folder}/* {folder}/.[!.]*" for folder in folders)
    await asyncio.to_thread(
        sandbox.exec, ["bash", "-c", f"rm -rf {globs}"], timeout_s=60, phase="full"
    )


def _below(rewards: dict[str, float], threshold: float | dict[str, float]) -> bool:
    wanted = {"reward": threshold} if isinstance(threshold, int | float) else threshold
    return any(rewards.get(key, -math.inf) < value for key, value in wanted.items())


def _combine_steps(per_step: list[dict[str, float]], task_config: Any) -> dict[str, float]:
    """Harbor's trial reward of a multi-step task: the per-key mean over the steps (a key a
    step lacks counts 0), or the last step's rewards with the "final" strategy."""
    strategy = (task_config.model_extra or {}).get("multi_step_reward_strategy")
    if strategy == "final":
        return dict(per_step[-1])
    keys = sorted({key for rewards in per_step for key in rewards})
    return {key: fmean(rewards.get(key, 0.0) for rewards in per_step) for key in keys}
