"""Fixtures for the sandbox tests: a runtime under the test's tmp dir and sandboxes in it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import SMALL, MakeTask, write_task

from bureau.sandbox.local import LocalRuntime, LocalSandbox
from bureau.tasks.taskdir import TaskDir


@pytest.fixture
def make_task(tmp_path: Path) -> MakeTask:
    counter = iter(range(1_000_000))

    def make(
        *,
        files: dict[str, str] | None = None,
        workdir: str = "/workspace",
        memory_mb: int = 2048,
        storage_mb: int = 64,
    ) -> TaskDir:
        return write_task(
            tmp_path / f"task-{next(counter)}",
            files=files,
            workdir=workdir,
            memory_mb=memory_mb,
            storage_mb=storage_mb,
        )

    return make


@pytest.fixture
def runtime(tmp_path: Path) -> LocalRuntime:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    return LocalRuntime(tmp_path / "sbx", limits=SMALL)


@pytest.fixture
def sandbox(runtime: LocalRuntime, make_task: MakeTask) -> Iterator[LocalSandbox]:
    sb = runtime.start(make_task(), timeout_s=30)
    yield sb
    sb.stop()


@pytest.fixture
def bystander(runtime: LocalRuntime, make_task: MakeTask) -> Iterator[LocalSandbox]:
    """Another trial on the same machine, which no attack may disturb."""
    sb = runtime.start(make_task(files={"mine.txt": "bystander\n"}), timeout_s=30)
    yield sb
    sb.stop()
