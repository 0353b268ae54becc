"""The model harness runs a multi-step task (Harbor's `[[steps]]`) in one sandbox: a tool server
per step, the second prompt in the same conversation, each step verified, and one training
record whose steps carry their own rewards (the record's reward is the trial's: their mean)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from harness_fakes import ScriptedSampler

from bureau.harness.agent import HarnessAgent
from bureau.harness.loop import HarnessConfig
from bureau.harness.render import Renderer
from bureau.sandbox import get_runtime
from bureau.tasks.taskdir import load_task_dir
from bureau.trials.attempt import run_attempt
from bureau.trials.trial import TrialConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

TOML = """schema_version = "1.4"
[task]
name = "tests/harness-steps"
[[steps]]
name = "draft"
[[steps]]
name = "final"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
network_mode = "no-network"
"""
# The second step's verifier wants the first step's file as the first step left it.
TESTS = {
    "draft": '[ "$(cat /app/draft.txt)" = d1 ] && echo 1 > /logs/verifier/reward.txt '
    "|| echo 0 > /logs/verifier/reward.txt\n",
    "final": '[ "$(cat /app/draft.txt)" = d1 ] && [ "$(cat /app/final.txt)" = f2 ] '
    "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
}


def _task(root: Path) -> Path:
    (root / "environment").mkdir(parents=True)
    (root / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (root / "task.toml").write_text(TOML)
    for name, test in TESTS.items():
        (root / "steps" / name / "tests").mkdir(parents=True)
        (root / "steps" / name / "solution").mkdir()
        (root / "steps" / name / "instruction.md").write_text(f"Write the {name} file.\n")
        (root / "steps" / name / "tests" / "test.sh").write_text(test)
        (root / "steps" / name / "solution" / "solve.sh").write_text("true\n")
    return root


def _write(path: str, content: str) -> str:
    return (
        '<tool_call>\n{"name": "fs_write_text", "arguments": '
        f'{{"path": "{path}", "content": "{content}"}}}}\n</tool_call>'
    )


def _attempt(tmp_path: Path, qwen3: Any, script: list[str]) -> Any:
    sampler = ScriptedSampler(qwen3, script)
    config = HarnessConfig(max_turns=3, tool_prefixes=["fs_"])
    runtime = get_runtime("local", root=tmp_path / "sandboxes")
    try:
        return asyncio.run(
            run_attempt(
                load_task_dir(_task(tmp_path / "task")),
                lambda: HarnessAgent(sampler, Renderer(qwen3), config, "scripted"),
                runtime,
                tmp_path / "trials",
                config=TrialConfig(),
            )
        )
    finally:
        runtime.close()


def test_the_harness_runs_each_step_and_records_its_reward(tmp_path: Path, qwen3: Any) -> None:
    done = _attempt(
        tmp_path, qwen3, [_write("draft.txt", "d1"), "Drafted.", _write("final.txt", "f2"), "Done."]
    )
    assert done.error is None and done.agent_failure is None, done.result.exception_info
    record = done.record
    assert record.reward == 1.0 and done.passed
    assert record.steps == [
        {"name": "draft", "first_turn": 0, "reward": 1.0},
        {"name": "final", "first_turn": 2, "reward": 1.0},
    ]
    assert record.num_turns == 4 and record.stop_reason == "answered"
    assert "Write the final file." in str(record.messages[-4]["content"])


def test_a_failed_first_step_costs_both(tmp_path: Path, qwen3: Any) -> None:
    # The draft is wrong; the second step needs it as the first step should have left it.
    done = _attempt(
        tmp_path, qwen3, [_write("draft.txt", "xx"), "Drafted.", _write("final.txt", "f2"), "Done."]
    )
    assert done.error is None
    assert [step["reward"] for step in done.record.steps] == [0.0, 0.0]
    assert done.record.reward == 0.0 and done.passed is False
