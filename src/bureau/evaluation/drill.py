"""A fault drill: real trials under injected faults, then the analysis checked against them.

Two kinds of trials share one trials folder, so that every fault kind has somewhere to land:

- the scripted teacher (`bureau.bootstrap.scripted`, with its seeded mistakes, so that the
  model fails on its own too) on starter tasks, through the real harness, tool servers and
  sandboxes: tool hangs and kills, sandbox kills, engine errors and stalls, verifier crashes
  and full disks;
- the oracle on tasks with LLM-judge criteria, graded through the real judge client against a
  `ReferenceJudgeServer`: judge errors, verifier crashes and full disks.

Trials are retried as training retries them (`bureau.trials.retry`). The figures: the share of
trials still a system error after retries, the share of injected faults the analysis
attributes to their cause at their place, the faults that ended in a failure put on the model,
and the trials that ran past their time limits.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from bureau.bootstrap.config import MistakeRates, RecordConfig, teacher_harness
from bureau.config import StrictModel
from bureau.harness.loop import HarnessConfig
from bureau.trials.faults import FaultConfig


def drill_harness() -> HarnessConfig:
    """The teacher's harness with short tool timeouts and resend backoff (hangs end sooner)."""
    return teacher_harness().model_copy(
        update={"tool_timeout_s": 3.0, "engine_retry_backoff_s": 0.1}
    )


class DrillConfig(StrictModel):
    starter: Path
    """A starter dataset (the teacher's tasks)."""
    judged: Path | None = None
    """A dataset built with --judge-criteria; its judged tasks run with the oracle."""
    model: Path
    """A checkpoint folder whose tokenizer renders the teacher's turns."""
    out: Path
    attempts: int = Field(4, ge=1)
    """Attempts per starter task."""
    judged_attempts: int = Field(5, ge=1)
    """Attempts per judged task."""
    faults: FaultConfig
    mistakes: MistakeRates = Field(default_factory=MistakeRates)
    retries: int = Field(2, ge=0)
    concurrency: int = Field(4, ge=1)
    harness: HarnessConfig = Field(default_factory=drill_harness)


def judged_tasks(dataset: Path) -> list[Path]:
    """Task folders of `dataset` whose rubric has judge criteria."""
    import tomllib

    found = []
    for toml in sorted(dataset.glob("*/task.toml")):
        metadata = tomllib.loads(toml.read_text()).get("metadata", {})
        if metadata.get("judge_criteria"):
            found.append(toml.parent)
    return found


def run_drill(config: DrillConfig) -> dict[str, Any]:
    """Run the drill; write analysis.json and analysis.md into `out`; return the figures."""
    from bureau.bootstrap.record import record
    from bureau.evaluation.analysis import analyze, check_against_truth, write_analysis

    started = time.perf_counter()
    record(
        RecordConfig(
            dataset=config.starter,
            model=config.model,
            out=config.out,
            attempts=config.attempts,
            mistakes=config.mistakes,
            harness=config.harness,
            concurrency=config.concurrency,
            retries=config.retries,
            faults=config.faults,
        )
    )
    if config.judged is not None:
        asyncio.run(_judged_part(config))
    wall = time.perf_counter() - started
    analysis = analyze(config.out)
    truth = check_against_truth(analysis, config.out)
    write_analysis(config.out, analysis, truth)
    finals = analysis["final_attempts"]
    return {
        "trials": finals,
        "attempts": analysis["attempts"],
        "system_errors": analysis["system_errors"],
        "system_error_rate": round(analysis["system_errors"] / finals, 4) if finals else None,
        "injected": truth["injected"],
        "attributed": truth["attributed"],
        "attributed_share": truth["attributed_share"],
        "per_kind": truth["per_kind"],
        "counted_as_model_failures": len(truth["counted_as_model_failures"]),
        "overran": len(analysis["overran"]),
        "root_causes": {k: v["count"] for k, v in analysis["root_causes"].items()},
        "wall_s": round(wall, 1),
    }


async def _judged_part(config: DrillConfig) -> None:
    from bureau.judge import JudgeClient
    from bureau.judge.client import JudgeConfig
    from bureau.judge.reference import ReferenceJudgeServer
    from bureau.sandbox import get_runtime
    from bureau.tasks.taskdir import load_task_dir
    from bureau.trials.agents import OracleAgent
    from bureau.trials.faults import FaultInjector
    from bureau.trials.retry import RetryPolicy
    from bureau.trials.scheduler import SchedulerConfig, run_trials

    assert config.judged is not None
    tasks = [load_task_dir(path) for path in judged_tasks(config.judged)]
    if not tasks:
        raise ValueError(f"{config.judged}: no judged task (build it with --judge-criteria)")
    runtime = get_runtime("local", isolation="bwrap")
    try:
        with ReferenceJudgeServer() as server:
            judge_config = JudgeConfig(url=server.url, model="reference", backoff_base_s=0.1)
            async with JudgeClient(judge_config, keys=["drill-key-1", "drill-key-2"]) as judge:
                await run_trials(
                    [task for task in tasks for _ in range(config.judged_attempts)],
                    OracleAgent,
                    runtime,
                    config.out / "trials",
                    config=SchedulerConfig(concurrency=config.concurrency, max_starting=2),
                    judge=judge,
                    retry=RetryPolicy(max_retries=config.retries, backoff_s=0.2),
                    faults=FaultInjector(config.faults),
                )
    finally:
        runtime.close()
