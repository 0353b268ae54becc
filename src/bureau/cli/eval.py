"""`bureau eval DATASET --model DIR`: Pass@1, mean reward and pass@k, with 95% intervals.

Settings come from the flags, the harness table of `--harness-config`, and `--set key=value`
overrides (applied last, e.g. `--set harness.max_turns=6`, `--set bootstrap_resamples=5000`);
every key of `bureau.evaluation.run.EvalConfig` can be set this way. The resolved config is
written into the run folder next to `eval.json`. The command line is parsed before the harness
(and torch) are imported, so `--help` is instant.
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bureau.cli.options import FaultsOption, SetOverrides, fault_overrides

if TYPE_CHECKING:
    from bureau.evaluation.report import (
        EvalReport,
        GroupReport,
        MeanEstimate,
        RateEstimate,
        ReportComparison,
    )
    from bureau.evaluation.run import EvalConfig, EvalRun


class EvalEngine(StrEnum):
    builtin = "builtin"
    vllm = "vllm"
    url = "url"


class EvalIsolation(StrEnum):
    bwrap = "bwrap"
    none = "none"


# Options `bureau eval` and `bureau preeval` share.
EngineOption = Annotated[
    EvalEngine | None,
    typer.Option(help="builtin (bureau serve), vllm (.venv-vllm) or url (default builtin)."),
]
EngineUrlOption = Annotated[
    list[str] | None, typer.Option(help="With --engine url: a running server; repeatable.")
]
MaxTasksOption = Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")]
HarnessConfigOption = Annotated[
    Path | None,
    typer.Option(help="A TOML file of harness settings (max_turns, temperature, ...)."),
]


def eval_command(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder or a single task folder.")],
    model: Annotated[Path, typer.Option(help="A local Hugging Face checkpoint folder.")],
    attempts: Annotated[
        int | None, typer.Option(min=1, help="Attempts per task, k of pass@k (default 1).")
    ] = None,
    engine: EngineOption = None,
    engine_url: EngineUrlOption = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/eval-<time>).")] = None,
    max_tasks: MaxTasksOption = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Trials in flight.")] = None,
    isolation: Annotated[
        EvalIsolation | None, typer.Option(help="bwrap (default) or none (UNSAFE).")
    ] = None,
    harness_config: HarnessConfigOption = None,
    faults: FaultsOption = None,
    set_: SetOverrides = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Bootstrap seed; also seeds each attempt's sampling (distinct seeds)."),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="An earlier eval.json (or its run folder) on the same tasks: report the paired "
            "per-task difference to it (comparison.json)."
        ),
    ] = None,
) -> None:
    """Evaluate a model on a dataset: k attempts per task, in sandboxes, graded by the rubrics.

    Reports Pass@1 (every criterion passed) and mean reward, overall, per domain and per
    template, with 95% intervals that resample tasks, and pass@k for k > 1. System errors of the
    machinery are counted apart and left out of the rates; failures of the agent are graded
    zeros. With --baseline, also the paired per-task difference to an earlier eval. Exits 1 when
    nothing was graded.
    """
    from bureau.cli.commands import console

    flags: dict[str, Any] = {
        "attempts": attempts,
        "engine": engine.value if engine else None,
        "engine_urls": engine_url,
        "max_tasks": max_tasks,
        "concurrency": concurrency,
        "isolation": isolation.value if isolation else None,
        "seed": seed,
    }
    config = eval_config(flags, harness_config, [*fault_overrides(faults), *(set_ or [])])
    before = _baseline(baseline) if baseline is not None else None
    out = out or Path("runs") / f"eval-{time.strftime('%Y%m%d-%H%M%S')}"
    run = run_with_progress(dataset, model, config, out, "eval trials")
    print_report(run.report)
    print_skipped_judge_criteria(run.judge_criteria_skipped)
    console.print(f"{run.out / 'eval.json'} written in {run.wall_time_s:.1f} s")
    if before is not None:
        import json

        from bureau.evaluation.report import compare_reports

        compared = compare_reports(
            run.report, before, seed=run.report.seed, resamples=run.report.resamples
        )
        print_comparison(compared, f"this eval minus {baseline}")
        path = run.out / "comparison.json"
        document = {"baseline": str(baseline), **compared.model_dump(mode="json")}
        path.write_text(json.dumps(document, indent=2) + "\n")
        console.print(f"{path} written")
    raise typer.Exit(0 if run.report.overall.graded else 1)


def print_skipped_judge_criteria(skipped: dict[str, dict[str, int]]) -> None:
    """Say which judge criteria the rewards above were graded without, per task."""
    if not skipped:
        return
    from bureau.cli.commands import console

    criteria = sum(len(ids) for ids in skipped.values())
    console.print(
        f"[yellow]judge criteria skipped (no judge):[/] {criteria} criteria of {len(skipped)} "
        "task(s); their rewards and Pass@1 are on the other criteria only"
    )
    for task, ids in sorted(skipped.items()):
        listed = ", ".join(f"{c} ({n} trial{'s' if n != 1 else ''})" for c, n in ids.items())
        console.print(f"  {task}: {listed}", markup=False, highlight=False)


def _baseline(path: Path) -> EvalReport:
    """The baseline's report, read before the run so a wrong path costs nothing."""
    from bureau.cli.commands import console
    from bureau.evaluation.run import read_eval_report

    try:
        return read_eval_report(path)
    except ValueError as exc:
        console.print(f"error: --baseline: {exc}", markup=False)
        raise typer.Exit(2) from exc


