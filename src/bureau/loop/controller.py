"""The controller: generation and training joined by a buffer, with bounded staleness.

Two coroutines share one event loop. The *producer* starts a group (all attempts of one task)
whenever the admission rule allows it and a trajectory slot is free, and puts the group into the
buffer once every attempt is back. The *consumer* waits for B groups, checks each one's
staleness (drop or keep), turns them into a batch (group-relative advantages, loss weights), has
the trainer take one optimizer step, pushes the new weights into the engines, and only then
raises the version the producer admits against. Synchronous RL is the same code with
max_staleness 0: admission then stops while the trainer works, so the engines sit idle.

A trajectory whose worker died runs again (`WorkerLost`, counted); every other failure comes back
as a rollout with a system error, which the advantage estimator masks. Checkpoints hold the
trainer's state and the task stream's; groups in flight or in the buffer when the run stops are
not saved but run again, first, on resume.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bureau.algo.advantages import AdvantageConfig
from bureau.algo.reductions import ReductionConfig
from bureau.loop import checkpoints
from bureau.loop.buffer import Activity, Group, GroupBuffer
from bureau.loop.data import TaskStream, group_id
from bureau.loop.ports import MetricsSink, TrainerPort, WeightPort
from bureau.loop.rollout import Rollout, RolloutBackend, RolloutRequest, TaskRef, WorkerLost
from bureau.loop.staleness import Admission, group_staleness
from bureau.loop.stats import eval_metrics, rollout_metrics
from bureau.loop.status import RunStatus
from bureau.records import write_parquet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopSettings:
    """The controller's share of the run config."""

    steps: int
    groups_per_step: int
    attempts: int
    max_in_flight: int
    max_staleness: int
    stale_policy: str = "drop"
    seed: int = 0
    checkpoint_every: int = 10
    eval_every: int | None = None
    eval_at_start: bool = False
    eval_at_end: bool = False
    eval_attempts: int = 1
    eval_temperature: float | None = None
    eval_max_in_flight: int | None = None
    """Evaluation attempts in flight (None: they share `max_in_flight` with training)."""
    repair_every_s: float = 2.0
    max_batches_without_signal: int = 25
    """Consecutive batches with no usable group (or whose optimizer step was skipped for a
    non-finite gradient) before the run stops with an error."""
    max_dropped_steps: int = 5
    """Stop with an error once this many steps' worth of groups in a row (`groups_per_step`
    each) were dropped as stale, for at least `max_dropped_s`: the engines' tokens never catch
    up with the trainer (weights not reaching the engines, or versions not reaching the
    workers). A kept group or an engine repair ends the streak."""
    max_dropped_s: float = 300.0
    """The streak must also last this long: an engine that restarts serves its initial weights
    until it is repaired, and its groups are dropped meanwhile (vLLM takes a minute or two)."""
    live_metrics_every_s: float = 5.0
    """How often the counters (stale drops, buffer, groups running) are written between steps,
    so a run that trains nothing still says why."""


