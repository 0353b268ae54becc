"""The controller with fakes: admission, staleness, sync vs async, re-queues, resume.

The fake engine labels every sampled token with the version of the weights it holds; the fake
trainer records which groups each step trained on. No Ray, no model, no sandbox.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from bureau.algo.advantages import AdvantageConfig
from bureau.algo.reductions import ReductionConfig
from bureau.loop.checkpoints import latest, read_loop_state, write_loop_state
from bureau.loop.controller import Controller, LoopSettings, LoopStalled
from bureau.loop.data import TaskStream
from bureau.loop.rollout import Rollout, RolloutRequest, TaskRef, WorkerLost
from bureau.loop.staleness import Admission, group_staleness
from bureau.loop.status import RunStatus
from bureau.records import TrainBatch, TrajectoryRecord, read_trajectories

TASKS = [
    TaskRef(name=f"t{i}", path=f"/tasks/t{i}", domain=("law", "banking")[i % 2]) for i in range(7)
]


class FakeEngine:
    def __init__(self) -> None:
        self.version = 0
        self.busy = 0
        self.peak = 0
        self.busy_during_step: list[int] = []


class FakeRollout:
    """Two sampled turns per trajectory; the second waits a random time, so versions can mix.

    Tokens carry the version of the weights the engine holds, as the built-in engine labels
    them; with `blind`, the version the loop last told it, as a client of vLLM labels them."""

    def __init__(
        self, engine: FakeEngine, *, lose: set[tuple[str, int]] | None = None, blind: bool = False
    ) -> None:
        self.engine = engine
        self.lose = set(lose or ())
        self.blind = blind
        self.calls: list[RolloutRequest] = []
        self.told: list[int] = []
        self.rng = random.Random(0)

    def _label(self) -> int:
        return (self.told[-1] if self.told else 0) if self.blind else self.engine.version

    async def set_weight_version(self, version: int) -> None:
        self.told.append(version)

    async def rollout(self, request: RolloutRequest) -> Rollout:
        self.calls.append(request)
        key = (request.group_id, request.attempt)
        self.engine.busy += 1
        self.engine.peak = max(self.engine.peak, self.engine.busy)
        try:
            first = self._label()
            await asyncio.sleep(self.rng.uniform(0.001, 0.02))
            if key in self.lose:
                self.lose.discard(key)
                raise WorkerLost("killed", "worker-9")
            second = self._label()
        finally:
            self.engine.busy -= 1
        record = TrajectoryRecord(
            f"{request.group_id}#{request.attempt}", request.task.name, "", [], [], [], [], [],
            [], [], [], [], "answered", 0.0, 0.0, 0.0, trial_status="completed",
        )  # fmt: skip
        record.token_ids = [1, 2, 3, 4, 5]
        record.loss_mask = [0, 1, 1, 0, 1]
        record.sampler_logprobs = [0.0, -1.0, -1.0, 0.0, -1.0]
        record.weight_versions = [-1, first, first, -1, second]
        record.stop_reason = "answered"
        record.reward = float(request.attempt % 2)  # half the group passes: signal
        return Rollout(
            request=request, record=record, passed=bool(record.reward), worker="worker-1"
        )

    async def close(self) -> None:
        pass


class FakeTrainer:
    def __init__(self, engine: FakeEngine, *, skip: set[int] | None = None) -> None:
        self.engine = engine
        self.steps = 0
        self.calls = 0
        self.skip = set(skip or ())
        """Calls (1-based) whose gradient is non-finite: the step is skipped, as the trainer
        does (`train/skipped_step`), and the weights stay as they are."""
        self.trained: list[list[int]] = []  # per step: versions of its tokens

    async def step(self, batch: TrainBatch) -> dict[str, Any]:
        self.calls += 1
        self.engine.busy_during_step.append(self.engine.busy)
        await asyncio.sleep(0.005)
        if self.calls in self.skip:
            return {"train/loss": float("nan"), "train/skipped_step": 1.0}
        self.steps += 1  # the weights change here, before the step returns
        await asyncio.sleep(0.005)
        self.engine.busy_during_step.append(self.engine.busy)
        self.trained.append([v for row in batch.weight_versions or [] for v in row if v >= 0])
        return {"train/loss": 0.0, "train/skipped_step": 0.0}

    async def version(self) -> int:
        return self.steps

    async def save(self, path: Path, loop_state: dict[str, Any]) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "fake_trainer.json").write_text(json.dumps({"steps": self.steps}))
        write_loop_state(path, loop_state)

    async def load(self, path: Path) -> dict[str, Any]:
        self.steps = json.loads((path / "fake_trainer.json").read_text())["steps"]
        self.engine.version = self.steps
        return read_loop_state(path)

    async def export(self, out: Path, dtype: str = "float32") -> Path:
        return out

    async def close(self) -> None:
        pass


class FakeWeights:
    """Records, for every push and every repair, (the label, the trainer's actual version)."""

    def __init__(self, engine: FakeEngine, trainer: FakeTrainer | None = None) -> None:
        self.engine = engine
        self.trainer = trainer
        self.pushed: list[int] = []
        self.labels: list[tuple[int, int]] = []

    async def publish(self, version: int) -> dict[str, float]:
        self.engine.version = version
        self.pushed.append(version)
        if self.trainer is not None:
            self.labels.append((version, self.trainer.steps))
        return {"weights/sync_s": 0.0}

    async def repair(self, version: int) -> int:
        if self.trainer is not None:
            self.labels.append((version, self.trainer.steps))
        return 0


class ListSink:
    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, Any]]] = []

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.rows.append((step, metrics))

    def close(self) -> None:
        pass


