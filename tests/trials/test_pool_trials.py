"""The warm pool and a tool-using agent, end to end in bubblewrap sandboxes."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from bureau.sandbox import get_runtime
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import Agent, AgentContext, AgentResult
from bureau.trials.pool import WarmPool
from bureau.trials.trial import run_trial

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

TEST_SH = """#!/usr/bin/env bash
out="${BUREAU_VERIFIER_DIR:-/logs/verifier}"
if [ "$(cat "${BUREAU_WORKSPACE:-/app}/output/answer.txt" 2>/dev/null)" = "42" ]; then
  echo 1 > "$out/reward.txt"; else echo 0 > "$out/reward.txt"; fi
"""


def make_task(root: Path, name: str, note: str) -> TaskDir:
    path = root / name
    (path / "environment" / "workspace").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "environment" / "workspace" / "note.txt").write_text(note)
    (path / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (path / "instruction.md").write_text("Write the answer to the question in note.txt.\n")
    (path / "tests" / "test.sh").write_text(TEST_SH)
    (path / "task.toml").write_text(
        '[environment]\nworkdir = "/app"\nstorage_mb = 256\n[agent]\ntimeout_sec = 60.0\n'
    )
    return load_task_dir(path)


class ToolAgent(Agent):
    """Reads the note with the filesystem tool and writes the answer with it."""

    name = "tool-agent"
    uses_tools = True

    async def run(self, ctx: AgentContext) -> AgentResult:
        assert ctx.tools is not None
        note = await ctx.tools.call("fs_read_text", {"path": "note.txt"}, 30)
        text = "\n".join(getattr(c, "text", "") for c in note.content)
        answer = "42" if "six times seven" in text else "0"
        write = {"path": "output/answer.txt", "content": answer, "mode": "overwrite"}
        await ctx.tools.call("fs_write_text", write, 30)
        return AgentResult({"tools": len(ctx.tools.tools)})


def test_pool_serves_each_task_its_own_files_and_refills(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = get_runtime("local", root=tmp_path / "sbx")
        pool = WarmPool(runtime, tmp_path / "pool", size=1)
        a = make_task(tmp_path, "a", "six times seven")
        b = make_task(tmp_path, "b", "something else")
        try:
            await pool.warm(a)
            first = await pool.acquire(a)
            listing = await first.tools.call("fs_read_text", {"path": "note.txt"}, 30)
            assert "six times seven" in listing.content[0].text  # type: ignore[union-attr]
            second = await pool.acquire(b)  # the refill, or a slot started on demand
            other = await second.tools.call("fs_read_text", {"path": "note.txt"}, 30)
            assert "something else" in other.content[0].text  # type: ignore[union-attr]
            assert first.sandbox.id != second.sandbox.id
            await first.close()
            await first.close()  # idempotent
            await second.close()
        finally:
            await pool.close()
            runtime.close()

    asyncio.run(scenario())


def test_tool_using_trial_from_the_pool_is_graded(tmp_path: Path) -> None:
    async def scenario() -> list[tuple[str, float | None, bool]]:
        runtime = get_runtime("local", root=tmp_path / "sbx")
        pool = WarmPool(runtime, tmp_path / "pool", size=1)
        try:
            out = []
            for name, note in (("right", "six times seven"), ("wrong", "nothing here")):
                task = make_task(tmp_path, name, note)
                result = await run_trial(task, ToolAgent(), runtime, tmp_path / "trials", pool=pool)
                assert int(result.agent_metadata["tools"]) >= 8  # every group is served
                out.append((result.status, result.reward, result.agent_setup.seconds is not None))
            return out
        finally:
            await pool.close()
            runtime.close()

    assert asyncio.run(scenario()) == [("completed", 1.0, True), ("completed", 0.0, True)]


class FilesystemAgent(ToolAgent):
    """The same agent, asking for a server with the filesystem group only."""

    def tool_groups(self) -> list[str] | None:
        return ["filesystem"]

    async def run(self, ctx: AgentContext) -> AgentResult:
        result = await super().run(ctx)
        assert ctx.tools is not None
        result.metadata["prefixes"] = sorted({t.name.split("_")[0] for t in ctx.tools.tools})
        return result


def test_an_agent_gets_a_server_with_only_the_groups_it_asks_for(tmp_path: Path) -> None:
    """Fewer groups, fewer imports: the server holds only the filesystem tools, whether it comes
    from the pool (which then does not hand out its slots of every group) or is started for the
    trial, and the trial is graded."""

    async def scenario() -> list[tuple[str, float | None, object]]:
        runtime = get_runtime("local", root=tmp_path / "sbx")
        pool = WarmPool(runtime, tmp_path / "pool", size=1)
        task = make_task(tmp_path, "right", "six times seven")
        try:
            await pool.warm(task)  # a slot whose server holds every group
            out = []
            for p in (pool, None):
                agent = FilesystemAgent()
                result = await run_trial(task, agent, runtime, tmp_path / "trials", pool=p)
                out.append((result.status, result.reward, result.agent_metadata["prefixes"]))
            every = await pool.acquire(task)  # the slot of every group is still there
            assert len(every.tools.tools) >= 8
            await every.close()
            return out
        finally:
            await pool.close()
            runtime.close()

    assert asyncio.run(scenario()) == [("completed", 1.0, ["fs"])] * 2


def test_a_pooled_sandbox_holds_what_a_cold_start_would(tmp_path: Path) -> None:
    """The folders the Dockerfile's RUN mkdir makes (a bureau task's `output/`) and the files
    it copies besides the workspace are there in a sandbox taken from the pool, as in one
    started for the trial: an agent's program that writes output/answer.json works in both."""
    task = make_task(tmp_path, "image", "six times seven")
    (task.path / "environment" / "extra").mkdir()
    (task.path / "environment" / "extra" / "notes.txt").write_text("from the image\n")
    (task.path / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY workspace/ /app/\nCOPY extra/ /app/extra/\n"
        "RUN mkdir -p /app/output /app/cache\nWORKDIR /app\n"
    )
    task = load_task_dir(task.path)

    async def listing(pool: WarmPool | None, runtime) -> tuple[str, str]:  # type: ignore[no-untyped-def]
        from bureau.trials.mcp_link import open_tool_link

        if pool is not None:
            await pool.warm(task)
            slot = await pool.acquire(task)
            sandbox, tools = slot.sandbox, slot.tools
        else:
            sandbox = await asyncio.to_thread(runtime.start, task, timeout_s=60)
            tools = await open_tool_link(sandbox, timeout_s=60)
        try:
            found = await tools.call("fs_list", {"path": "."}, 30)
            extra = await tools.call("fs_read_text", {"path": "extra/notes.txt"}, 30)
            return found.content[0].text, extra.content[0].text  # type: ignore[union-attr]
        finally:
            await tools.close()
            await asyncio.to_thread(sandbox.stop)

    async def scenario() -> list[tuple[str, str]]:
        runtime = get_runtime("local", root=tmp_path / "sbx")
        pool = WarmPool(runtime, tmp_path / "pool", size=1)
        try:
            return [await listing(pool, runtime), await listing(None, runtime)]
        finally:
            await pool.close()
            runtime.close()

    pooled, cold = asyncio.run(scenario())
    for names, notes in (pooled, cold):
        assert "output" in names and "cache" in names and "note.txt" in names, names
        assert "from the image" in notes
    assert pooled == cold
