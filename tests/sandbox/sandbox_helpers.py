"""Helpers for the sandbox tests: tiny tasks, small limits, commands, bystander checks.

The limits are small on purpose, so that every attack test ends in seconds and stays light on a
shared two-core machine: 64 processes, 64 MiB of storage, 1 GiB of address space per process.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import tomli_w

from bureau.sandbox.base import ExecResult, Limits, Phase
from bureau.sandbox.local import LocalSandbox
from bureau.tasks.taskdir import TaskDir, load_task_dir

SMALL = Limits(
    cpus=1, memory_mb=1024, storage_mb=64, max_processes=64, max_file_mb=32, cpu_time_s=60
)

MakeTask = Callable[..., TaskDir]


def write_task(
    path: Path,
    *,
    files: dict[str, str] | None = None,
    workdir: str = "/workspace",
    memory_mb: int = 2048,
    storage_mb: int = 64,
) -> TaskDir:
    """A minimal valid task whose workspace holds `files` (relative path -> text)."""
    (path / "environment" / "workspace").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "solution").mkdir()
    (path / "instruction.md").write_text("Do the thing.\n")
    (path / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (path / "tests" / "test.sh").write_text(
        '#!/bin/bash\necho 1 > "${BUREAU_VERIFIER_DIR:-/logs/verifier}/reward.txt"\n'
    )
    (path / "solution" / "solve.sh").write_text("#!/bin/bash\necho solved > answer.txt\n")
    env = {"workdir": workdir, "memory_mb": memory_mb, "storage_mb": storage_mb}
    (path / "task.toml").write_text(tomli_w.dumps({"environment": env}))
    for rel, text in (files or {"data.txt": "hello\n"}).items():
        target = path / "environment" / "workspace" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return load_task_dir(path)


def bash(
    sb: LocalSandbox, script: str, *, timeout_s: float = 10, phase: Phase = "agent"
) -> ExecResult:
    return sb.exec(["bash", "-c", script], timeout_s=timeout_s, phase=phase)


def python(
    sb: LocalSandbox, code: str, *, timeout_s: float = 10, phase: Phase = "agent"
) -> ExecResult:
    return sb.exec(["python3", "-c", code], timeout_s=timeout_s, phase=phase)


def assert_unaffected(*others: LocalSandbox) -> None:
    """The host still starts processes, and every other sandbox still runs a command."""
    assert subprocess.run(["true"], timeout=10).returncode == 0
    for other in others:
        result = bash(other, "cat mine.txt 2>/dev/null || echo alive")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() in ("bystander", "alive")
