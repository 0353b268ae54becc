"""`bureau tasks check --agent harness`: a model drives every task through real sandboxes.

The engine is the built-in one (`bureau serve`, started here), vLLM (started from `.venv-vllm`)
or servers already running (`--engine-url`, several spread by the router), all through
`bureau.inference.session.engine_session`; each trial runs through the one rollout path
(`bureau.trials.attempt`), which joins its reward to the trajectory; this module only runs them
and prints. The run folder
keeps the run's settings (`run.json`, `config.resolved.toml`), the engine's log, the trial
directories (each with the agent's record and ATIF trajectory) and `trajectories.parquet`, one
row per trajectory with its reward. Rewards and stop reasons are reported; only system errors
make the exit code non-zero.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bureau.cli.common import console, progress_bar
from bureau.config import dump_resolved_config
from bureau.harness.loop import HarnessConfig
from bureau.records import TrajectoryRecord
from bureau.tasks.taskdir import TaskDir
from bureau.trials.result import TrialResult


def summarize(results: list[TrialResult], records: list[TrajectoryRecord], seconds: float) -> int:
    records = [r for r in records if r.token_ids]  # those of trials whose agent ran
    errors = [r for r in results if r.system_error]
    rewards = [r.reward for r in results if not r.system_error and r.reward is not None]
    stops = Counter(rec.stop_reason for rec in records)
    turns = [rec.num_turns for rec in records]
    sampled = sum(rec.num_sampled_tokens for rec in records)
    console.print(
        f"{len(results)} harness trials in {seconds:.1f} s; {len(records)} trajectory records; "
        f"{sampled} sampled tokens ({sampled / max(seconds, 1e-9):.1f}/s)"
    )
    if rewards:
        console.print(
            f"reward: mean {statistics.fmean(rewards):.3f} over {len(rewards)} graded trials; "
            f"{sum(r >= 1.0 for r in rewards)} at 1.0"
        )
    if turns:
        console.print(
            f"turns: mean {statistics.fmean(turns):.2f}, max {max(turns)}; "
            f"multi-turn {sum(t > 1 for t in turns)} of {len(turns)}"
        )
    console.print(f"stop reasons: {dict(stops.most_common())}")
    if errors:
        kinds = Counter(r.status for r in errors)
        console.print(f"[red]{len(errors)} system error(s)[/]: {dict(kinds)}")
        for r in errors[:10]:
            message = r.exception_info.exception_message if r.exception_info else r.status
            console.print(f"  {r.task_name}: {message[:200]}")
        return 1
    console.print("[green]no system errors[/]")
    return 0


def run_harness_check(
    tasks: list[TaskDir],
    *,
    model: Path,
    engine: str,
    engine_urls: list[str],
    out: Path,
    harness: HarnessConfig,
    concurrency: int,
    max_starting: int,
    isolation: str,
    agent_timeout_s: float | None,
    attempts: int = 1,
) -> int:
    from transformers import AutoTokenizer

    from bureau.harness.agent import HarnessAgent
    from bureau.harness.render import Renderer
    from bureau.inference.session import engine_session
    from bureau.records import write_parquet
    from bureau.sandbox import get_runtime
    from bureau.trials.attempt import AttemptOutcome
    from bureau.trials.scheduler import SchedulerConfig, run_attempts
    from bureau.trials.trial import TrialConfig

    model = model.resolve()
    trials_dir = out / "trials"
    trials_dir.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {
        "model": str(model),
        "engine": engine,
        "engine_urls": engine_urls,
        "harness": harness.model_dump(),
        "tasks": [t.name for t in tasks],
        "attempts": attempts,
        "concurrency": concurrency,
        "isolation": isolation,
        "agent_timeout_s": agent_timeout_s,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (out / "run.json").write_text(json.dumps(info, indent=2) + "\n")
    dump_resolved_config(harness, out)
    tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    renderer = Renderer(tokenizer, enable_thinking=harness.enable_thinking)
    runtime = get_runtime("local", isolation=isolation)
    console.print(f"sandboxes: {runtime.enforcement}")
    started = time.perf_counter()
    try:
        with (
            engine_session(
                engine, model, engine_urls, out, harness.context_length, say=console.print
            ) as (sampler, clients),
            progress_bar() as progress,
        ):
            bar = progress.add_task("harness trials", total=len(tasks) * attempts)

            async def main() -> list[AttemptOutcome]:
                try:
                    return await run_attempts(
                        [task for task in tasks for _ in range(attempts)],
                        lambda: HarnessAgent(sampler, renderer, harness, model.name),
                        runtime,
                        trials_dir,
                        trial_config=TrialConfig(max_agent_timeout_s=agent_timeout_s),
                        config=SchedulerConfig(concurrency=concurrency, max_starting=max_starting),
                        on_result=lambda _: progress.advance(bar),
                    )
                finally:
                    for client in clients:
                        await client.aclose()

            outcomes = asyncio.run(main())
    finally:
        runtime.close()
    seconds = time.perf_counter() - started
    records = [o.record for o in outcomes]
    write_parquet(records, out / "trajectories.parquet")
    code = summarize([o.result for o in outcomes], records, seconds)
    console.print(
        f"run folder {out}: trials/, trajectories.parquet, run.json, config.resolved.toml"
    )
    return code
