"""`bureau train` end to end on Ray, as a user runs it: real sandboxes, tool servers, the built-in
engine, the trainer and in-place weight pushes.

- A Ray cluster started with `ray start --head` (its own port, stopped by the test), and a run
  that joins it with `--ray-address`. The driver is SIGKILLed after its second step; the same
  command then resumes from the checkpoint, and the metrics log shows every step once and every
  task group trained at most once, none skipped.
- A rollout worker process and an engine killed mid-run: the worker's trajectories run again,
  the engine comes back with the current weights, the run finishes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray  # noqa: F401
import tomli_w

from bureau.loop.checkpoints import latest, read_loop_state
from bureau.loop.synthetic import run_config, write_answer_tasks
from fixture_support import shared

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
# Ray 2.60 turns on token authentication and keeps one token in ~/.ray/auth_token, which every
# `ray start --head` on the machine rewrites: clusters started side by side (other tests, a
# user's own) would lock each other's drivers out. These tests' clusters run without it.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def answer_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(path: Path) -> None:
        write_answer_tasks(path, 8, domain_cycle=("law", "banking"))

    return shared(tmp_path_factory, "answer-tasks-8", build)


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ray start --head --block` on a port of its own; terminating it stops the cluster."""
    from bureau.inference.launch import free_port

    port = free_port("127.0.0.1")
    log = tmp_path_factory.mktemp("ray-head") / "head.log"
    env = os.environ | RAY_ENV
    with log.open("w") as out:
        head = subprocess.Popen(
            [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        _wait_for(lambda: "Ray runtime started" in log.read_text() or head.poll() is not None, 120)
        if head.poll() is not None:
            pytest.fail(f"ray start --head exited: {log.read_text()[-2000:]}")
        yield address
    finally:
        # The head alone: it drains its node through the GCS and then stops its processes
        # (a SIGTERM to the whole group kills the GCS first, and the head then waits 30 s for
        # it); whatever is left of the group goes after.
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)


def _wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s")
        time.sleep(0.5)


def _steps(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by the kill
    return [r for r in rows if "data/group_ids" in r]


def _train(config: Path, *extra: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(BIN / "bureau"), "train", "--config", str(config), *extra],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ | RAY_ENV,
        )  # fmt: skip


# Fault tests need a run that lives a few steps, not long generations: short turns keep each
# step to a few seconds on this CPU.
QUICK = {
    "rollout.attempts": 2,
    "rollout.harness.max_turns": 2,
    "rollout.harness.max_tokens_per_turn": 48,
}


def test_cluster_run_resumes_after_sigkill(
    tmp_path: Path, tool_model: Path, answer_tasks: Path, ray_head: str
) -> None:
    run = tmp_path / "run"
    config = tmp_path / "run.toml"
    short = {k: v for k, v in QUICK.items() if k != "rollout.attempts"}
    config.write_text(tomli_w.dumps(run_config(run, tool_model, answer_tasks, steps=4, **short)))
    log = tmp_path / "driver.log"
    driver = _train(config, "--ray-address", ray_head, log=log)
    try:
        _wait_for(lambda: len(_steps(run)) >= 2 or driver.poll() is not None, 480)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    assert len(_steps(run)) >= 2, log.read_text()[-3000:]
    assert latest(run / "checkpoint") is not None
    again = _train(config, "--ray-address", ray_head, log=log)
    assert again.wait(timeout=600) == 0, log.read_text()[-3000:]
    steps = _steps(run)
    assert [r["step"] for r in steps] == [1, 2, 3, 4], log.read_text()[-3000:]
    trained = [g for r in steps for g in r["data/group_ids"]]
    skipped = [g for r in steps for g in r["data/skipped_group_ids"]]
    assert len(trained) == len(set(trained)) == 8
    assert not set(trained) & set(skipped)
    folder = latest(run / "checkpoint")
    assert folder is not None
    state = read_loop_state(folder)
    finished = {int(g.split("/", 1)[0][1:]) for g in trained + skipped}
    pending = set(state["stream"]["pending"])
    assert finished | pending >= set(range(max(finished) + 1))  # nothing handed out was lost
    assert "resuming from step" in log.read_text()
    assert (run / "weights" / "model.safetensors").is_file()


def test_a_killed_rollout_worker_and_a_killed_engine_cost_only_their_work(
    tmp_path: Path, tool_model: Path, answer_tasks: Path
) -> None:
    """One run, two faults: a rollout worker process killed mid-run loses only its
    trajectories (they run again), and an engine killed after a step is restarted by Ray with
    its initial weights and gets the current ones pushed again; the run finishes its steps."""
    run = tmp_path / "run"
    config = tmp_path / "run.toml"
    tree = run_config(run, tool_model, answer_tasks, steps=4, **{"rollout.workers": 2}, **QUICK)
    config.write_text(tomli_w.dumps(tree))
    log = tmp_path / "driver.log"
    driver = _train(config, log=log)
    try:
        _wait_for(lambda: driver.poll() is not None or len(_steps(run)) >= 1, 480)
        assert driver.poll() is None, log.read_text()[-3000:]
        workers = _pids("ray::RolloutActor")
        engines = _pids("ray::EngineActor")
        assert workers and engines, (workers, engines)
        os.kill(workers[0], signal.SIGKILL)
        os.kill(engines[0], signal.SIGKILL)
        assert driver.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    steps = _steps(run)
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert sum(int(r.get("rollout/requeued", 0)) for r in steps) >= 1, steps
    # Ray restarted the engine with the initial weights; the loop pushed the current ones again.
    assert sum(int(r.get("engines/weights_repaired", 0)) for r in steps) >= 1, steps
    shutil.rmtree(run / "trials", ignore_errors=True)


def _pids(pattern: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(pid) for pid in found.split()]
