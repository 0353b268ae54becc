"""A fixture that writes a complete, valid Harbor task directory, to break one part at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TASK_TOML = """\
version = "1.0"

[task]
name = "acme/q3-expenses"
description = "Sum the Q3 travel expenses"

[verifier]
timeout_sec = 120.0

[environment]
cpus = 2
"""

MakeTask = Callable[..., Path]


def write_task(
    task_dir: Path,
    *,
    task_toml: str = TASK_TOML,
    instruction: str = "Find the total of the Q3 travel expenses.\n",
    dockerfile: str | None = "FROM python:3.11-slim\n",
    test_sh: str | None = "#!/usr/bin/env bash\necho 1 > /logs/verifier/reward.txt\n",
    solve_sh: str | None = "#!/usr/bin/env bash\necho 42 > answer.json\n",
) -> Path:
    """Write a task directory; pass None to leave a file out."""
    task_dir.mkdir(parents=True)
    (task_dir / "instruction.md").write_text(instruction)
    (task_dir / "task.toml").write_text(task_toml)
    files = {
        "environment/Dockerfile": (dockerfile, 0o644),
        "tests/test.sh": (test_sh, 0o755),
        "solution/solve.sh": (solve_sh, 0o755),
    }
    for relative, (text, mode) in files.items():
        if text is None:
            continue
        path = task_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    return task_dir


@pytest.fixture
def make_task(tmp_path: Path) -> MakeTask:
    def make(name: str = "q3-expenses", **overrides: Any) -> Path:
        return write_task(tmp_path / name, **overrides)

    return make
