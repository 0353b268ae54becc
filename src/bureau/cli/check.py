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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from bureau.cli.common import console, progress_bar, task_dirs
from bureau.errors import BureauSystemError
from bureau.tasks.errors import TaskFormatErrors
from bureau.tasks.support import (
    NETWORK_ADVICE,
    ignored_settings,
    network_request,
    runner_problems,
)
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import BUILTIN_AGENTS
from bureau.trials.result import TrialResult
from bureau.trials.retry import RetryPolicy
from bureau.trials.scheduler import SchedulerConfig, run_trials
from bureau.trials.trial import TrialConfig

if TYPE_CHECKING:  # the harness needs the `models` extra; oracle and nop checks do not
    from bureau.harness.loop import HarnessConfig
    from bureau.judge import JudgeClient, JudgeConfig

EXPECTED = {"oracle": 1.0, "nop": 0.0}


def _reason(result: TrialResult, trials_dir: Path) -> str:
    if result.exception_info is not None:
        return f"{result.status}: {result.exception_info.exception_message}"
    grading = trials_dir / result.trial_name / "verifier" / "grading.json"
    if grading.exists():
        data = json.loads(grading.read_text())
        failed = [c for c in data.get("results", []) if not c.get("passed")]
        return "; ".join(f"{c.get('id')}: {c.get('reason')}" for c in failed)[:300]
    # A task with its own verifier (a plain reward.txt): the end of what test.sh printed.
    output = trials_dir / result.trial_name / "verifier" / "test-stdout.txt"
    tail = " ".join(output.read_text(errors="replace").split()[-30:]) if output.exists() else ""
    return f"reward {result.reward}" + (f"; test.sh printed: ...{tail[-200:]}" if tail else "")


def load_judge_config(path: Path | None) -> JudgeConfig | None:
    """The judge's settings from a TOML file (`bureau.judge.JudgeConfig`), or None."""
    if path is None:
        return None
    from bureau.cli.options import load_or_exit
    from bureau.judge import JudgeConfig

    return load_or_exit(JudgeConfig, path, [], lambda s: console.print(s, markup=False))


@asynccontextmanager
async def open_judge(settings: JudgeConfig | None) -> AsyncIterator[JudgeClient | None]:
    """A judge client for the run (one for every trial, so its rate limits hold), or None."""
    if settings is None:
        yield None
        return
    from bureau.judge import JudgeClient

    try:
        client = JudgeClient(settings)
    except ValueError as exc:  # no key
        console.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    async with client:
        yield client


def load_tasks(
    root: Path, max_tasks: int | None = None, *, offline_public_tasks: bool | None = None
) -> list[TaskDir]:
    """The tasks under `root` (the first `max_tasks`); exits 2 listing every malformed one.

    With `offline_public_tasks` given, the tasks are also screened for the local runtime and
    the model harness (`screen_tasks`; the harness runs multi-step tasks): what it cannot run
    is listed and left out, what it ignores is noted.
    """
    dirs = task_dirs(root)[:max_tasks] if max_tasks is not None else task_dirs(root)
    try:
        tasks = [load_task_dir(d) for d in dirs]
    except TaskFormatErrors as exc:
        for error in exc.errors:
            console.print(f"[red]error:[/] {error}")
        raise typer.Exit(2) from exc
    if offline_public_tasks is None:
        return tasks
    runnable, refused = screen_tasks(
        tasks, offline_public_tasks=offline_public_tasks, agent_runs_steps=True
    )
    if refused:
        console.print(f"[red]{len(refused)} task(s) the local runtime cannot run:[/]")
        for task, reasons in refused:
            for reason in reasons:
                console.print(f"[red]error:[/] {escape(f'{task.name}: {reason}')}")
    if not runnable:
        raise typer.Exit(2)
    return runnable


def screen_tasks(
    tasks: list[TaskDir],
    *,
    offline_public_tasks: bool,
    runtime: str = "local",
    agent_runs_steps: bool = False,
) -> tuple[list[TaskDir], list[tuple[TaskDir, list[str]]]]:
    """Split tasks into those the runtime can run and those it cannot (with reasons); print a
    note for every setting it will ignore and every task it runs offline. The docker runtime
    builds images, so only the local runtime refuses what needs a build."""
    runnable: list[TaskDir] = []
    refused: list[tuple[TaskDir, list[str]]] = []
    for task in tasks:
        reasons = [
            str(problem) for problem in runner_problems(task, agent_runs_steps=agent_runs_steps)
        ]
        if runtime == "local":
            reasons += [str(problem) for problem in task.local_problems]
        network = network_request(task)
        if network and not offline_public_tasks:
            reasons.append(f"{task.config_path}: asks for a network ({network}); {NETWORK_ADVICE}")
        if reasons:
            refused.append((task, reasons))
            continue
        for line in ignored_settings(task):
            console.print(f"[yellow]note:[/] {escape(line)}")
        if network:
            console.print(
                f"[yellow]note:[/] {escape(task.name)}: runs offline although it asks for a "
                f"network ({escape(network)})"
            )
        runnable.append(task)
    return runnable, refused


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
    offline_public_tasks: bool = False,
    runtime_name: str = "local",
    judge_config: Path | None = None,
    missing_judge: str = "fail",
) -> int:
    from bureau.sandbox import get_runtime

    all_tasks = load_tasks(root, max_tasks)
    tasks, refused = screen_tasks(
        all_tasks,
        offline_public_tasks=offline_public_tasks,
        runtime=runtime_name,
        agent_runs_steps=BUILTIN_AGENTS[agent].supports_steps,
    )
    for task, reasons in refused:
        for reason in reasons:
            console.print(f"[red]error:[/] {escape(f'{task.name}: {reason}')}")
    if not tasks:
        console.print(f"[red]none of the {len(all_tasks)} task(s) can run here[/]")
        return 1
    try:
        runtime = get_runtime(runtime_name, isolation=isolation)
    except BureauSystemError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    console.print(f"sandboxes: {runtime.enforcement}")
    trials_dir = trials_dir or Path("runs") / f"check-{agent}-{time.strftime('%Y%m%d-%H%M%S')}"
    trials_dir.mkdir(parents=True, exist_ok=True)
    expected = EXPECTED[agent]
    started = time.perf_counter()
    with progress_bar() as progress:
        bar = progress.add_task(f"{agent} trials", total=len(tasks))
        judge_settings = load_judge_config(judge_config)

        async def run_all() -> list[TrialResult]:
            async with open_judge(judge_settings) as judge:
                return await run_trials(
                    tasks,
                    BUILTIN_AGENTS[agent],
                    runtime,
                    trials_dir,
                    trial_config=TrialConfig(missing_judge=missing_judge),  # type: ignore[arg-type]
                    config=SchedulerConfig(concurrency=concurrency, max_starting=max_starting),
                    on_result=lambda _: progress.advance(bar),
                    judge=judge,
                    retry=RetryPolicy(),
                )

        results = asyncio.run(run_all())
    runtime.close()
    seconds = time.perf_counter() - started
    broken = [r for r in results if r.system_error or r.reward != expected]
    if refused:
        console.print(f"[red]{len(refused)} task(s) not run: the local runtime cannot run them[/]")
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
    from bureau.cli.eval import print_skipped_judge_criteria
    from bureau.trials.judging import skipped_judge_criteria

    print_skipped_judge_criteria(skipped_judge_criteria(trials_dir))
    console.print(f"trial directories in {trials_dir}")
    return 1 if broken or refused else 0