def print_comparison(compared: ReportComparison, title: str) -> None:
    """The paired differences, overall, per domain and per template, as a table."""
    from rich.table import Table

    from bureau.cli.commands import console

    table = Table(title=f"{title}: paired per task, 95% intervals over tasks")
    for column in ("", "tasks", "Pass@1 before", "Pass@1 after", "difference", "interval"):
        # Template names whole: the figures wrap on a narrow terminal instead.
        table.add_column(column, justify="left" if not column else "right", no_wrap=not column)
    groups = [("overall", compared.overall), *compared.kinds.items(), *compared.domains.items()]
    groups += list(compared.templates.items())
    for name, group in groups:
        found = group.pass_at_1
        if found is None:
            continue
        mark = " *" if found.excludes_zero else ""
        table.add_row(
            name,
            str(found.tasks),
            f"{found.before:.3f}",
            f"{found.after:.3f}",
            f"{found.difference:+.3f}{mark}",
            f"[{found.low:+.3f}, {found.high:+.3f}]",
        )
    console.print(table)
    console.print("* the interval excludes 0", highlight=False)
    if compared.tasks_only_before or compared.tasks_only_after:
        console.print(
            f"[yellow]not paired:[/] {compared.tasks_only_before} task(s) only in the baseline, "
            f"{compared.tasks_only_after} only in this eval"
        )


def eval_config(
    flags: dict[str, Any], harness_config: Path | None, overrides: list[str] | None
) -> EvalConfig:
    """The run's settings: the harness table of the TOML file, the flags given, then the
    `--set` overrides; a bad one is an `error:` line and exit 2."""
    from bureau.cli.commands import console
    from bureau.config import ConfigError, apply_overrides, read_toml, validate_config
    from bureau.evaluation.run import EvalConfig

    try:
        tree: dict[str, Any] = {"harness": read_toml(harness_config)} if harness_config else {}
        tree.update({key: value for key, value in flags.items() if value is not None})
        source = str(harness_config) if harness_config else "eval settings"
        config = validate_config(EvalConfig, apply_overrides(tree, overrides or []), source)
    except ConfigError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    if config.engine == "url" and not config.engine_urls:
        raise typer.BadParameter("--engine url needs --engine-url", param_hint="--engine-url")
    return config


def run_with_progress(
    dataset: Path, model: Path, config: EvalConfig, out: Path, label: str
) -> EvalRun:
    """Every task of `dataset` (`config.attempts` each) through the harness, with a bar."""
    from bureau.cli.commands import console, progress_bar
    from bureau.evaluation.run import load_eval_tasks, run_eval
    from bureau.tasks.errors import TaskFormatErrors

    if not (model / "config.json").is_file():
        got = "a folder without config.json" if model.is_dir() else "no such folder"
        console.print(
            f"error: {model}: expected a checkpoint folder (config.json), got {got}", markup=False
        )
        raise typer.Exit(2)
    try:
        tasks = load_eval_tasks(dataset, config.max_tasks)
    except TaskFormatErrors as exc:
        for error in exc.errors:
            console.print(f"[red]error:[/] {error}")
        raise typer.Exit(2) from exc
    with progress_bar() as progress:
        bar = progress.add_task(label, total=len(tasks) * config.attempts)
        return run_eval(dataset, tasks, model, config, out, on_result=lambda: progress.advance(bar))


