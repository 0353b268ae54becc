"""Pre-evaluation: the taxonomy by hand on made-up trials, and `bureau preeval` end to end with
a tiny random model in sandboxes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from bureau.evaluation.preeval import gate_passes, load_results, taxonomy, write_preeval
from bureau.report.page import write_report
from bureau.trials.result import Timing, TrialResult
from report_support import check_report


def trial(name: str, status: str, reward: float | None, agent_started: bool) -> TrialResult:
    moment = datetime(2026, 12, 2, tzinfo=UTC)
    return TrialResult(
        task_name="t", trial_name=name, trial_uri="file:///x", task_id={"path": "x"},
        task_checksum="0", agent_info={"name": "harness", "version": "1"}, status=status,
        reward=reward,
        agent_execution=Timing(started_at=moment if agent_started else None),
    )  # fmt: skip


def test_every_trial_lands_in_one_class() -> None:
    results = [
        trial("a", "completed", 1.0, True),
        trial("b", "completed", 0.5, True),
        trial("c", "completed", 0.0, True),
        trial("d", "agent_timeout", None, True),
        trial("e", "tool_server_failed", None, True),  # the agent's own tools, once it ran
        trial("f", "tool_server_failed", None, False),  # before the agent: the machinery's
        trial("g", "sandbox_start_failed", None, False),
        trial("h", "sandbox_start_failed", None, False),
    ]
    found = taxonomy(results, examples=1)
    assert found["trials"] == 8
    assert found["completed"] == {"count": 3, "mean_reward": 0.5, "full_reward": 1}
    assert found["model_failures"] == {"agent_timeout": 1, "tool_server_failed": 1}
    assert found["system_errors"] == {
        "sandbox_start_failed": {"count": 2, "rate": 0.25, "examples": ["g"]},
        "tool_server_failed": {"count": 1, "rate": 0.125, "examples": ["f"]},
    }
    assert found["system_error_rate"] == 0.375
    assert gate_passes(found, 0.4) and not gate_passes(found, 0.005)
    assert not gate_passes(taxonomy([]), 1.0)  # nothing ran: nothing to train on


def test_preeval_runs_a_policy_and_gates_training(
    small_dataset: Path, tiny_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "pre"
    command = [
        sys.executable, "-m", "bureau.cli.main", "preeval", str(small_dataset),
        "--model", str(tiny_model), "--out", str(out), "--max-tasks", "2", "--concurrency", "2",
        "--set", "harness.max_turns=2", "--set", "harness.max_tokens_per_turn=16",
        "--set", "harness.context_length=4096",
    ]  # fmt: skip
    if shutil.which("bwrap") is None:
        command += ["--set", "isolation=none"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    report = json.loads((out / "preeval.json").read_text())
    assert report["format"] == "bureau-preeval/1" and report["trials"] == 2
    counted = report["completed"]["count"] + sum(report["model_failures"].values())
    counted += sum(row["count"] for row in report["system_errors"].values())
    assert counted == 2
    assert done.returncode == (0 if report["passed"] else 1), done.stdout[-2000:]
    assert report["passed"] == (report["system_error_rate"] <= 0.005)
    assert "pre-evaluation: 2 trials" in done.stdout
    # The file says what the trials say.
    assert taxonomy(load_results(out / "trials"))["trials"] == 2
    # Its report: the gate's verdict and the taxonomy of the same two trials.
    page = write_report(out).read_text()
    assert check_report(page)["Error taxonomy"] >= 1
    assert "system-error gate" in page and ("passed: " in page or "failed: " in page)
    assert write_preeval(tmp_path, taxonomy([]), 0.005).exists()