class Controller:
    """Runs the loop to `settings.steps`; see the module docstring."""

    def __init__(
        self,
        settings: LoopSettings,
        *,
        stream: TaskStream,
        rollout: RolloutBackend,
        trainer: TrainerPort,
        weights: WeightPort,
        advantages: AdvantageConfig,
        reduction: ReductionConfig,
        sink: MetricsSink,
        checkpoint_dir: Path,
        eval_tasks: Sequence[TaskRef] = (),
        on_step: Callable[[dict[str, Any]], None] | None = None,
        on_eval: Callable[[dict[str, Any]], None] | None = None,
        trajectories_dir: Path | None = None,
        status: RunStatus | None = None,
    ) -> None:
        self.settings = settings
        self.stream = stream
        self.rollout = rollout
        self.trainer = trainer
        self.weights = weights
        self.advantages = advantages
        self.reduction = reduction
        self.sink = sink
        self.checkpoint_dir = checkpoint_dir
        self.eval_tasks = list(eval_tasks)
        self.on_step = on_step
        self.on_eval = on_eval
        self.trajectories_dir = trajectories_dir
        """Where each step's trajectories go, `step-NNNNNN.parquet` (None: nowhere)."""
        self.status = status or RunStatus()
        """The phase the loop is in, for a person watching (`bureau train`'s progress)."""
        self.status.detail = self.describe
        self.version = 0
        self.admission = Admission(settings.groups_per_step, settings.max_staleness)
        self.buffer = GroupBuffer()
        self.activity = Activity(settings.max_in_flight)
        self.slots = asyncio.Semaphore(settings.max_in_flight)
        self.stop_requested = asyncio.Event()
        self.evals: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._counters: Counter[str] = Counter()
        self._inflight: set[asyncio.Task[None]] = set()
        self._last_checkpoint = -1
        self._skipped: list[str] = []
        """Groups finished without training since the last step (stale, or no signal)."""
        self._dropped_in_a_row = 0
        self._dropping_since = 0.0
        self._oldest_dropped: int | None = None
        self._weights_lock = asyncio.Lock()
        """Held from a trainer step to the publish of its weights, and by each repair: a repair
        in between would push the new weights under the old version."""

    # -- public ---------------------------------------------------------------------------

    async def run(self) -> list[dict[str, Any]]:
        """Resume if a checkpoint exists, run to `steps`, checkpoint; returns step metrics."""
        await self._resume()
        history: list[dict[str, Any]] = []
        if self.settings.eval_at_start and self.eval_tasks and self.version == 0:
            await self._evaluate("start")
        producer = asyncio.create_task(self._produce(), name="bureau-producer")
        repair = asyncio.create_task(self._repair(), name="bureau-weight-repair")
        live = asyncio.create_task(self._live_metrics(), name="bureau-live-metrics")
        try:
            history = await self._consume()
        finally:
            for task in (producer, repair, live, *self._inflight):
                task.cancel()
            await asyncio.gather(producer, repair, live, *self._inflight, return_exceptions=True)
        if self.version != self._last_checkpoint:
            await self._checkpoint()
        if self.settings.eval_at_end and self.eval_tasks and not self.stop_requested.is_set():
            await self._evaluate("end")
        return history

    def describe(self) -> str:
        """The buffer and what is in flight, in words."""
        return (
            f"buffer {len(self.buffer)}/{self.settings.groups_per_step} groups, "
            f"{self.admission.running} groups ({self.activity.running} trajectories) in flight, "
            f"{self._counters['buffer/dropped_stale']} dropped as stale, "
            f"{self._counters['rollout/requeued']} requeued"
        )

    def request_stop(self) -> None:
        """Finish the current step, checkpoint and return (Ctrl-C)."""
        self.stop_requested.set()
        self._wake.set()

    # -- generation -----------------------------------------------------------------------

    def _can_start(self) -> bool:
        free = self.settings.max_in_flight - self.activity.running
        return free > 0 and self.admission.capacity(self.version) > 0

    async def _produce(self) -> None:
        while not self.stop_requested.is_set():
            while not self._can_start():
                self._wake.clear()
                await self._wake.wait()
                if self.stop_requested.is_set():
                    return
            position, task = self.stream.next()
            self.admission.start()
            job = asyncio.create_task(self._run_group(position, task))
            self._inflight.add(job)
            job.add_done_callback(self._inflight.discard)
            await asyncio.sleep(0)

    async def _run_group(self, position: int, task: TaskRef) -> None:
        gid = group_id(position, task)
        requests = [
            RolloutRequest(
                task=task,
                group_id=gid,
                attempt=a,
                seed=(self.settings.seed * 1_000_003 + position) * 64 + a,
            )
            for a in range(self.settings.attempts)
        ]
        try:
            rollouts = await asyncio.gather(*(self._run_attempt(r) for r in requests))
        except BaseException:
            self.admission.finish(accepted=False)
            raise
        self.admission.finish(accepted=True)
        if any(r.task_defect for r in rollouts) and task.name not in self.stream.dropped:
            self.stream.drop(task.name)
            self._counters["data/tasks_dropped_broken"] += 1
            log.warning("%s: its verifier fails on its oracle too; dropped from the run", task.name)
        await self.buffer.put(Group(position, gid, task, list(rollouts)))
        self._wake.set()

    async def _run_attempt(
        self, request: RolloutRequest, slots: asyncio.Semaphore | None = None
    ) -> Rollout:
        requeued = 0
        lost_on: list[str] = []
        async with slots or self.slots:
            self.activity.change(+1)
            self._wake.set()
            try:
                while True:
                    try:
                        result = await self.rollout.rollout(request)
                    except WorkerLost as exc:
                        requeued += 1
                        lost_on.append(exc.worker)
                        self._counters["rollout/requeued"] += 1
                        log.warning("worker lost on %s: %s; running it again", request, exc)
                        await asyncio.sleep(min(2.0, 0.2 * requeued))
                        continue
                    result.requeued = requeued
                    result.record.worker = result.worker
                    result.record.lost_on = lost_on
                    return result
            finally:
                self.activity.change(-1)
                self._wake.set()

    # -- training -------------------------------------------------------------------------

    async def _take_batch(self) -> tuple[list[Group], float]:
        """B groups within the staleness bound (or kept past it); seconds waited."""
        taken: list[Group] = []
        waited = 0.0
        while len(taken) < self.settings.groups_per_step:
            self.status.set(f"waiting for rollouts for step {self.version + 1}")
            started = time.perf_counter()
            await self.buffer.wait_for(1)
            waited += time.perf_counter() - started
            group = self.buffer.take()
            staleness = group_staleness(group.weight_versions, self.version)
            if staleness > self.settings.max_staleness:
                if self.settings.stale_policy == "drop":
                    self._counters["buffer/dropped_stale"] += 1
                    self._finish_groups([group], trained=False)
                    await self._write_dropped(group)
                    self._note_dropped(group)
                    continue
                self._counters["buffer/kept_stale"] += 1
            self._dropped_in_a_row, self._oldest_dropped = 0, None
            taken.append(group)
        return taken, waited

    async def _write_dropped(self, group: Group) -> None:
        """Keep a group dropped as stale, marked, beside the steps' records (for the audit)."""
        if self.trajectories_dir is None:
            return
        records = [replace(r.record, dropped="stale") for r in group.rollouts]
        name = f"dropped-{self.version:06d}-g{group.position:07d}.parquet"
        path = self.trajectories_dir / name
        await asyncio.to_thread(write_parquet, records, path)

    def _note_dropped(self, group: Group) -> None:
        """Count a stale drop; too many in a row stop the run (`max_dropped_steps`)."""
        if self._dropped_in_a_row == 0:
            self._dropping_since = time.monotonic()
        self._dropped_in_a_row += 1
        oldest = min((v for row in group.weight_versions for v in row if v >= 0), default=None)
        if oldest is not None and (self._oldest_dropped is None or oldest < self._oldest_dropped):
            self._oldest_dropped = oldest
        limit = self.settings.max_dropped_steps * self.settings.groups_per_step
        lasted = time.monotonic() - self._dropping_since
        if self._dropped_in_a_row >= limit and lasted >= self.settings.max_dropped_s:
            raise LoopStalled(
                f"{self._dropped_in_a_row} groups in a row over {lasted:.0f} s were dropped as "
                f"stale (their oldest "
                f"tokens were sampled at weight version {self._oldest_dropped}, the trainer is "
                f"at {self.version}, the bound is {self.settings.max_staleness}): the tokens "
                "never catch up with the trainer. The engines are not getting the new weights, "
                "or the rollout workers are not told their versions; see `weights/*` and "
                "`staleness/*` in metrics.jsonl"
            )

    def _finish_groups(self, groups: Sequence[Group], *, trained: bool) -> None:
        for group in groups:
            self.stream.done(group.position)
        if not trained:
            self._skipped.extend(g.group_id for g in groups)
            self.admission.release(len(groups))
            self._wake.set()

    async def _consume(self) -> list[dict[str, Any]]:
        from bureau.trainer.data import records_to_batch

        history: list[dict[str, Any]] = []
        last = time.perf_counter()
        wait_total = 0.0
        barren, barren_why, barren_errors = 0, Counter[str](), Counter[str | None]()
        self.activity.window()
        while self.version < self.settings.steps and not self.stop_requested.is_set():
            stop = asyncio.create_task(self.stop_requested.wait())
            take = asyncio.create_task(self._take_batch())
            await asyncio.wait({stop, take}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if not take.done():
                take.cancel()
                break
            groups, waited = take.result()
            wait_total += waited
            records = [r.record for g in groups for r in g.rollouts]
            made = records_to_batch(records, self.advantages, self.reduction)
            if made.batch is None:
                self._counters["data/groups_without_signal"] += len(groups)
                self._finish_groups(groups, trained=False)
                barren += 1
                for reason, n in made.excluded.items():
                    barren_why[reason] += n
                barren_errors.update(r.error_kind for g in groups for r in g.rollouts)
                if barren >= self.settings.max_batches_without_signal:
                    raise LoopStalled.no_signal(barren, barren_why, barren_errors)
                continue
            busy_started = time.perf_counter()
            async with self._weights_lock:
                generated_before = self.activity.slot_seconds()
                self.status.set(f"training step {self.version + 1}")
                metrics = await self.trainer.step(made.batch)
                busy = time.perf_counter() - busy_started
                # Async RL overlaps them; sync RL (max_staleness 0) must show 0 here.
                metrics["perf/rollout_s_during_train"] = (
                    self.activity.slot_seconds() - generated_before
                )
                if metrics.get("train/skipped_step"):
                    # The trainer dropped the gradient (non-finite) and its weights are the
                    # same: no new version, nothing to push; the groups are spent.
                    self._counters["train/skipped_steps"] += 1
                    self._finish_groups(groups, trained=False)
                    self.sink.log(self.version, {"train/skipped_step": 1.0, **metrics})
                    barren += 1
                    barren_why["non_finite_gradient"] += 1
                    if barren >= self.settings.max_batches_without_signal:
                        raise LoopStalled.no_signal(barren, barren_why, barren_errors)
                    continue
                self.status.set(f"pushing the weights of step {self.version + 1} to the engines")
                sync = await self.weights.publish(self.version + 1)
                if sync.get("weights/engines_updated", 1.0) > 0:
                    await self.rollout.set_weight_version(self.version + 1)
                self.version += 1
            barren, barren_why, barren_errors = 0, Counter(), Counter()
            self._finish_groups(groups, trained=True)
            if self.trajectories_dir is not None:
                await asyncio.to_thread(
                    write_parquet, records, trajectories_file(self.trajectories_dir, self.version)
                )
            self._wake.set()
            now = time.perf_counter()
            metrics |= self._step_metrics(groups, made.excluded, now - last, wait_total, busy, sync)
            last, wait_total = now, 0.0
            self.sink.log(self.version, metrics)
            history.append(metrics)
            if self.on_step is not None:
                self.on_step(metrics)
            if self.version % self.settings.checkpoint_every == 0:
                await self._checkpoint()
            every = self.settings.eval_every
            if every and self.eval_tasks and self.version % every == 0:
                await self._evaluate(f"step {self.version}")
        return history

    def _step_metrics(
        self,
        groups: Sequence[Group],
        excluded: dict[str, int],
        span: float,
        waited: float,
        busy: float,
        sync: dict[str, float],
    ) -> dict[str, Any]:
        rollouts = [r for g in groups for r in g.rollouts]
        gen_s, idle_s, busy_slot_s = self.activity.window()
        sync_s = float(sync.get("weights/sync_s", 0.0))
        staleness = [group_staleness(g.weight_versions, self.version - 1) for g in groups]
        metrics: dict[str, Any] = {
            "step": self.version,
            "time/step_s": span,
            "time/trainer_busy_s": busy,
            "time/trainer_wait_s": waited,
            "perf/trainer_wait_ratio": waited / span if span > 0 else 0.0,
            "perf/gen_idle_ratio": idle_s / gen_s if gen_s > 0 else 0.0,
            "perf/gen_slot_utilization": busy_slot_s / (gen_s * self.activity.slots)
            if gen_s > 0
            else 0.0,
            "perf/sampled_tokens_per_s": sum(r.record.num_sampled_tokens for r in rollouts) / span
            if span > 0
            else 0.0,
            "weights/sync_share": sync_s / span if span > 0 else 0.0,
            "staleness/group_max": max(staleness, default=0),
            "buffer/size": len(self.buffer),
            "buffer/running_groups": self.admission.running,
            "data/group_ids": [g.group_id for g in groups],
            "data/skipped_group_ids": self._skipped,
            "data/next_position": self.stream.next_position,
        }
        metrics |= sync
        metrics |= rollout_metrics(rollouts, "rollout")
        metrics |= {f"data/excluded_{k}": v for k, v in excluded.items()}
        metrics |= dict(self._counters)
        self._skipped = []
        return metrics

    # -- evaluation -----------------------------------------------------------------------

    async def _evaluate(self, label: str) -> dict[str, Any]:
        self.status.set(f"evaluating ({label}): {len(self.eval_tasks)} tasks")
        started = time.perf_counter()
        requests = [
            RolloutRequest(
                task=task,
                group_id=f"eval/{task.name}",
                attempt=a,
                seed=(index * 64 + a) * 7919 + 17,
                purpose="eval",
                temperature=self.settings.eval_temperature,
            )
            for index, task in enumerate(self.eval_tasks)
            for a in range(self.settings.eval_attempts)
        ]
        limit = self.settings.eval_max_in_flight
        slots = asyncio.Semaphore(limit) if limit is not None else self.slots
        rollouts = await asyncio.gather(*(self._run_attempt(r, slots) for r in requests))
        result = eval_metrics(list(rollouts), seed=self.settings.seed)
        result |= {"label": label, "version": self.version}
        result["time_s"] = time.perf_counter() - started
        self.evals.append(result)
        self.sink.log(self.version, {f"eval/{k}": v for k, v in result.items() if _scalar(v)})
        if self.on_eval is not None:
            self.on_eval(result)
        return result

    # -- checkpoints ----------------------------------------------------------------------

    async def _checkpoint(self) -> None:
        state = {
            "version": self.version,
            "stream": self.stream.state(),
            "counters": dict(self._counters),
        }
        folder = checkpoints.step_folder(self.checkpoint_dir, self.version)
        self.status.set(f"saving the checkpoint of step {self.version}")
        await self.trainer.save(folder, state)
        checkpoints.commit(self.checkpoint_dir, folder)
        self._last_checkpoint = self.version

    async def _resume(self) -> None:
        folder = checkpoints.latest(self.checkpoint_dir)
        if folder is None:
            self.version = await self.trainer.version()
            return
        state = await self.trainer.load(folder)
        self.version = int(state["version"])
        self.stream.load_state(state["stream"])
        self._counters.update(state.get("counters", {}))
        # Every group trained so far took one step's share of the admission budget.
        self.admission.accepted = self.version * self.settings.groups_per_step
        self._last_checkpoint = self.version
        if self.version > 0:
            sync = await self.weights.publish(self.version)
            if sync.get("weights/engines_updated", 1.0) > 0:
                await self.rollout.set_weight_version(self.version)

    async def _repair(self) -> None:
        """Engines restarted by Ray come back with the initial weights: push the current ones."""
        while True:
            await asyncio.sleep(self.settings.repair_every_s)
            try:
                async with self._weights_lock:
                    fixed = await self.weights.repair(self.version)
            except Exception as exc:  # an engine still restarting; try again next round
                log.warning("weight repair failed: %s", exc)
                continue
            if fixed:
                self._counters["engines/weights_repaired"] += fixed
                self._dropped_in_a_row, self._oldest_dropped = 0, None  # a restart is over

    async def _live_metrics(self) -> None:
        """Every `live_metrics_every_s`: the counters and the buffer, between steps too."""
        while True:
            await asyncio.sleep(self.settings.live_metrics_every_s)
            self.sink.log(
                self.version,
                {
                    "live/dropped_stale": self._counters["buffer/dropped_stale"],
                    "live/dropped_in_a_row": self._dropped_in_a_row,
                    "live/buffer_size": len(self.buffer),
                    "live/running_groups": self.admission.running,
                    "live/trajectories_running": self.activity.running,
                    "live/requeued": self._counters["rollout/requeued"],
                },
            )


def trajectories_file(folder: Path, step: int) -> Path:
    """The Parquet file of the trajectories step `step` trained on."""
    return folder / f"step-{step:06d}.parquet"


class LoopStalled(RuntimeError):
    """The run trains nothing and would go on doing so: groups dropped as stale one after
    another, or batch after batch without learning signal (`no_signal`)."""

    @classmethod
    def no_signal(cls, batches: int, why: Counter[str], errors: Counter[str | None]) -> LoopStalled:
        """Every trajectory failed, every group had one reward for all its attempts, or every
        optimizer step was skipped for a non-finite gradient."""
        kinds = {k: n for k, n in errors.items() if k is not None}
        reasons = {k: n for k, n in why.items() if n}
        if why.get("non_finite_gradient"):
            hint = (
                "optimizer steps were skipped for non-finite gradients: lower the learning "
                "rate, check the loss's clipping, or the checkpoint"
            )
        elif kinds:
            hint = "system errors dominate: check the trial directories' exception.txt"
        else:
            hint = (
                "every group had identical rewards: the policy always fails (or always "
                "passes) these tasks, so group-relative advantages are zero"
            )
        return cls(
            f"{batches} batches in a row had no usable group (excluded: {reasons}; system "
            f"errors by kind: {kinds}): {hint}"
        )


def _scalar(value: Any) -> bool:
    return isinstance(value, int | float | str | bool)
