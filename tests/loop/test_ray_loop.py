"""`bureau train` end to end on Ray, as a user runs it: real sandboxes, tool servers, the built-in
engine, the trainer and in-place weight pushes.

- A Ray cluster of two nodes started with `ray start` (a head and a worker on ports of their
  own, stopped by the test), and a run that joins it with `--ray-address`, the trainer on one
  node and the engine and rollout worker on the other. The driver is SIGKILLed after its second
  step; the same command then resumes from the checkpoint, and the metrics log shows every step
  once and every task group trained at most once, none skipped.
- A rollout worker process and an engine killed mid-run: the worker's trajectories run again,
  the engine comes back with the current weights, the run finishes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections import Counter
from pathlib import Path

import pytest
import ray  # noqa: F401
import tomli_w
from loop_support import QUICK, steps_of, train_process, wait_for

from bureau.loop.checkpoints import latest, read_loop_state
from bureau.loop.synthetic import run_config
from bureau.records import read_parquet, read_trajectories

pytestmark = pytest.mark.slow


def test_a_two_node_cluster_run_resumes_after_sigkill(
    tmp_path: Path, tool_model: Path, answer_tasks: Path, two_ray_nodes: str
) -> None:
    """Two Ray nodes (a head and a worker, each with its own raylet) as two machines would run
    them: the trainer asks for the head's resource, engines and rollout workers for the worker
    node's. Ports are picked on the node that listens on them; every node checks at start that
    it sees the run folder, model and tasks the driver sees. The driver is SIGKILLed after its
    second step and the same command resumes."""
    run = tmp_path / "run"
    config = tmp_path / "run.toml"
    short = {k: v for k, v in QUICK.items() if k != "rollout.attempts"}
    nodes = {
        "ray.trainer_resources": {"trainer_node": 1},
        "engines.resources": {"engine_node": 1},
        "rollout.worker_resources": {"engine_node": 1},
    }
    tree = run_config(run, tool_model, answer_tasks, steps=4, **short, **nodes)
    config.write_text(tomli_w.dumps(tree))
    log = tmp_path / "driver.log"
    driver = train_process(config, "--ray-address", two_ray_nodes, log=log)
    try:
        wait_for(lambda: len(steps_of(run)) >= 2 or driver.poll() is not None, 480)
        alive = driver.poll() is None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    # The kill hit a live run: it was still running, died by the signal, steps short.
    assert alive and driver.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    killed_at = len(steps_of(run))
    assert 2 <= killed_at < 4, log.read_text()[-3000:]
    assert latest(run / "checkpoint") is not None
    actors = json.loads((run / "placement.json").read_text())["actors"]
    node = {a["role"]: a["node_id"] for a in actors}
    assert node["trainer"] != node["engine"] == node["rollout"], actors
    assert all(a["node_id"] == a["bundle_node"] for a in actors)
    assert not list(run.glob(".node-check-*"))  # the marker is removed after the check
    again = train_process(config, "--ray-address", two_ray_nodes, log=log)
    assert again.wait(timeout=600) == 0, log.read_text()[-3000:]
    steps = steps_of(run)
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
    # The resumed trainer's step, schedule and optimizer state are the loop's version.
    assert state["version"] == 4
    trainer = json.loads((folder / "trainer" / "trainer_state.json").read_text())
    assert trainer["step"] == 4
    _assert_optimizer_steps(folder / "trainer", tool_model, 4)


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
    driver = train_process(config, log=log)
    try:
        wait_for(lambda: driver.poll() is not None or len(steps_of(run)) >= 1, 480)
        assert driver.poll() is None, log.read_text()[-3000:]
        # This run's own processes, by the pids it reports (not any actor on the machine).
        victim, engine = _actor_pid(run, "rollout", 0), _actor_pid(run, "engine", 0)
        os.kill(victim, signal.SIGKILL)
        os.kill(engine, signal.SIGKILL)
        assert driver.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    steps = steps_of(run)
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    # The victim's trajectories ran again; every group was trained once, none lost.
    # (An attempt sent again while the worker is still restarting is lost again: no upper bound.)
    assert max(int(r.get("rollout/requeued", 0)) for r in steps) >= 1, steps
    trained = [g for r in steps for g in r["data/group_ids"]]
    assert len(trained) == len(set(trained)) == 8
    # Each trained group has each of its attempts once: a rerun replaced the lost one.
    records = []
    for index in range(1, 5):
        step = read_parquet(run / "trajectories" / f"step-{index:06d}.parquet")
        per_group = Counter(r.group_id for r in step)
        assert set(per_group.values()) == {int(tree["rollout"]["attempts"])}, per_group
        assert len({r.trajectory_id for r in step}) == len(step)
        records += step
    # Only the victim lost work: every attempt sent again was lost on worker-0, and what
    # worker-1 ran it ran once (no record names it among the workers that died under it).
    # The records kept include the groups dropped as stale (a group whose attempt waited for
    # the victim's restart often is); each group is in one file only, trained or dropped.
    # A re-sent attempt's record is kept only when its group finished within the run's 4 steps
    # (one that was still pending at the end is in no file): the requeue count above is what
    # shows the loss happened; the records kept must not blame any other worker.
    kept = read_trajectories(run / "trajectories", include_dropped=True)
    lost = [r for r in kept if r.lost_on]
    assert {w for r in lost for w in r.lost_on} <= {"worker-0"}, [r.lost_on for r in lost]
    losses = [line for line in log.read_text().splitlines() if "worker lost on" in line]
    assert losses and all("rollout worker 0:" in line for line in losses), losses[:3]
    assert {r.worker for r in kept} == {"worker-0", "worker-1"}
    assert len({r.trajectory_id for r in kept}) == len(kept)
    dropped = {r.group_id for r in kept if r.dropped}
    assert not dropped & {r.group_id for r in records}
    # Ray restarted the engine with the initial weights, and the current weights reached it
    # again: a repair, or the next push, which finds it more than one version behind (a push
    # may also have missed it while it restarted).
    caught_up = sum(int(r.get("weights/caught_up", 0)) for r in steps)
    repaired = max(int(r.get("engines/weights_repaired", 0)) for r in steps)
    assert caught_up + repaired >= 1, steps
    shutil.rmtree(run / "trials", ignore_errors=True)


def _assert_optimizer_steps(folder: Path, model: Path, steps: int) -> None:
    """A trainer loaded from `folder` has taken `steps` optimizer steps, by every count."""
    from bureau.algo.losses import PPOLossConfig, make_loss_fn
    from bureau.trainer import Trainer, TrainerConfig

    trainer = Trainer.from_pretrained(model, make_loss_fn(PPOLossConfig()), TrainerConfig())
    try:
        trainer.load(folder)
        assert trainer.step == steps
        assert trainer.scheduler.last_epoch == steps
        counts = {float(s["step"]) for s in trainer.optimizer.state.values() if "step" in s}
        assert counts == {float(steps)}, counts
    finally:
        trainer.close()


def _actor_pid(run: Path, role: str, index: int) -> int:
    """The pid of this run's actor, as `RUN/placement.json` reports it."""
    report = json.loads((run / "placement.json").read_text())
    [actor] = [a for a in report["actors"] if (a["role"], a["index"]) == (role, index)]
    return int(actor["pid"])
