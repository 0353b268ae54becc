"""Harness trials through the CLI and their token-in/token-out audit, for any engine.

`run_and_audit` runs `bureau tasks check --agent harness` on three tasks, two attempts each,
and `bureau audit tito` on the run, asserting what every engine must give: groups per task,
multi-turn trajectories with tool calls, ATIF files, and no token mismatch. It returns the
audit report (logprob agreement), which each engine's test bounds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from report_support import check_report

HARNESS_FLAGS = [
    *(
        "--tool-prefix",
        "fs_list",
        "--tool-prefix",
        "fs_read_text",
        "--tool-prefix",
        "fs_write_text",
    ),
    *("--max-turns", "6", "--context-length", "4096", "--max-tasks", "3", "--attempts", "2"),
    *("--max-tokens-per-turn", "96", "--concurrency", "3", "--agent-timeout", "240"),
]


def bureau(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_and_audit(dataset: Path, model: Path, out: Path, *engine: str) -> dict[str, Any]:
    done = bureau(
        "tasks", "check", str(dataset), "--agent", "harness", "--model", str(model),
        "--out", str(out), *engine, *HARNESS_FLAGS,
    )  # fmt: skip
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no system errors" in done.stdout

    from bureau.records import read_parquet

    records = read_parquet(out / "trajectories.parquet")
    assert len(records) == 6
    # Two attempts at each of 3 tasks: one group per task, for group-relative advantages.
    assert sorted(Counter(r.group_id for r in records).values()) == [2, 2, 2]
    assert all(r.group_id == r.task_name for r in records)
    for record in records:
        assert record.system_error is None
        assert record.reward is not None  # graded by the task's own verifier
        assert record.trial_status == "completed"
        trial = out / "trials" / record.trial_name
        # A multi-step task's agent files are per step; the last step's record holds them all.
        last = trial / "steps" / record.steps[-1]["name"] if record.steps else trial
        atif = json.loads((last / "agent" / "trajectory.json").read_text())
        assert atif["schema_version"].startswith("ATIF-")
        assert (trial / "result.json").is_file()
        assert set(record.weight_versions) <= {-1, 0}
    assert sum(r.num_turns > 1 for r in records) >= 3, [r.stop_reason for r in records]
    assert any(
        c.name.startswith("fs_") and c.outcome == "ok" for r in records for c in r.tool_calls
    )

    audited = bureau("audit", "tito", str(out), "--report", str(out / "audit.json"))
    print(audited.stdout)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert audited.stdout.splitlines()[0] == "token mismatches: 0 of 6 trajectories"
    report: dict[str, Any] = json.loads((out / "audit.json").read_text())
    assert report["sampled_tokens"] > 0

    # `bureau report` on the same folder: the six trials' outcomes, stop reasons and turns.
    drawn = bureau("report", str(out))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    charts = check_report((out / "report.html").read_text())
    assert charts["Error taxonomy"] == 1  # all six completed
    assert charts["Stop reasons"] == len({r.stop_reason for r in records})
    assert charts["Turns per trajectory (trials)"] >= 1
    return report
