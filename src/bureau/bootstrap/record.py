"""Recording the teacher: every task of a dataset as real trials, records to Parquet.

Each trial is a fresh sandbox with its MCP tool servers, the scripted agent through the real
harness, and the task's verifier, exactly as `bureau tasks check --agent harness` runs a model.
The run folder gets `run.json` (the resolved settings), `trials/`, `trajectories.parquet` (one
row per trajectory, with its reward) and `teacher.jsonl` (per trial: task, mistake, reward).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bureau.bootstrap.config import RecordConfig
from bureau.records import TrajectoryRecord, write_parquet
from bureau.tasks.taskdir import TaskDir

PARQUET = "trajectories.parquet"
TEACHER_LOG = "teacher.jsonl"


@dataclass
class RecordSummary:
    """What a recording produced."""

    records: list[TrajectoryRecord]
    mistakes: dict[str, str] = field(default_factory=dict)
    """Trial name -> the teacher's mistake (`none` for a clean demonstration)."""
    system_errors: int = 0
    seconds: float = 0.0

    def rewards_by_mistake(self) -> dict[str, list[float]]:
        by: dict[str, list[float]] = {}
        for record in self.records:
            if record.reward is not None:
                by.setdefault(self.mistakes.get(record.trial_name, "?"), []).append(record.reward)
        return by


def select_tasks(dataset: Path, templates: list[str] | None, max_tasks: int | None) -> list[Path]:
    """Task folders of the dataset, only those of `templates` (manifest field) when given."""
    from bureau.tasks.dataset import load_dataset

    loaded = load_dataset(dataset)
    chosen = [
        loaded.task_path(entry.task_id)
        for entry in loaded.entries
        if templates is None or (entry.model_extra or {}).get("template") in templates
    ]
    return chosen[:max_tasks] if max_tasks is not None else chosen


def record(config: RecordConfig, *, on_result: Callable[[], None] | None = None) -> RecordSummary:
    """Run the teacher on the configured tasks; see the module docstring."""
    from transformers import AutoTokenizer

    from bureau.bootstrap.scripted import AttemptCounter, ScriptedAgent
    from bureau.harness.render import Renderer
    from bureau.sandbox import get_runtime
    from bureau.tasks.taskdir import load_task_dir
    from bureau.trials.attempt import AttemptOutcome
    from bureau.trials.faults import FaultInjector
    from bureau.trials.retry import RetryPolicy
    from bureau.trials.scheduler import SchedulerConfig, run_attempts
    from bureau.trials.trial import TrialConfig

    tasks: list[TaskDir] = [
        load_task_dir(p) for p in select_tasks(config.dataset, config.templates, config.max_tasks)
    ]
    if not tasks:
        raise ValueError(f"no task of {config.dataset} matches templates {config.templates}")
    out = config.out
    trials_dir = out / "trials"
    trials_dir.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(config.model_dump_json(indent=2) + "\n")
    tokenizer = AutoTokenizer.from_pretrained(str(config.model), local_files_only=True)
    renderer = Renderer(tokenizer, enable_thinking=config.harness.enable_thinking)
    counter = AttemptCounter()
    runtime = get_runtime("local", isolation=config.isolation)
    started = time.perf_counter()

    def make_agent() -> ScriptedAgent:
        return ScriptedAgent(
            renderer,
            config.harness,
            config.mistakes,
            config.seed,
            counter,
            answer_in_message=config.answer_in_message,
            lookup_by_code=config.lookup_by_code,
        )

    async def main() -> list[AttemptOutcome]:
        return await run_attempts(
            [task for task in tasks for _ in range(config.attempts)],
            make_agent,
            runtime,
            trials_dir,
            trial_config=TrialConfig(max_agent_timeout_s=config.agent_timeout_s),
            config=SchedulerConfig(concurrency=config.concurrency, max_starting=2),
            on_result=(lambda _: on_result()) if on_result is not None else None,
            retry=RetryPolicy(max_retries=config.retries),
            faults=FaultInjector(config.faults),
        )

    try:
        outcomes = asyncio.run(main())
    finally:
        runtime.close()
    # Attempt numbers go to trials as they start, in any order: sort by task and attempt, so
    # that one seed writes the same trajectories in the same order (and SFT sees one stream).
    outcomes.sort(
        key=lambda o: (o.result.task_name, int(o.result.agent_metadata.get("attempt", -1)))
    )
    results = [o.result for o in outcomes]
    records = [o.record for o in outcomes if o.record.token_ids]  # SFT needs tokens
    write_parquet([o.record for o in outcomes], out / PARQUET)
    mistakes = {r.trial_name: str(r.agent_metadata.get("mistake", "?")) for r in results}
    with (out / TEACHER_LOG).open("w") as f:
        for r in results:
            line = {"trial": r.trial_name, "task": r.task_name, "mistake": mistakes[r.trial_name]}
            f.write(json.dumps(line | {"reward": r.reward, "status": r.status}) + "\n")
    return RecordSummary(
        records,
        mistakes,
        system_errors=sum(1 for r in results if r.system_error),
        seconds=time.perf_counter() - started,
    )


def describe(summary: RecordSummary) -> list[str]:
    """Lines for the console: counts, rewards by mistake, stop reasons."""
    lines = [
        f"{len(summary.records)} teacher trajectories in {summary.seconds:.1f} s; "
        f"{summary.system_errors} system error(s)"
    ]
    for mistake, rewards in sorted(summary.rewards_by_mistake().items()):
        passed = sum(r >= 1.0 for r in rewards)
        lines.append(
            f"  {mistake:15s} {len(rewards):4d} trajectories, mean reward "
            f"{sum(rewards) / len(rewards):.3f}, {passed} at 1.0"
        )
    stops = Counter(r.stop_reason for r in summary.records)
    lines.append(f"stop reasons: {dict(stops.most_common())}")
    return lines