def make(
    tmp_path: Path,
    *,
    steps: int,
    staleness: int,
    lose: set[tuple[str, int]] | None = None,
    blind: bool = False,
    skip: set[int] | None = None,
    **kw: Any,
) -> tuple[Controller, FakeEngine, FakeRollout, FakeTrainer, ListSink]:
    engine = FakeEngine()
    rollout = FakeRollout(engine, lose=lose, blind=blind)
    trainer = FakeTrainer(engine, skip=skip)
    sink = ListSink()
    eval_tasks = kw.pop("eval_tasks", ())
    trajectories_dir = kw.pop("trajectories_dir", None)
    settings = LoopSettings(
        steps=steps,
        groups_per_step=2,
        attempts=2,
        max_in_flight=kw.pop("max_in_flight", 6),
        max_staleness=staleness,
        checkpoint_every=kw.pop("checkpoint_every", 100),
        repair_every_s=kw.pop("repair_every_s", 60),
        **kw,
    )
    controller = Controller(
        settings,
        stream=TaskStream(TASKS, seed=3),
        rollout=rollout,
        trainer=trainer,
        weights=FakeWeights(engine, trainer),
        advantages=AdvantageConfig(),
        reduction=ReductionConfig(),
        sink=sink,
        checkpoint_dir=tmp_path / "checkpoint",
        eval_tasks=eval_tasks,
        trajectories_dir=trajectories_dir,
    )
    return controller, engine, rollout, trainer, sink


def test_admission_rule_counts_by_hand() -> None:
    admission = Admission(groups_per_step=4, max_staleness=1)
    assert admission.capacity(version=0) == 8  # (1 + 0 + 1) * 4 - 0
    for _ in range(5):
        admission.start()
    assert admission.capacity(0) == 3
    admission.finish()
    admission.finish(accepted=False)
    assert (admission.accepted, admission.running) == (1, 3)
    assert admission.capacity(0) == 4
    assert admission.capacity(2) == 12  # (1 + 2 + 1) * 4 - 4
    admission.release()
    assert admission.capacity(0) == 5


