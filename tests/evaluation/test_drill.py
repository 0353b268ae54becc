"""A small fault drill end to end: real trials under every kind of injected fault, retried as in
training, and the analysis checked against what was injected (`bench/fault_drill.py` runs the
full-size one)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bureau.evaluation.drill import DrillConfig, judged_tasks, run_drill
from bureau.trials.faults import FAULT_CAUSES, FaultConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def test_the_analysis_accounts_for_the_injected_faults(tiny_model: Path, tmp_path: Path) -> None:
    from bureau.worlds.builder import BuildConfig, build_split

    starter, judged = tmp_path / "starter", tmp_path / "judged"
    build_split(BuildConfig("train", 3, 15, 1, starter, difficulty="starter", jobs=1))
    build_split(
        BuildConfig("train", 3, 45, 1, judged, files_per_world=20, jobs=1, judge_criteria=True)
    )
    assert len(judged_tasks(judged)) == 2  # a brief per two tasks or so: 45 tasks for two
    rates = dict.fromkeys(FAULT_CAUSES, 0.12)
    figures = run_drill(
        DrillConfig(
            starter=starter, judged=judged, model=tiny_model, out=tmp_path / "run",
            attempts=2, judged_attempts=6, concurrency=4,
            faults=FaultConfig(**rates, engine_stall_s=0.5, seed=2),
        )
    )  # fmt: skip
    assert figures["trials"] >= 40
    assert figures["injected"] >= 15
    assert len(figures["per_kind"]) >= 6, figures["per_kind"]
    assert figures["attributed_share"] >= 0.95, figures
    assert figures["counted_as_model_failures"] == 0
    assert figures["overran"] == 0
    assert figures["system_errors"] <= 2, figures  # after retries, at 12% of every kind
    done = subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", "analyze", str(tmp_path / "run"),
         "--min-attributed", "0.95"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
