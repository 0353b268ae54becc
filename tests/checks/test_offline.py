"""In-process oracle/empty grading, and the subprocess path for plain Harbor tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bureau.checks.offline import check_task, check_tasks, summarize
from bureau.tasks.reward import read_reward
from bureau.worlds.builder import BuildConfig, build_split

HARBOR_TEST_SH = """#!/usr/bin/env bash
# A hand-written Harbor verifier: reward.txt, no bureau grader.
out="${BUREAU_VERIFIER_DIR:-/logs/verifier}"
ws="${BUREAU_WORKSPACE:-/app}"
mkdir -p "$out"
if [ "$(cat "$ws/hello.txt" 2>/dev/null)" = "hello world" ]; then echo 1 > "$out/reward.txt"
else echo 0 > "$out/reward.txt"; fi
"""
HARBOR_SOLVE_SH = """#!/usr/bin/env bash
echo "hello world" > "${BUREAU_WORKSPACE:-/app}/hello.txt"
"""


def harbor_task(
    root: Path, *, test_sh: str = HARBOR_TEST_SH, solve_sh: str = HARBOR_SOLVE_SH
) -> Path:
    task = root / "hello-world"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "instruction.md").write_text("Write 'hello world' to hello.txt.\n")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n')
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text(test_sh)
    (task / "solution" / "solve.sh").write_text(solve_sh)
    return task


def test_plain_harbor_task_runs_through_scripts(tmp_path: Path) -> None:
    task = harbor_task(tmp_path)
    oracle = check_task(task, "oracle")
    empty = check_task(task, "empty")
    assert (oracle.ok, oracle.reward) == (True, 1.0)
    assert (empty.ok, empty.reward) == (True, 0.0)


def test_verifier_without_reward_file_is_a_broken_task_not_a_zero(tmp_path: Path) -> None:
    task = harbor_task(tmp_path, test_sh="#!/usr/bin/env bash\nexit 0\n")
    outcome = check_task(task, "empty")
    assert outcome.reward is None and not outcome.ok
    assert outcome.error is not None and "RewardFileError" in outcome.error
    summary = summarize("empty", [outcome], 0.0)
    assert summary.broken == [outcome] and not summary.ok


def test_failing_solution_is_reported_with_its_stderr(tmp_path: Path) -> None:
    task = harbor_task(tmp_path, solve_sh="#!/usr/bin/env bash\necho boom >&2\nexit 3\n")
    outcome = check_task(task, "oracle")
    assert outcome.error is not None
    assert "exited 3" in outcome.error and "boom" in outcome.error


@pytest.fixture(scope="module")
def one_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("w") / "eval"
    build_split(BuildConfig("eval", 1, 6, 3, root, files_per_world=20, jobs=1))
    return root


def _tasks(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "task.toml").exists())


def test_generated_scripts_run_outside_python(one_world: Path, tmp_path: Path) -> None:
    """solve.sh and test.sh work as Harbor runs them: bash, env paths, no bureau on PYTHONPATH."""
    task = next(t for t in _tasks(one_world) if (t / "solution").is_dir())  # not multi-step
    ws = tmp_path / "workspace"
    subprocess.run(["cp", "-r", str(task / "environment" / "workspace"), str(ws)], check=True)
    (ws / "output").mkdir(exist_ok=True)
    # The task environment supplies a python3 with the document libraries (the Dockerfile
    # installs them); here that is this interpreter's environment, without bureau's sources.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}} | {
        "BUREAU_WORKSPACE": str(ws),
        "BUREAU_VERIFIER_DIR": str(tmp_path / "verifier"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    # the solution must not need the tests folder: run it from a copy without tests/
    solution = tmp_path / "solution"
    subprocess.run(["cp", "-r", str(task / "solution"), str(solution)], check=True)
    subprocess.run(["bash", str(solution / "solve.sh")], env=env, check=True, timeout=120)
    proc = subprocess.run(
        ["bash", str(task / "tests" / "test.sh")], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert read_reward(tmp_path / "verifier").reward == 1.0
    details = json.loads((tmp_path / "verifier" / "grading.json").read_text())
    assert "gold" not in json.dumps(details)


def test_parallel_and_serial_checks_agree(one_world: Path) -> None:
    dirs = _tasks(one_world)
    serial = check_tasks(dirs, "oracle", jobs=1)
    parallel = check_tasks(dirs, "oracle", jobs=2)
    assert [(o.task_id, o.reward) for o in serial] == [(o.task_id, o.reward) for o in parallel]
    assert all(o.reward == 1.0 for o in serial)