def test_group_staleness_takes_the_oldest_sampled_token() -> None:
    assert group_staleness([[-1, 3, 4], [-1, 5]], trainer_version=5) == 2
    assert group_staleness([[-1, -1]], trainer_version=5) == 0


def test_async_loop_trains_each_group_once_within_the_bound(tmp_path: Path) -> None:
    controller, _engine, _rollout, trainer, sink = make(tmp_path, steps=6, staleness=1)
    history = asyncio.run(controller.run())
    assert len(history) == 6 and trainer.steps == 6
    ids = [gid for m in history for gid in m["data/group_ids"]]
    assert len(ids) == len(set(ids)) == 12
    for step, versions in enumerate(trainer.trained):
        assert versions and step - min(versions) <= 1  # dropped past the bound, never trained
    last = history[-1]
    for key in (
        "perf/trainer_wait_ratio",
        "perf/gen_idle_ratio",
        "weights/sync_s",
        "staleness/group_max",
        "rollout/pass_at_1",
        "rollout/pass_at_1/law",
        "rollout/stop_reason/answered",
    ):
        assert key in last, key
    assert last["rollout/pass_at_1"] == pytest.approx(0.5)
    # Generation went on while the trainer stepped (each step takes 10 ms here).
    assert sum(m["perf/rollout_s_during_train"] for m in history) > 0
    assert [s for s, m in sink.rows if "data/group_ids" in m] == [1, 2, 3, 4, 5, 6]


def test_sync_mode_keeps_engines_idle_while_training(tmp_path: Path) -> None:
    controller, engine, _rollout, trainer, _sink = make(tmp_path, steps=4, staleness=0)
    history = asyncio.run(controller.run())
    assert engine.busy_during_step and max(engine.busy_during_step) == 0
    assert [m["perf/rollout_s_during_train"] for m in history] == [0.0] * 4
    for step, versions in enumerate(trainer.trained):
        assert set(versions) == {step}  # on-policy: every token from the current weights


@pytest.mark.parametrize(("limit", "peak"), [(None, 2), (16, 16)])
def test_an_evaluation_runs_as_many_attempts_at_once_as_it_may(
    tmp_path: Path, limit: int | None, peak: int
) -> None:
    # Training keeps 2 in flight; the start's evaluation (7 tasks x 4 attempts) takes the
    # training slots unless it has a limit of its own.
    controller, engine, _rollout, _trainer, _sink = make(
        tmp_path, steps=1, staleness=1, max_in_flight=2, eval_tasks=TASKS,
        eval_at_start=True, eval_attempts=4, eval_max_in_flight=limit,
    )  # fmt: skip
    asyncio.run(controller._evaluate("start"))
    assert engine.peak == peak
    assert controller.evals[-1]["graded"] == 28


def test_a_lost_worker_runs_the_attempt_again(tmp_path: Path) -> None:
    lose = {("g000000/" + TaskStream(TASKS, seed=3).task_at(0).name, 1)}
    controller, _engine, rollout, _trainer, _sink = make(
        tmp_path, steps=30, staleness=50, lose=lose, trajectories_dir=tmp_path / "trajectories"
    )
    history = asyncio.run(controller.run())
    assert history[-1]["rollout/requeued"] == 1
    trained = {gid for m in history for gid in m["data/group_ids"]}
    assert next(iter(lose))[0] in trained
    first = [r for r in rollout.calls if r.group_id.startswith("g000000/") and r.attempt == 1]
    assert len(first) == 2  # lost once, then run again
    # The trained record says where it was lost and who ran it in the end; no other was lost.
    records = read_trajectories(tmp_path / "trajectories")
    lost = {r.trajectory_id: r.lost_on for r in records if r.lost_on}
    assert lost == {"g000000/" + TaskStream(TASKS, seed=3).task_at(0).name + "#1": ["worker-9"]}
    assert {r.worker for r in records} == {"worker-1"}


