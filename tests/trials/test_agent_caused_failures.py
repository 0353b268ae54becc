"""Failures an agent causes are the agent's: graded 0 with a reason, never a system error.

Each test runs a real trial (bubblewrap sandbox, the task's own verifier) with an agent that
tries to break its own grading. A system error would mask the trial from training, so an
agent that could cause one would escape its 0; every test asserts the trial completed, its
reward is 0 and the reason is on record.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from bureau.sandbox import get_runtime
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import Agent, AgentContext, AgentResult
from bureau.trials.result import TrialResult
from bureau.trials.trial import TrialConfig, run_trial

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

# The verifier: 1 when output/answer.txt says 42, else 0, with the reason in its output.
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /workspace/output/answer.txt 2>/dev/null)" = "42" ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
echo "graded: $(cat /logs/verifier/reward.txt)"
"""


def _task(root: Path, storage_mb: int = 32) -> TaskDir:
    path = root / "task"
    for sub in ("environment/workspace/output", "tests", "solution"):
        (path / sub).mkdir(parents=True)
    (path / "instruction.md").write_text("Write 42 to output/answer.txt.\n")
    (path / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (path / "tests" / "test.sh").write_text(TEST_SH)
    (path / "solution" / "solve.sh").write_text("#!/bin/bash\necho 42 > output/answer.txt\n")
    (path / "task.toml").write_text(
        f"[environment]\nstorage_mb = {storage_mb}\nmemory_mb = 1024\n"
        "[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n"
    )
    return load_task_dir(path)


class ShellAgent(Agent):
    """Runs one shell script in the sandbox as its whole episode."""

    name = "shell"

    def __init__(self, script: str) -> None:
        self.script = script

    async def run(self, ctx: AgentContext) -> AgentResult:
        done = await asyncio.to_thread(
            ctx.sandbox.exec, ["bash", "-c", self.script], timeout_s=50, phase="agent"
        )
        return AgentResult(metadata={"exit": done.returncode, "stderr": done.stderr[-300:]})


def _trial(tmp_path: Path, script: str) -> TrialResult:
    runtime = get_runtime("local", root=tmp_path / "sandboxes")
    try:
        return asyncio.run(
            run_trial(
                _task(tmp_path), ShellAgent(script), runtime, tmp_path / "trials", TrialConfig()
            )
        )
    finally:
        runtime.close()


@pytest.mark.parametrize(
    "script",
    [
        # every byte of the agent's storage
        "dd if=/dev/zero of=/workspace/fill bs=1M 2>/dev/null; dd if=/dev/zero of=/tmp/f bs=64k",
        # every inode
        "mkdir -p /tmp/i && cd /tmp/i && for i in $(seq 1 20000); do : > f$i || break; done",
    ],
    ids=["disk", "inodes"],
)
def test_an_agent_that_fills_its_storage_still_gets_graded(tmp_path: Path, script: str) -> None:
    result = _trial(tmp_path, script + "; echo 41 > /workspace/output/answer.txt; true")
    assert result.status == "completed", result.exception_info
    assert result.reward == 0.0
    log = next((tmp_path / "trials").glob("*/verifier/test-stdout.txt")).read_text()
    assert "graded: 0" in log


HOGS = (
    'for i in 1 2 3 4; do python3 -c \'import time; x = [b"x" * (50 << 20) for _ in range(8)];'
    " time.sleep(5)' & done; wait"
)


def test_an_agent_that_runs_out_of_memory_with_full_storage_still_gets_graded(
    tmp_path: Path,
) -> None:
    """Four processes of 400 MiB against memory_mb 1024, after the agent filled its tmpfs:
    the kernel kills the agent's processes inside its own memory cgroup, whose files stay
    charged to it, and the verifier runs in a cgroup of its own with its whole budget."""
    fill = "dd if=/dev/zero of=/workspace/fill bs=1M 2>/dev/null; "
    result = _trial(tmp_path, fill + HOGS + "; echo 41 > /workspace/output/answer.txt; true")
    assert result.status == "completed", result.exception_info
    assert result.reward == 0.0
    assert "Killed" in str(result.agent_metadata.get("stderr")), result.agent_metadata


def test_control_a_right_answer_passes(tmp_path: Path) -> None:
    result = _trial(tmp_path, "echo 42 > /workspace/output/answer.txt")
    assert (result.status, result.reward) == ("completed", 1.0)
