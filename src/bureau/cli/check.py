"""`bureau tasks check`: every task through a real sandbox with a built-in agent.

The oracle must score 1.0 on every task and nop 0.0; anything else is a broken task, listed
with its reason (the system error, or the criteria that failed).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from bureau.cli.common import console, progress_bar, task_dirs
from bureau.errors import BureauSystemError
from bureau.tasks.errors import TaskFormatErrors
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import BUILTIN_AGENTS
from bureau.trials.result import TrialResult
from bureau.trials.scheduler import SchedulerConfig, run_trials
from bureau.trials.trial import TrialConfig

if TYPE_CHECKING:  # the harness needs the `models` extra; oracle and nop checks do not
    from bureau.harness.loop import HarnessConfig

EXPECTED = {"oracle": 1.0, "nop": 0.0}


def _reason(result: TrialResult, trials_dir: Path) -> str:
    if result.exception_info is not None:
        return f"{result.status}: {result.exception_info.exception_message}"
    grading = trials_dir / result.trial_name / "verifier" / "grading.json"
    if grading.exists():
        data = json.loads(grading.read_text())
        failed = [c for c in data.get("results", []) if not c.get("passed")]
        return "; ".join(f"{c.get('id')}: {c.get('reason')}" for c in failed)[:300]
    return f"reward {result.reward}"


def load_tasks(root: Path, max_tasks: int | None = None) -> list[TaskDir]:
    """The tasks under `root` (the first `max_tasks`); exits 2 listing every malformed one."""
    dirs = task_dirs(root)[:max_tasks] if max_tasks is not None else task_dirs(root)
    try:
        return [load_task_dir(d) for d in dirs]
    except TaskFormatErrors as exc:
        for error in exc.errors:
            console.print(f"[red]error:[/] {error}")
        raise typer.Exit(2) from exc


def resolve_harness_config(
    path: Path | None, overrides: list[str] | None = None, **flags: Any
) -> HarnessConfig:
    """Harness settings: the TOML file's, then the flags given, then the `--set` overrides."""
    from bureau.cli.options import flag_overrides, load_or_exit
    from bureau.harness.loop import HarnessConfig

    given = flag_overrides(flags) + list(overrides or [])
    return load_or_exit(HarnessConfig, path, given, lambda s: console.print(s, markup=False))


def run_check(
    root: Path,
    agent: str,
    concurrency: int,
    isolation: str,
    trials_dir: Path | None,
    max_starting: int,
    *,
    max_tasks: int | None = None,
) -> int:
    from bureau.sandbox import get_runtime

    tasks = load_tasks(root, max_tasks)
    try:
        runtime = get_runtime("local", isolation=isolation)
    except BureauSystemError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    trials_dir = trials_dir or Path("runs") / f"check-{agent}-{time.strftime('%Y%m%d-%H%M%S')}"
    trials_dir.mkdir(parents=True, exist_ok=True)
    expected = EXPECTED[agent]
    started = time.perf_counter()
    with progress_bar() as progress:
        bar = progress.add_task(f"{agent} trials", total=len(tasks))
        results = asyncio.run(
            run_trials(
                tasks,
                BUILTIN_AGENTS[agent],
                runtime,
                trials_dir,
                trial_config=TrialConfig(),
                config=SchedulerConfig(concurrency=concurrency, max_starting=max_starting),
                on_result=lambda _: progress.advance(bar),
            )
        )
    runtime.close()
    seconds = time.perf_counter() - started
    broken = [r for r in results if r.system_error or r.reward != expected]
    statuses = Counter(r.status for r in results)
    durations = [(r.finished_at - r.started_at).total_seconds() for r in results if r.finished_at]
    console.print(
        f"{len(results)} {agent} trials at concurrency {concurrency} in {seconds:.1f} s "
        f"({60 * len(results) / max(seconds, 1e-9):.0f} trials/min, "
        f"p50 trial {statistics.median(durations):.2f} s); statuses {dict(statuses)}"
    )
    if broken:
        table = Table(title=f"{len(broken)} broken task(s): expected reward {expected}")
        for column in ("task", "status", "reward", "reason"):
            table.add_column(column)
        for r in broken[:100]:
            table.add_row(r.task_name, r.status, str(r.reward), _reason(r, trials_dir))
        console.print(table)
    else:
        console.print(f"[green]every task scored {expected} with the {agent} agent[/]")
    console.print(f"trial directories in {trials_dir}")
    return 1 if broken else 0
