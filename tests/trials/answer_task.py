"""A one-file Harbor task for trial tests: write 42 to output/answer.txt; `test.sh` given."""

from __future__ import annotations

from pathlib import Path

from bureau.tasks.taskdir import TaskDir, load_task_dir


def answer_task(root: Path, name: str, test_sh: str) -> TaskDir:
    """`root/name`: its oracle writes the answer; its verifier is `test_sh`."""
    path = root / name
    for sub in ("environment/workspace/output", "tests", "solution"):
        (path / sub).mkdir(parents=True)
    (path / "instruction.md").write_text("Write 42 to output/answer.txt.\n")
    (path / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (path / "tests" / "test.sh").write_text(test_sh)
    (path / "solution" / "solve.sh").write_text("#!/bin/bash\necho 42 > output/answer.txt\n")
    (path / "task.toml").write_text(
        f'[task]\nname = "bureau/{name}"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n'
    )
    return load_task_dir(path)