def preeval_command(
    dataset: Annotated[Path, typer.Argument(help="The training dataset (or one task folder).")],
    model: Annotated[Path, typer.Option(help="The untrained policy: a checkpoint folder.")],
    concurrency: Annotated[
        int, typer.Option(min=1, help="Trials in flight: the training run's concurrency.")
    ] = 8,
    max_system_error_rate: Annotated[
        float,
        typer.Option(min=0, max=1, help="The gate: system errors at most this share of trials."),
    ] = 0.005,
    engine: EngineOption = None,
    engine_url: EngineUrlOption = None,
    out: Annotated[
        Path | None, typer.Option(help="Run folder (default runs/preeval-<time>).")
    ] = None,
    max_tasks: MaxTasksOption = None,
    harness_config: HarnessConfigOption = None,
    faults: FaultsOption = None,
    set_: SetOverrides = None,
) -> None:
    """Run a policy over a whole dataset at training concurrency and classify every trial.

    Completed (with reward), model failures (graded 0s) and system errors by kind, with rates
    and example trial folders, go to the terminal and preeval.json. Exits 1 when the share of
    system errors is above --max-system-error-rate: fix the machinery before training.
    """
    from bureau.cli.commands import console
    from bureau.evaluation.preeval import summarize_preeval

    flags: dict[str, Any] = {
        "concurrency": concurrency,
        "engine": engine.value if engine else None,
        "engine_urls": engine_url,
        "max_tasks": max_tasks,
    }
    config = eval_config(flags, harness_config, [*fault_overrides(faults), *(set_ or [])])
    out = out or Path("runs") / f"preeval-{time.strftime('%Y%m%d-%H%M%S')}"
    run = run_with_progress(dataset, model, config, out, "pre-evaluation trials")
    found, path, passed = summarize_preeval(out, max_system_error_rate)
    print_taxonomy(found, max_system_error_rate)
    console.print(f"{path} written in {run.wall_time_s:.1f} s")
    raise typer.Exit(0 if passed else 1)


def print_taxonomy(found: dict[str, Any], max_rate: float) -> None:
    from rich.table import Table

    from bureau.cli.commands import console

    table = Table(title=f"pre-evaluation: {found['trials']} trials")
    for column in ("outcome", "count", "rate", "examples"):
        table.add_column(column)
    total = max(found["trials"], 1)
    done = found["completed"]
    table.add_row(
        f"completed (mean reward {done['mean_reward']})", str(done["count"]),
        f"{done['count'] / total:.1%}", "",
    )  # fmt: skip
    for kind, count in found["model_failures"].items():
        table.add_row(f"model: {kind}", str(count), f"{count / total:.1%}", "")
    for kind, row in found["system_errors"].items():
        table.add_row(
            f"system: {kind}", str(row["count"]), f"{row['rate']:.1%}", ", ".join(row["examples"])
        )
    console.print(table)
    rate = found["system_error_rate"]
    verdict = "[green]passes[/]" if rate <= max_rate and found["trials"] else "[red]fails[/]"
    console.print(f"system errors {rate:.2%} of trials; the gate ({max_rate:.2%}) {verdict}")


def print_report(report: EvalReport) -> None:
    """The overall and per-domain figures as a table, then the exclusions."""
    from rich.table import Table

    from bureau.cli.commands import console

    levels = [k for k in report.overall.pass_at_k if k != "1"]
    table = Table(
        title=f"eval: {len(report.tasks)} tasks, k = {report.k}, 95% intervals over tasks"
    )
    headers = ["tasks", "graded", "excluded", "Pass@1", "mean reward"]
    headers += [f"pass@{level}" for level in levels]
    # Template names and headers whole: the intervals wrap on a narrow terminal instead.
    table.add_column("", no_wrap=True)
    for column in headers:
        # "[0.000," and "0.000]": an interval wraps at its space, never truncated.
        width = max(*(len(word) for word in column.split()), 7 if column in headers[3:] else 0)
        table.add_column(column, justify="right", min_width=width, overflow="fold")
    groups = [("overall", report.overall), *report.kinds.items(), *report.domains.items()]
    groups += list(report.templates.items())
    for name, group in groups:
        table.add_row(
            name,
            str(group.tasks),
            str(group.graded),
            str(group.excluded),
            _rate(group.pass_at_1),
            _mean(group.mean_reward),
            *(_mean(group.pass_at_k[level]) for level in levels),
        )
    console.print(table)
    _print_exclusions(report, report.overall)


def _print_exclusions(report: EvalReport, overall: GroupReport) -> None:
    from bureau.cli.commands import console

    if overall.agent_failures:
        console.print(f"agent failures (graded 0): {overall.agent_failures}")
    if not overall.system_errors:
        console.print("[green]no system errors[/]")
        return
    console.print(
        f"[red]{overall.excluded} attempt(s) excluded for system errors[/]: "
        f"{overall.system_errors}; Pass@1 counting them as failures "
        f"{_rate(overall.pass_at_1_excluded_as_failed)}"
    )
    if report.tasks_all_excluded:
        console.print(
            f"[red]{len(report.tasks_all_excluded)} task(s) with every attempt excluded[/]: "
            + ", ".join(report.tasks_all_excluded[:10])
        )


def _rate(rate: RateEstimate) -> str:
    if rate.rate is None:
        return "-"
    return f"{rate.rate:.3f} [{rate.low:.3f}, {rate.high:.3f}]"


def _mean(mean: MeanEstimate) -> str:
    if mean.mean is None or mean.low is None or mean.high is None:
        return "-"
    return f"{mean.mean:.3f} [{mean.low:.3f}, {mean.high:.3f}]"
