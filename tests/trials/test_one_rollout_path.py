"""One trial whose agent overruns its time, through each of the four entry points that run the
harness on trials: the RL loop's rollout worker, `bureau eval`, `bureau tasks check --agent
harness` and `bureau bootstrap record`. Each must give the same training record: a graded 0 (an
agent timeout is the agent's failure, never a masked system error), and `train-offline` and
`bureau train` must weigh it alike. Before the one rollout path, the eval, check and record
Parquet files had no record for such a trial (or a masked one), while the loop trained it as 0.

The engine accepts connections and never answers, and the harness's own deadline is moved past
the trial's, so the trial's agent timeout is what ends the agent.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bureau.records import TrajectoryRecord, read_parquet

TIMEOUT_S = 3.0
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture
def silent_engine() -> Iterator[str]:
    """A URL whose server takes connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> None:
    from bureau.bootstrap.scripted import ScriptedSampler
    from bureau.harness.agent import HarnessAgent

    run = HarnessAgent.run

    async def past_the_trial(self: HarnessAgent, ctx: Any) -> Any:
        self.deadline_margin_s = -60.0  # its own deadline a minute after the trial's
        return await run(self, ctx)

    monkeypatch.setattr(HarnessAgent, "run", past_the_trial)

    async def never(self: Any, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(ScriptedSampler, "complete", never)


def _shape(record: TrajectoryRecord) -> tuple[Any, ...]:
    return (
        record.reward,
        record.system_error,
        record.trial_status,
        record.stop_reason,
        len(record.token_ids),
        sum(record.loss_mask),
        record.task_name,
    )


def test_an_agent_timeout_is_the_same_zero_through_every_entry_point(
    tmp_path: Path, small_dataset: Path, tiny_model: Path, silent_engine: str, stalled: None
) -> None:
    from bureau.algo.advantages import advantages_for_records
    from bureau.bootstrap.config import RecordConfig
    from bureau.bootstrap.record import record
    from bureau.cli.harness_check import run_harness_check
    from bureau.evaluation.run import EvalConfig, load_eval_tasks, run_eval
    from bureau.harness.loop import HarnessConfig
    from bureau.loop.config import AlgorithmSection
    from bureau.loop.rollout import RolloutRequest, TaskRef
    from bureau.loop.worker import RolloutWorker, WorkerSpec

    # A single-step task: the scripted teacher of step 4 runs no [[steps]].
    task = next(t for t in load_eval_tasks(small_dataset) if not t.task.steps)
    harness = HarnessConfig(
        max_turns=2, context_length=8192, max_tokens_per_turn=16, tool_prefixes=["code_run_python"]
    )
    found: dict[str, TrajectoryRecord] = {}

    # 1. The RL loop's rollout worker.
    async def loop_worker() -> TrajectoryRecord:
        spec = WorkerSpec(
            name="w0", model_dir=str(tiny_model), served_model=tiny_model.name,
            engine_urls=(silent_engine,), harness=harness, trials_dir=str(tmp_path / "loop"),
            isolation=ISOLATION, agent_timeout_s=TIMEOUT_S, warm_sandboxes=0,
        )  # fmt: skip
        worker = await RolloutWorker(spec).start()
        try:
            ref = TaskRef(task.task.name, str(task.task.path), task.domain, task.template or "")
            rollout = await worker.rollout(RolloutRequest(ref, "g000000/t", 0, seed=1))
        finally:
            await worker.close()
        assert rollout.passed is False and rollout.error is None
        assert rollout.error_kind is None  # no system error: nothing masked
        return rollout.record

    found["loop"] = asyncio.run(loop_worker())

    # 2. `bureau eval` (engine url), its Parquet and its report row.
    config = EvalConfig(
        engine="url", engine_urls=[silent_engine], agent_timeout_s=TIMEOUT_S, retries=0,
        isolation=ISOLATION, harness=harness, concurrency=1,
    )  # fmt: skip
    run = run_eval(small_dataset, [task], tiny_model, config, tmp_path / "eval")
    (found["eval"],) = read_parquet(tmp_path / "eval" / "trajectories.parquet")
    (row,) = run.rows
    assert (row.passed, row.reward, row.system_error, row.agent_failure) == (
        False, 0.0, None, "agent_timeout",
    )  # fmt: skip

    # 3. `bureau tasks check --agent harness`.
    run_harness_check(
        [task.task], model=tiny_model, engine="url", engine_urls=[silent_engine],
        out=tmp_path / "check", harness=harness, concurrency=1, max_starting=1,
        isolation=ISOLATION, agent_timeout_s=TIMEOUT_S,
    )  # fmt: skip
    (found["check"],) = read_parquet(tmp_path / "check" / "trajectories.parquet")

    # 4. `bureau bootstrap record` (the scripted teacher, stalled).
    teacher = RecordConfig(
        dataset=small_dataset, model=tiny_model, out=tmp_path / "record", max_tasks=1,
        templates=[task.template or ""], isolation=ISOLATION, agent_timeout_s=TIMEOUT_S,
    )  # fmt: skip
    record(teacher)
    (found["record"],) = read_parquet(tmp_path / "record" / "trajectories.parquet")

    shapes = {name: _shape(r) for name, r in found.items()}
    print(shapes)
    expected = (0.0, None, "agent_timeout", "system_error", 0, 0, task.task.name)
    assert shapes == dict.fromkeys(found, expected)
    # Training weighs it alike: beside a passing attempt in one group, it is the group's 0 and
    # gets the same (negative) advantage from whichever entry point's file it came.
    algorithm = AlgorithmSection()
    advantages = set()
    for timed_out in found.values():
        passing = TrajectoryRecord.from_dict(timed_out.to_dict())
        passing.reward, passing.trajectory_id = 1.0, "other"
        timed_out.group_id = passing.group_id = "g"
        made = advantages_for_records([timed_out, passing], algorithm.advantages)
        assert made.num_used == 2
        advantages.add(made.advantages[0])
    (advantage,) = advantages
    assert advantage is not None and advantage < 0
