"""The CLI: instant help, a build, grading exit codes, validation naming the bad file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from bureau.cli.main import app

runner = CliRunner()


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from bureau.cli.main import app\n"
        "heavy = [m for m in ('bureau.worlds.builder', 'reportlab', 'openpyxl', 'torch')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_build_validate_and_grade(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = "worlds build --split eval --worlds 1 --tasks 3 --seed 4 --files 20 --jobs 1 --out"
    result = runner.invoke(app, [*args.split(), str(out)])
    assert result.exit_code == 0, result.output
    assert "naive PDF extraction wrong" in result.output
    assert runner.invoke(app, ["tasks", "validate", str(out)]).exit_code == 0
    report = tmp_path / "oracle.json"
    graded = runner.invoke(
        app,
        ["tasks", "grade", str(out), "--answers", "oracle", "--jobs", "1", "--report", str(report)],
    )
    assert graded.exit_code == 0, graded.output
    assert json.loads(report.read_text())["as_expected"] == 3

    # Break one task's rubric: grading reports it as broken and exits non-zero.
    task = next(p for p in out.iterdir() if (p / "task.toml").exists())
    (task / "tests" / "rubric.json").write_text("{not json")
    graded = runner.invoke(app, ["tasks", "grade", str(out), "--answers", "empty", "--jobs", "1"])
    assert graded.exit_code == 1
    assert task.name in graded.output


def test_validate_names_file_and_field(tmp_path: Path) -> None:
    task = tmp_path / "ds" / "bad-task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (task / "instruction.md").write_text("Do it.\n")
    (task / "task.toml").write_text("[environment]\ncpus = -2\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    result = runner.invoke(app, ["tasks", "validate", str(tmp_path / "ds")])
    assert result.exit_code == 1
    assert "task.toml" in result.output and "environment.cpus" in result.output
    assert "solve.sh" in result.output


def test_unknown_split_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["worlds", "build", "--split", "dev", "--out", str(tmp_path)])
    assert result.exit_code == 2


def test_bad_options_and_paths_are_errors_not_tracebacks(tmp_path: Path) -> None:
    result = runner.invoke(app, ["worlds", "build", "--worlds", "0", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "--worlds must be at least 1" in result.output
    missing = tmp_path / "missing"
    result = runner.invoke(app, ["tasks", "grade", str(missing), "--answers", "oracle"])
    assert result.exit_code == 2 and "no such directory" in result.output
    assert runner.invoke(app, ["tasks", "validate", str(missing)]).exit_code == 1
