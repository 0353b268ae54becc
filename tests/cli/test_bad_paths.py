"""Every command that reads a path turns a missing one into one `error:` line naming it.

Each command runs as a user runs it (`python -m bureau.cli.main`, the `bureau` entry point),
with a path that does not exist where it reads one; the output must name that path after
`error:`, the exit status must be non-zero, and there must be no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MISSING = "/no/such/bureau-input"
COMMANDS = {
    "tasks validate": ["tasks", "validate", MISSING],
    "tasks grade": ["tasks", "grade", MISSING, "--answers", "oracle"],
    "tasks check": ["tasks", "check", MISSING, "--agent", "oracle"],
    "eval": ["eval", MISSING, "--model", MISSING],
    "eval (model)": ["eval", "{tmp}", "--model", MISSING],
    "preeval": ["preeval", MISSING, "--model", MISSING],
    "train": ["train", "--config", f"{MISSING}.toml"],
    "train-offline": ["train-offline", "--trajectories", MISSING, "--model", MISSING,
                      "--steps", "1"],
    "train-sft": ["train-sft", "--trajectories", MISSING, "--model", MISSING, "--out", "{tmp}"],
    "serve": ["serve", "--model", MISSING],
    "audit tito": ["audit", "tito", MISSING],
    "bootstrap record": ["bootstrap", "record", MISSING, "--model", MISSING, "--out", "{tmp}"],
    "bootstrap pretrain": ["bootstrap", "pretrain", "--model", MISSING, "--out", "{tmp}"],
    "bootstrap subset": ["bootstrap", "subset", MISSING, "--out", "{tmp}/subset"],
    "model warm-start": ["model", "warm-start", "--model", MISSING, "--out", "{tmp}/m",
                         "--dataset", MISSING],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_missing_path_is_one_error_line(name: str, tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[name]]
    done = subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert errors and MISSING in errors[0], output
