"""Runs rounds of real trials whose agents leave processes behind, and reports what is left.

Run as its own process (`python leak_driver.py ROOT ROUNDS`) by `test_no_leaks.py`. The process
makes itself a child subreaper first: an orphan of anything it starts (bwrap's children, tool
servers, the agent's daemons) is then re-parented here instead of to the machine's init, where
it would be out of sight. So a child of this process that is not one of the runtime's own
(the zygote) is a process that bureau failed to reap or to end.

After every round it records its open descriptors, its children, their states, and every
process of the round's sandbox uids; the last line of its output is that report as JSON.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

from answer_task import answer_task

from bureau.sandbox import get_runtime
from bureau.sandbox.limits import CODE_UID_OFFSET, processes_of_uid
from bureau.sandbox.local import LocalRuntime, LocalSandbox
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import Agent, AgentContext, AgentResult
from bureau.trials.result import TrialResult
from bureau.trials.trial import TrialConfig, run_trial

_PR_SET_CHILD_SUBREAPER = 36

# What an agent leaves behind: a double fork, a loop that ignores SIGTERM and SIGHUP, a
# `setsid` sleeper, and a child that outlives its parent.
DAEMONS = (
    "(setsid sleep 300 >/dev/null 2>&1 &); "
    "nohup sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done' >/dev/null 2>&1 & "
    "python3 -c 'import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0: time.sleep(300)\n"
    "' ; "
    "sh -c 'sleep 300 & exit 0'; "
    "echo 42 > output/answer.txt; echo left"
)
TEST_SH = """#!/bin/bash
(setsid sleep 300 >/dev/null 2>&1 &)
if [ "$(cat /workspace/output/answer.txt 2>/dev/null)" = "42" ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""
SLOW_TEST_SH = "#!/bin/bash\n(setsid sleep 300 &)\nsleep 300\n"


class Leaver(Agent):
    """Leaves daemons through the code tool (`tools`), or through plain `exec`, then ends as
    `how` says: normally, past its time limit, by killing its own tool server, or with its
    sandbox stopped under it."""

    name = "leaver"

    def __init__(self, how: str, tools: bool) -> None:
        self.how, self.uses_tools = how, tools

    async def run(self, ctx: AgentContext) -> AgentResult:
        if ctx.tools is not None:
            result = await ctx.tools.call("code_run_shell", {"command": DAEMONS}, 30)
            assert "left" in str(result.content), result
        else:
            done = await asyncio.to_thread(
                ctx.sandbox.exec, ["bash", "-c", DAEMONS], timeout_s=30, phase="agent"
            )
            assert "left" in done.stdout, done
        if self.how == "timeout":
            await asyncio.to_thread(
                ctx.sandbox.exec, ["bash", "-c", DAEMONS + "; sleep 300"], timeout_s=300
            )
        elif self.how == "kill_server" and ctx.tools is not None:
            ctx.tools.proc.kill()
            await asyncio.to_thread(ctx.tools.proc.wait)
        elif self.how == "stop_sandbox":
            await asyncio.to_thread(ctx.sandbox.stop)
        return AgentResult()


def _slow_task(root: Path) -> TaskDir:
    task = answer_task(root, "slow", SLOW_TEST_SH)
    toml = task.path / "task.toml"
    toml.write_text(toml.read_text().replace("timeout_sec = 30", "timeout_sec = 2"))
    return load_task_dir(task.path)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _children() -> dict[int, str]:
    me = os.getpid()
    found = {}
    for task in Path(f"/proc/{me}/task").iterdir():
        for pid in (task / "children").read_text().split():
            found[int(pid)] = _state(int(pid))
    return found


async def _round(
    runtime: LocalRuntime, tasks: dict[str, TaskDir], trials: Path, uids: list[int]
) -> list[TrialResult]:
    config = TrialConfig(max_agent_timeout_s=3, verifier_reruns=0)
    runs: list[tuple[str, Agent]] = []
    for tools in (True, False):
        runs += [("answer", Leaver(how, tools)) for how in ("normal", "timeout", "stop_sandbox")]
    runs += [("answer", Leaver("kill_server", True)), ("slow", Leaver("normal", False))]
    gate = asyncio.Semaphore(4)

    async def one(task: str, agent: Agent) -> TrialResult:
        async with gate:
            return await run_trial(tasks[task], agent, runtime, trials, config)

    return await asyncio.gather(*(one(task, agent) for task, agent in runs))


def main() -> None:
    root, rounds = Path(sys.argv[1]), int(sys.argv[2])
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    runtime = get_runtime("local", root=root / "sandboxes")
    assert isinstance(runtime, LocalRuntime)
    uids: list[int] = []
    start = runtime.start

    def recording_start(*args: Any, **kwargs: Any) -> LocalSandbox:
        sandbox = start(*args, **kwargs)
        uids.append(sandbox.uid)
        return sandbox

    runtime.start = recording_start  # type: ignore[method-assign]
    tasks = {"answer": answer_task(root, "answer", TEST_SH), "slow": _slow_task(root)}
    report: dict[str, Any] = {"rounds": [], "enforcement": runtime.enforcement}
    for number in range(rounds):
        uids.clear()
        results = asyncio.run(_round(runtime, tasks, root / f"trials-{number}", uids))
        gc.collect()
        zygotes = {z._proc.pid for z in runtime._zygotes.values() if z._proc is not None}
        left = {
            uid: processes_of_uid(uid) + processes_of_uid(uid + CODE_UID_OFFSET) for uid in uids
        }
        report["rounds"].append(
            {
                "trials": len(results),
                "outcomes": sorted(f"{r.status}:{r.reward}" for r in results),
                "fds": len(os.listdir("/proc/self/fd")),
                "children": {
                    str(pid): state for pid, state in _children().items() if pid not in zygotes
                },
                "sandbox_processes": {str(uid): pids for uid, pids in left.items() if pids},
                "sandbox_folders": sorted(p.name for p in (root / "sandboxes").iterdir()),
            }
        )
    runtime.close()
    report["children_after_close"] = {str(pid): state for pid, state in _children().items()}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