def test_resume_neither_repeats_nor_skips_a_group(tmp_path: Path) -> None:
    controller, *_ = make(tmp_path, steps=3, staleness=1, checkpoint_every=1)
    first = asyncio.run(controller.run())
    state = read_loop_state(_latest(tmp_path))
    assert state["version"] == 3
    controller, _engine, _rollout, trainer, _sink = make(
        tmp_path, steps=6, staleness=1, checkpoint_every=1
    )
    second = asyncio.run(controller.run())
    assert trainer.steps == 6 and [m["step"] for m in second] == [4, 5, 6]
    ids = [gid for m in first + second for gid in m["data/group_ids"]]
    assert len(ids) == len(set(ids))
    # Every position handed out before the highest trained one was trained or is pending.
    positions = sorted(int(g.split("/", 1)[0][1:]) for g in ids)
    pending = set(read_loop_state(_latest(tmp_path))["stream"]["pending"])
    assert set(range(positions[-1] + 1)) <= set(positions) | pending


def test_stop_request_checkpoints_and_returns(tmp_path: Path) -> None:
    controller, *_ = make(tmp_path, steps=50, staleness=1, checkpoint_every=100)

    async def main() -> list[dict[str, Any]]:
        def stop_after_two(metrics: dict[str, Any]) -> None:
            if metrics["step"] == 2:
                controller.request_stop()

        controller.on_step = stop_after_two
        return await controller.run()

    history = asyncio.run(main())
    assert len(history) == 2
    assert read_loop_state(_latest(tmp_path))["version"] == 2


def _latest(tmp_path: Path) -> Path:
    folder = latest(tmp_path / "checkpoint")
    assert folder is not None
    return folder


def test_rollouts_that_cannot_label_versions_are_told_them_and_drop_nothing(
    tmp_path: Path,
) -> None:
    """vLLM reports no version per token: the worker labels tokens with the version the loop
    told it. Told nothing, every token would stay version 0 and every group past the bound
    would be dropped; told after every publish, max_staleness + 3 steps at bound 1 drop none."""
    controller, _engine, rollout, trainer, _sink = make(tmp_path, steps=4, staleness=1, blind=True)
    history = asyncio.run(controller.run())
    assert rollout.told == [1, 2, 3, 4]
    assert trainer.steps == 4
    assert history[-1].get("buffer/dropped_stale", 0) == 0
    assert max(v for versions in trainer.trained for v in versions) >= 2  # versions advance


def test_a_run_that_drops_every_group_stops_and_says_why(tmp_path: Path) -> None:
    """Engines that never get new weights: after step 1 every group is stale. The run stops
    after `max_dropped_steps` steps' worth of drops, naming the cause, and the drops were
    written as they happened, not only at steps."""
    controller, engine, _rollout, trainer, sink = make(
        tmp_path, steps=20, staleness=0, max_dropped_steps=3, max_dropped_s=0.0,
        live_metrics_every_s=0.001, trajectories_dir=tmp_path / "trajectories",
    )  # fmt: skip

    async def never_update(version: int) -> dict[str, float]:
        return {"weights/sync_s": 0.0, "weights/engines_updated": 0.0}

    controller.weights.publish = never_update  # type: ignore[method-assign]
    with pytest.raises(LoopStalled, match=r"6 groups in a row over \d+ s were dropped as stale"):
        asyncio.run(controller.run())
    assert trainer.steps == 1 and engine.version == 0
    live = [m for _, m in sink.rows if "live/dropped_stale" in m]
    assert live and max(m["live/dropped_stale"] for m in live) >= 1
    # What step 1 trained on, and each dropped group, marked, as it was dropped.
    from bureau.records import read_parquet, read_trajectories

    folder = tmp_path / "trajectories"
    dropped = sorted(folder.glob("dropped-000001-g*.parquet"))
    assert len(dropped) >= 6 and (folder / "step-000001.parquet").is_file()
    assert {r.dropped for f in dropped for r in read_parquet(f)} == {"stale"}
    trained = read_trajectories(folder)
    assert len(trained) == 4 and all(r.dropped is None for r in trained)  # 2 groups of 2
    assert len(read_trajectories(folder, include_dropped=True)) == 4 + 2 * len(dropped)


