"""Helpers shared by test modules and `conftest.py`. Test modules import them from here, never
from a `conftest` (several conftest modules exist, and `import conftest` picks any of them)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bureau.records import TrajectoryRecord


def shared(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """`name` under the session's shared temp folder, built once by `build(path)`."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' common session folder
    folder = root / "shared"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / f"{name}.done").exists():
            build(path)
            (folder / f"{name}.done").touch()
    return path


def group_record(tid: str, group: str, reward: float | None, sampled: int) -> TrajectoryRecord:
    """A record of `sampled` sampled tokens after a 3-token prompt, in `group`; reward None
    makes it a system error."""
    ids = [1, 2, 3] + [10 + k for k in range(sampled)]
    return TrajectoryRecord(
        trajectory_id=tid,
        task_name="t",
        model="m",
        prompt_ids=[1, 2, 3],
        token_ids=ids,
        loss_mask=[0, 0, 0] + [1] * sampled,
        sampler_logprobs=[0.0, 0.0, 0.0] + [-1.0] * sampled,
        weight_versions=[-1, -1, -1] + [4] * sampled,
        messages=[],
        tools=[],
        turns=[],
        tool_calls=[],
        stop_reason="answered",
        llm_time_s=0.0,
        tool_time_s=0.0,
        total_time_s=0.0,
        group_id=group,
        reward=reward,
        system_error=None if reward is not None else "engine_error: down",
    )


def live_in_group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found
