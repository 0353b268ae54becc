"""Bodies of the CLI commands, with rich progress bars and summary tables."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from bureau.checks.offline import AnswerMode, CheckSummary, check_tasks, summarize
from bureau.cli.common import console, progress_bar, task_dirs
from bureau.tasks.dataset import validate_dataset
from bureau.tasks.errors import TaskFormatError, TaskFormatErrors
from bureau.worlds.builder import BuildConfig, WorldResult, build_split

if TYPE_CHECKING:
    from bureau.checks.novelty import Encoder, NoveltyReport, TemplateNovelty


def build(cfg: BuildConfig) -> dict[str, Any]:
    with progress_bar() as progress:
        bar = progress.add_task(f"building {cfg.split} worlds", total=cfg.worlds)

        def on_world(result: WorldResult) -> None:
            progress.advance(bar)

        return build_split(cfg, on_world)


def run_build(
    *,
    split: str,
    worlds: int,
    tasks: int,
    seed: int,
    out: Path,
    difficulty: str,
    files: int | None,
    jobs: int,
    force: bool,
    judge_criteria: bool = False,
) -> int:
    try:
        cfg = BuildConfig(
            split=split,
            worlds=worlds,
            tasks=tasks,
            seed=seed,
            out=out,
            difficulty=difficulty,  # type: ignore[arg-type]  # validated by the CLI enum
            files_per_world=files,
            jobs=jobs,
            force=force,
            judge_criteria=judge_criteria,
        )
        report = build(cfg)
    except (ValueError, FileExistsError) as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    print_build_report(report)
    console.print(f"dataset written to [bold]{out}[/] (manifest bureau-dataset.json)")
    return 0


def print_build_report(report: dict[str, Any]) -> None:
    table = Table(title=f"{report['split']} split ({report['difficulty']})", show_header=False)
    rate = report["naive_pdf_failure_rate"]
    rows = [
        ("worlds", f"{report['worlds']} {report['worlds_by_domain']}"),
        ("tasks", str(report["tasks"])),
        ("files", str(report["files"])),
        ("files per world", _spread(report["files_per_world"])),
        ("messages per world (mail + chat)", _spread(report["messages_per_world"])),
        ("scanned PDFs", str(report["scanned_pdfs"])),
        ("templates used per domain", str(report["templates_used"])),
        ("templates available", str(report["templates_available"])),
        ("tasks by kind", str(report["tasks_by_kind"])),
        ("criteria per task (mean)", f"{report['avg_criteria']:.2f}"),
        ("tasks with file deliverables", f"{report['deliverable_fraction']:.1%}"),
        (
            "tasks of held-out kinds",
            f"{report['held_out_kind_fraction']:.1%} (no training split has them)",
        ),
        (
            "naive PDF extraction wrong",
            "n/a"
            if rate is None
            else f"{rate:.1%} of {report['pdf_layout_tasks']} PDF tasks "
            + _by_layout(report["naive_pdf_failure_rate_by_layout"]),
        ),
        ("build time", f"{report['seconds']:.1f} s"),
        ("disk", f"{report['disk_bytes'] / 2**20:.1f} MiB (hard links counted once)"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def _spread(spread: dict[str, float]) -> str:
    return f"mean {spread['mean']:g}, min {spread['min']:g}, max {spread['max']:g}"


def _by_layout(rates: dict[str, float | None]) -> str:
    parts = [f"{layout} {rate:.0%}" for layout, rate in rates.items() if rate is not None]
    return f"({', '.join(parts)})" if parts else ""


def run_validate(root: Path, require_solution: bool, *, local: bool = True) -> int:
    """Format errors of a task or dataset; with `local`, also what the local runtime cannot
    run (errors) and what it would ignore or run offline (notes)."""
    if not root.is_dir():
        raise TaskFormatErrors(
            [TaskFormatError(root, "a dataset or task directory", got="no such directory")]
        )
    if (root / "task.toml").exists():
        from bureau.tasks.taskdir import validate_task_dir

        problems: list[object] = list(validate_task_dir(root, require_solution=require_solution))
        if not problems and local:
            problems += _local_report(root)
        for p in problems:
            console.print(f"[red]error[/] {escape(str(p))}")
        console.print(f"{root.name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    report = validate_dataset(root, require_solution=require_solution)
    console.print(report.summary())
    local_problems = 0
    if report.ok and local:
        for task_dir in task_dirs(root):
            for problem in _local_report(task_dir):
                console.print(f"[red]error[/] {escape(problem)}")
                local_problems += 1
    return 0 if report.ok and not local_problems else 1


def _local_report(task_dir: Path) -> list[str]:
    """Print notes for what the local runtime ignores; return what it cannot run."""
    from bureau.tasks.support import ignored_settings, network_request
    from bureau.tasks.taskdir import load_task_dir

    task = load_task_dir(task_dir)
    for line in ignored_settings(task):
        console.print(f"[yellow]note[/] {escape(line)}")
    if network := network_request(task):
        console.print(
            f"[yellow]note[/] {escape(str(task.config_path))}: asks for a network "
            f"({escape(network)}); the local runtime refuses it unless told to run it offline"
        )
    return [f"{problem} (local runtime)" for problem in task.local_problems]


def grade(root: Path, mode: AnswerMode, jobs: int) -> CheckSummary:
    dirs = task_dirs(root)
    started = time.perf_counter()
    with progress_bar() as progress:
        bar = progress.add_task(f"grading {mode} answers", total=len(dirs))
        outcomes = check_tasks(dirs, mode, jobs=jobs, on_result=lambda _: progress.advance(bar))
    return summarize(mode, outcomes, time.perf_counter() - started)


def print_grade_summary(name: str, summary: CheckSummary) -> None:
    expected = "1.0" if summary.mode == "oracle" else "0.0"
    style = "green" if summary.ok else "red"
    console.print(
        f"[{style}]{name}: {summary.mode} answers scored {expected} on "
        f"{summary.as_expected}/{summary.tasks} tasks[/] (mean reward {summary.mean_reward:.3f}, "
        f"pass rate {summary.pass_rate:.1%}, {summary.seconds:.1f} s)"
    )
    bad = summary.broken + summary.wrong
    if not bad:
        return
    table = Table(title="tasks that did not behave as expected")
    table.add_column("task")
    table.add_column("reward")
    table.add_column("reason")
    for o in bad[:50]:
        reason = o.error or "; ".join(o.failed_criteria)
        table.add_row(o.task_id, "broken" if o.error else f"{o.reward:.2f}", reason[:160])
    console.print(table)
    if len(bad) > 50:
        console.print(f"... and {len(bad) - 50} more (see --report)")


def run_overlap(
    first: Path,
    second: Path,
    threshold: float,
    fail_on: str | None,
    report: Path | None,
    vocab: str | None = "qwen3-demo",
    tokenizer_cache: Path | None = None,
) -> int:
    """`bureau tasks overlap`: the overlap table and its examples, then the copy-novelty table
    (token columns with `vocab`'s tokenizer, none without); exit 1 at the `fail_on` level."""
    from bureau.checks.novelty import find_novelty, spans_of
    from bureau.checks.overlap import find_overlap, instruction_of, load_tasks

    try:
        tasks_a, tasks_b = load_tasks(first), load_tasks(second)
    except TaskFormatErrors as exc:
        for error in exc.errors:
            console.print(f"[red]error:[/] {error}")
        return 2
    a = [instruction_of(task, names) for task, names in tasks_a]
    b = [instruction_of(task, names) for task, names in tasks_b]
    labels = {"first_label": str(first), "second_label": str(second)}
    found = find_overlap(a, b, threshold=threshold, **labels)
    table = Table(title=f"{second} against {first}: {len(b)} tasks against {len(a)}")
    for column in ("template", "tasks", "exact", "same but for names", f"near (>= {threshold})"):
        table.add_column(column, justify="left" if column == "template" else "right")
    for name, row in sorted(found.templates.items()):
        table.add_row(name, str(row.tasks), str(row.exact), str(row.masked), str(row.near))
    table.add_row(
        "all", str(len(b)), str(len(found.exact)), str(len(found.masked)), str(len(found.near))
    )
    console.print(table)
    for label, pairs in (("exact", found.exact), ("same but for names", found.masked)):
        for pair in pairs[:5]:
            console.print(f"  {label}: {pair.task} = {pair.other}", highlight=False)
    tokenizer = _overlap_tokenizer(vocab, tokenizer_cache)
    novelty = find_novelty(
        [spans_of(task) for task, _ in tasks_a],
        [spans_of(task) for task, _ in tasks_b],
        tokenizer,
    )
    print_novelty(novelty, vocab if tokenizer is not None else None)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        found_dict = {**found.to_dict(), "novelty": {"vocab": vocab, **novelty.to_dict()}}
        report.write_text(json.dumps(found_dict, indent=2) + "\n", encoding="utf-8")
    counts = {"exact": len(found.exact), "masked": len(found.masked), "near": len(found.near)}
    return 1 if fail_on is not None and counts[fail_on] else 0


def _overlap_tokenizer(vocab: str | None, cache_dir: Path | None) -> Encoder | None:
    """`vocab`'s tokenizer (built once, then loaded from `cache_dir`), or None for no token
    columns."""
    if vocab is None:
        return None
    from bureau.models.tokenizer import VOCABS, Vocab, build_tokenizer

    known: dict[str, Vocab] = {v: v for v in VOCABS}
    if vocab not in known:
        raise ValueError(f"unknown vocabulary {vocab!r}; expected one of {VOCABS}")
    return build_tokenizer(known[vocab], cache_dir)


def print_novelty(novelty: NoveltyReport, vocab: str | None) -> None:
    """Per template: what the held-out tasks copy, how much of it training never showed, and
    the templates whose held-out tasks copy nothing new (in-distribution, not transfer)."""

    def percent(row: TemplateNovelty, measure: str) -> str:
        share = row.share(measure)
        return "-" if share is None else f"{100 * share:.1f}%"

    tokens = f" ({vocab})" if vocab else " (no vocabulary)"
    table = Table(
        title=f"what the {novelty.held_out_tasks} held-out tasks copy that the "
        f"{novelty.train_tasks} training tasks never show"
    )
    columns = (
        "template", "tasks", "spans (prompt / files / answer)", "novel spans",
        "tasks with a new span to copy", f"novel tokens{tokens}", "novel bigrams",
        "copies nothing new",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "template" else "right")
    rows = [*sorted(novelty.templates.items()), ("all", novelty.overall)]
    for name, row in rows:
        table.add_row(
            name,
            str(row.tasks),
            f"{row.instruction_spans} / {row.files_spans} / {row.answer_spans}",
            percent(row, "spans"),
            percent(row, "tasks"),
            percent(row, "tokens"),
            percent(row, "bigrams"),
            "yes" if row.needs_nothing_new else "",
        )
    console.print(table)
    for name, row in sorted(novelty.templates.items()):
        if row.examples:
            shown = ", ".join(row.examples[:3])
            console.print(f"  novel in {name}: {escape(shown)}", highlight=False)


def run_carve(dataset: Path, worlds: int, out: Path) -> int:
    """`bureau tasks carve`: the worlds moved, or the error naming the file."""
    from bureau.tasks.carve import carve_validation

    try:
        carved = carve_validation(dataset, worlds, out)
    except TaskFormatErrors as exc:
        for error in exc.errors:
            console.print(f"[red]error:[/] {error}")
        return 2
    console.print(
        f"{out}: {carved.tasks} tasks of {len(carved.worlds)} worlds "
        f"({', '.join(carved.worlds)}); {carved.left} tasks left in {dataset}; "
        f"{carved.duplicates} deleted (their instruction is a training one)",
        highlight=False,
    )
    return 0


def run_grade(root: Path, mode: str, jobs: int, report: Path | None) -> int:
    try:
        summary = grade(root, mode, jobs)  # type: ignore[arg-type]  # validated by the CLI enum
    except TaskFormatErrors as exc:
        for error in exc.errors:
            console.print(f"[red]error:[/] {error}")
        return 2
    print_grade_summary(root.name, summary)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(summary.to_dict(), indent=2) + "\n", encoding="utf-8")
    return 0 if summary.ok else 1
