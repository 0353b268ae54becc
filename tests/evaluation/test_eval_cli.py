"""`bureau eval` end to end: a tiny random model, two tasks, two attempts each, in sandboxes.

A random model never solves a task, so this checks the plumbing (trials, attribution, report,
eval.json, the table), not the numbers, which the report tests check by hand.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp  # noqa: F401
import torch  # noqa: F401

from report_support import check_report


def bureau(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_eval_runs_a_model_and_writes_the_report(
    small_dataset: Path, tiny_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    isolation = "bwrap" if shutil.which("bwrap") else "none"
    done = bureau(
        "eval", str(small_dataset), "--model", str(tiny_model), "--out", str(out),
        "--attempts", "2", "--max-tasks", "2", "--concurrency", "4", "--seed", "3",
        "--isolation", isolation, "--set", "harness.max_turns=2",
        "--set", "harness.max_tokens_per_turn=16", "--set", "harness.context_length=4096",
        "--set", "bootstrap_resamples=500",
    )  # fmt: skip
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Pass@1" in done.stdout and "eval.json" in done.stdout, done.stdout
    report: dict[str, Any] = json.loads((out / "eval.json").read_text())
    assert report["format"] == "bureau-eval/2" and report["k"] == 2
    assert report["interval"] == "task-bootstrap"
    assert report["config"]["harness"]["max_turns"] == 2
    assert report["config"]["seed"] == 3 and report["resamples"] == 500
    assert report["versions"]["bureau"] and report["wall_time_s"] > 0
    overall = report["overall"]
    assert (overall["tasks"], overall["attempts"]) == (2, 4)
    assert overall["graded"] + overall["excluded"] == 4
    assert set(report["domains"]) <= {"law", "consulting", "banking"}
    assert sum(d["attempts"] for d in report["domains"].values()) == 4
    assert list(overall["pass_at_k"]) == ["1", "2"]
    # Each attempt is one trial directory whose verdict the report carries.
    results = [json.loads(p.read_text()) for p in (out / "trials").glob("*/result.json")]
    assert len(results) == 4
    graded = [r for r in results if r["status"] == "completed"]
    assert overall["graded"] >= len(graded)
    assert sorted(r for t in report["tasks"] for r in t["rewards"] if r is not None) == sorted(
        [r["reward"] for r in graded] + [0.0] * (overall["graded"] - len(graded))
    )
    assert (out / "trajectories.parquet").is_file()
    assert (out / "config.resolved.toml").is_file()
    assert sum(t["tasks"] for t in report["templates"].values()) == 2
    # `bureau report` draws it: the domains, templates, pass@k and outcomes of these trials.
    drawn = bureau("report", str(out))
    assert drawn.returncode == 0, drawn.stdout[-3000:] + drawn.stderr[-3000:]
    charts = check_report((out / "report.html").read_text())
    assert charts["pass@k"] == 2 and charts["Error taxonomy"] >= 1
    assert 1 <= charts["Pass@1 per domain"] <= len(report["domains"])
    assert 1 <= charts["Pass@1 per template"] <= len(report["templates"])

    # Again, paired with the first run: the same two tasks.
    again = bureau(
        "eval", str(small_dataset), "--model", str(tiny_model), "--out", str(tmp_path / "again"),
        "--attempts", "1", "--max-tasks", "2", "--seed", "4", "--isolation", isolation,
        "--set", "harness.max_turns=1", "--set", "harness.max_tokens_per_turn=8",
        "--set", "harness.context_length=4096", "--baseline", str(out),
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "paired per task" in again.stdout
    compared = json.loads((tmp_path / "again" / "comparison.json").read_text())
    assert compared["baseline"] == str(out)
    assert compared["overall"]["pass_at_1"]["tasks"] == 2
    assert set(compared["templates"]) == set(report["templates"])
    wrong = bureau(
        "eval", str(small_dataset), "--model", str(tiny_model), "--baseline", str(tmp_path)
    )
    assert wrong.returncode == 2 and "--baseline" in wrong.stdout


def test_eval_refuses_an_unknown_setting(small_dataset: Path, tmp_path: Path) -> None:
    done = bureau(
        "eval", str(small_dataset), "--model", str(tmp_path), "--set", "harness.max_turn=2"
    )  # fmt: skip
    assert done.returncode == 2
    assert "max_turn" in done.stdout
    done = bureau("eval", str(small_dataset), "--model", str(tmp_path), "--set", "atempts=2")
    assert done.returncode == 2 and "atempts" in done.stdout
