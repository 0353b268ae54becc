"""Injected faults go through the real recovery: a tool server that dies or hangs under a call
restarts and the model reads an error; a sandbox that dies is `sandbox_crashed` and retried; a
verifier that crashes runs again; a full trial folder is `storage_full` and retried. Each
fault is recorded in the trial's result.

Real bubblewrap sandboxes and MCP tool servers.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from answer_task import answer_task

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.harness.agent import MCPTools
from bureau.sandbox import get_runtime
from bureau.sandbox.base import Runtime
from bureau.tasks.taskdir import TaskDir
from bureau.trials.agents import Agent, AgentContext, AgentResult, OracleAgent
from bureau.trials.faults import FaultConfig, FaultInjector, TrialFaults
from bureau.trials.mcp_link import ToolLink
from bureau.trials.result import TrialResult
from bureau.trials.retry import RetryPolicy, with_retries
from bureau.trials.trial import TrialConfig, run_trial

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

# 1 when output/answer.txt says 42. With FLAKY, the first run in a sandbox dies before it
# writes anything (its marker survives in the verifier's /tmp for the rerun).
TEST_SH = """#!/bin/bash
{flaky}
if [ "$(cat /workspace/output/answer.txt 2>/dev/null)" = "42" ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""
FLAKY = "if [ ! -e /tmp/ran-once ]; then touch /tmp/ran-once; kill -KILL $$; fi"


def make_task(root: Path, *, flaky: bool = False) -> TaskDir:
    name = "flaky" if flaky else "task"
    return answer_task(root, name, TEST_SH.format(flaky=FLAKY if flaky else ""))


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    found = get_runtime("local", isolation="bwrap")
    yield found
    found.close()


def faults(**rates: float) -> TrialFaults:
    return TrialFaults(FaultConfig(**rates), "test")


def with_link(runtime: Runtime, root: Path, body: Callable[[ToolLink], Awaitable[None]]) -> None:
    """Run `body` with a tool link to a fresh sandbox (filesystem tools), in one event loop."""
    from bureau.trials.mcp_link import open_tool_link

    async def main() -> None:
        sandbox = await asyncio.to_thread(runtime.start, make_task(root), timeout_s=60)
        try:
            opened = await open_tool_link(sandbox, timeout_s=60, groups=["filesystem"])
            try:
                await body(opened)
            finally:
                await opened.close()
        finally:
            await asyncio.to_thread(sandbox.stop)

    asyncio.run(main())


def test_a_killed_tool_server_restarts_and_the_model_reads_an_error(
    runtime: Runtime, tmp_path: Path
) -> None:
    with_link(runtime, tmp_path, _killed_server)


async def _killed_server(opened: ToolLink) -> None:
    injected = faults(tool_server_kill=1.0)
    tools = MCPTools(opened, max_restarts=3, faults=injected)
    first = await tools.call("fs_write_text", {"path": "output/a.txt", "content": "x"}, 30)
    assert first.failed and first.is_error and "restarted" in first.text
    assert opened.restarts == 1
    assert injected.events[0]["fault"] == "tool_server_kill" and injected.events[0]["call"] == 0
    injected.config = FaultConfig()  # no more faults: the restarted server answers
    listed = await tools.call("fs_list", {"path": "."}, 30)
    assert not listed.is_error and "output" in listed.text


def test_a_hung_call_times_out_and_the_server_restarts(runtime: Runtime, tmp_path: Path) -> None:
    with_link(runtime, tmp_path, _hung_call)


async def _hung_call(opened: ToolLink) -> None:
    injected = faults(tool_hang=1.0)
    tools = MCPTools(opened, max_restarts=1, faults=injected)
    hung = await tools.call("fs_list", {"path": "."}, 1.0)
    assert hung.failed and "gave no answer in 1.0 s" in hung.text
    # The restart budget is spent: the next failure ends the trial as the tool's.
    with pytest.raises(BureauSystemError) as caught:
        await tools.call("fs_list", {"path": "."}, 1.0)
    assert caught.value.kind == SystemErrorKind.tool_server_failed
    assert [e["fault"] for e in injected.events] == ["tool_hang", "tool_hang"]


def test_a_killed_sandbox_is_a_sandbox_crash_not_a_tool_failure(
    runtime: Runtime, tmp_path: Path
) -> None:
    with_link(runtime, tmp_path, _killed_sandbox)


async def _killed_sandbox(opened: ToolLink) -> None:
    injected = faults(sandbox_kill=1.0)
    injected.kill_sandbox_at = 1
    tools = MCPTools(opened, max_restarts=3, faults=injected)
    assert not (await tools.call("fs_list", {"path": "."}, 30)).is_error
    with pytest.raises(BureauSystemError) as caught:
        await tools.call("fs_list", {"path": "."}, 30)
    assert caught.value.kind == SystemErrorKind.sandbox_crashed
    assert injected.events[0]["fault"] == "sandbox_kill"


def test_a_verifier_that_crashes_once_runs_again_on_the_same_work(
    runtime: Runtime, tmp_path: Path
) -> None:
    result = asyncio.run(
        run_trial(make_task(tmp_path, flaky=True), OracleAgent(), runtime, tmp_path)
    )
    assert result.status == "completed" and result.reward == 1.0
    assert [r["kind"] for r in result.verifier_reruns] == ["reward_file_missing"]
    crashed = tmp_path / result.trial_name / "verifier" / "test-stdout.crashed-1.txt"
    assert crashed.is_file()


def test_a_verifier_that_always_crashes_is_masked_after_its_reruns(
    runtime: Runtime, tmp_path: Path
) -> None:
    config = TrialConfig(verifier_reruns=1)
    result = asyncio.run(
        run_trial(
            make_task(tmp_path),
            OracleAgent(),
            runtime,
            tmp_path,
            config,
            faults=FaultInjector(FaultConfig(verifier_crash=1.0)),
        )
    )
    assert result.status == "reward_file_missing" and result.reward is None
    assert len(result.verifier_reruns) == 1
    assert [f["fault"] for f in result.injected_faults] == ["verifier_crash"] * 2


def test_a_full_trial_folder_is_storage_full_and_retried(runtime: Runtime, tmp_path: Path) -> None:
    task = make_task(tmp_path)
    # A seed that puts the disk fault on the first attempt and not on the second.
    config = FaultConfig(disk_full=0.5)
    while True:
        first, second = (TrialFaults(config, f"{config.seed}/{task.name}/{n}") for n in (0, 1))
        if first._disk_full and not second._disk_full:
            break
        config = config.model_copy(update={"seed": config.seed + 1})
    injector = FaultInjector(config)
    result = asyncio.run(
        with_retries(
            lambda: run_trial(task, OracleAgent(), runtime, tmp_path, faults=injector),
            RetryPolicy(backoff_s=0.01),
            tmp_path,
        )
    )
    assert result.status == "completed" and result.reward == 1.0
    assert [r["status"] for r in result.retried] == ["storage_full"]
    failed = tmp_path / result.retried[0]["trial_name"] / "result.json"
    assert '"fault": "disk_full"' in failed.read_text()


class ToolUser(Agent):
    """Writes the answer with the filesystem tool, through faults like the harness's."""

    name = "tool-user"
    uses_tools = True

    async def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.tools is not None
        tools = MCPTools(ctx.tools, max_restarts=2, faults=ctx.faults)
        answer = {"path": "output/answer.txt", "content": "42", "mode": "overwrite"}
        for _ in range(2):  # a sandbox kill comes at one of the first two calls
            await tools.call("fs_write_text", answer, 5)
        return AgentResult({"restarts": ctx.tools.restarts})


def test_a_sandbox_killed_under_the_agent_is_retried_from_scratch(
    runtime: Runtime, tmp_path: Path
) -> None:
    task = make_task(tmp_path)
    config = FaultConfig(sandbox_kill=1.0)
    calls = []

    async def attempt() -> TrialResult:
        calls.append(1)
        rates = config if len(calls) == 1 else FaultConfig()
        return await run_trial(task, ToolUser(), runtime, tmp_path, faults=FaultInjector(rates))

    result = asyncio.run(with_retries(attempt, RetryPolicy(backoff_s=0.01), tmp_path))
    assert result.status == "completed" and result.reward == 1.0
    assert [r["status"] for r in result.retried] == ["sandbox_crashed"]
    assert len(calls) == 2