def test_a_skipped_step_is_not_a_new_version(tmp_path: Path) -> None:
    """A non-finite gradient: the trainer keeps its weights, so nothing is pushed and the
    version stays; the next good step is version 2, not 3."""
    controller, _engine, rollout, trainer, sink = make(tmp_path, steps=3, staleness=1, skip={2})
    history = asyncio.run(controller.run())
    assert trainer.calls == 4 and trainer.steps == 3
    assert controller.weights.pushed == [1, 2, 3]  # type: ignore[attr-defined]
    assert rollout.told == [1, 2, 3]
    assert [m["step"] for m in history] == [1, 2, 3]
    assert history[-1]["train/skipped_steps"] == 1
    assert [s for s, m in sink.rows if m.get("train/skipped_step")] == [1]


def test_endless_skipped_steps_stop_the_run(tmp_path: Path) -> None:
    controller, *_ = make(
        tmp_path, steps=5, staleness=1, skip=set(range(1, 100)), max_batches_without_signal=3
    )
    with pytest.raises(LoopStalled, match="non-finite gradients"):
        asyncio.run(controller.run())


def test_a_repair_never_pushes_a_steps_weights_under_the_old_version(tmp_path: Path) -> None:
    """The trainer's weights change inside its step, before the publish labels them: a repair
    in that window would push step t+1's weights as version t. Repairs run every millisecond
    here; every push and repair must carry the version of the weights the trainer holds."""
    controller, *_ = make(tmp_path, steps=6, staleness=1, repair_every_s=0.001)
    asyncio.run(controller.run())
    labels = controller.weights.labels  # type: ignore[attr-defined]
    assert len(labels) > 6  # repairs ran between the steps
    assert all(label == held for label, held in labels), labels


def test_evaluation_tasks_that_are_training_tasks_are_named(tmp_path: Path) -> None:
    """The same folder, or another folder with the same instruction (whitespace aside), is not
    held out; another instruction is."""
    from bureau.loop.data import trained_on

    def task(name: str, text: str) -> TaskRef:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "instruction.md").write_text(text)
        return TaskRef(name=name, path=str(folder))

    train = [task("t1", "Look up C-101.\n"), task("t2", "Sum the fees.")]
    copy = task("e1", "Look up   C-101.")
    other = task("e2", "Look up C-501.")
    assert trained_on([train[1], copy, other], train) == ["t2", "e1"]
    assert trained_on([other], train) == []


class PhaseLog(RunStatus):
    """Every phase the loop says it is in, in order, with what it said of its buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def set(self, phase: str) -> None:
        super().set(phase)
        if not self.seen or self.seen[-1] != phase:
            self.seen.append(phase)


def test_the_loop_says_what_it_is_doing(tmp_path: Path) -> None:
    """`bureau train` prints the phase whenever it has been quiet for a while: waiting for
    rollouts, a trainer step, a weight push, a checkpoint, an evaluation."""
    controller, *_ = make(
        tmp_path, steps=2, staleness=1, eval_tasks=TASKS[:1], eval_at_start=True,
        eval_at_end=True,
    )  # fmt: skip
    status = PhaseLog()
    controller.status = status
    status.detail = controller.describe
    asyncio.run(controller.run())
    assert status.seen[0] == "evaluating (start): 1 tasks"
    assert status.seen[1:5] == [
        "waiting for rollouts for step 1",
        "training step 1",
        "pushing the weights of step 1 to the engines",
        "waiting for rollouts for step 2",
    ]
    assert "saving the checkpoint of step 2" in status.seen
    assert status.seen[-1] == "evaluating (end): 1 tasks"
    described = status.describe()
    assert described.startswith("evaluating (end): 1 tasks (")
    assert "/2 groups" in described and "dropped as stale" in described
