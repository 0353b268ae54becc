"""Fixtures of the loop tests that run on Ray: tasks the tiny tool model can attempt, and a
cluster started as a user starts one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from loop_support import BIN, RAY_ENV, wait_for

from bureau.loop.synthetic import write_answer_tasks
from fixture_support import shared


@pytest.fixture(scope="session")
def answer_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(path: Path) -> None:
        write_answer_tasks(path, 8, domain_cycle=("law", "banking"))

    return shared(tmp_path_factory, "answer-tasks-8", build)


@contextlib.contextmanager
def ray_node(log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`ray start --block ARGS`: one Ray node, stopped (with its processes) on leaving."""
    with log.open("w") as out:
        node = subprocess.Popen(
            [str(BIN / "ray"), "start", "--block", "--disable-usage-stats", *args],
            stdout=out, stderr=subprocess.STDOUT, env=os.environ | RAY_ENV,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(lambda: "Ray runtime started" in log.read_text() or node.poll() is not None, 120)
        if node.poll() is not None:
            pytest.fail(f"ray start {' '.join(args)} exited: {log.read_text()[-2000:]}")
        yield node
    finally:
        # The node's `ray start` alone: it drains the node and then stops its processes (a
        # SIGTERM to the whole group kills the GCS first, and the head then waits 30 s for
        # it); whatever is left of the group goes after.
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(timeout=60)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)


def _head_args(port: int, *extra: str) -> list[str]:
    return ["--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false", *extra]


@pytest.fixture(scope="module")
def two_ray_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head node with resource `trainer_node` and a worker node (its own raylet, object
    store and workers) with `engine_node`, as a cluster of two machines would be started."""
    from bureau.inference.launch import free_port

    port = free_port("127.0.0.1")
    logs = tmp_path_factory.mktemp("ray-nodes")
    head = _head_args(port, '--resources={"trainer_node": 4}')
    worker = [f"--address=127.0.0.1:{port}", "--num-cpus=2", '--resources={"engine_node": 4}']
    with ray_node(logs / "head.log", *head), ray_node(logs / "worker.log", *worker):
        yield f"127.0.0.1:{port}"
