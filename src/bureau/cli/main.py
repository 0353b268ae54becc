"""The `bureau` command line: worlds, tasks and the demo.

Commands import their heavy modules inside the function body, so `bureau --help` stays instant
and later extras (torch, Ray, vLLM) are only loaded by the commands that need them.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bureau.cli.model import model_app

app = typer.Typer(
    help="bureau: simulated companies, Harbor tasks and RL post-training of knowledge agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
worlds_app = typer.Typer(help="Generate simulated companies and their tasks.", no_args_is_help=True)
tasks_app = typer.Typer(help="Validate and grade Harbor task datasets.", no_args_is_help=True)
app.add_typer(worlds_app, name="worlds")
app.add_typer(tasks_app, name="tasks")
app.add_typer(model_app, name="model")

# APEX-Agents scale: 1928 training tasks over 112 worlds, 480 eval tasks over 33 worlds.
SPLIT_DEFAULTS = {"train": (112, 1928), "eval": (33, 480)}


class Split(StrEnum):
    train = "train"
    eval = "eval"


class Difficulty(StrEnum):
    starter = "starter"
    standard = "standard"


class Answers(StrEnum):
    oracle = "oracle"
    empty = "empty"


@worlds_app.command("build")
def worlds_build(
    out: Annotated[Path, typer.Option(help="Dataset folder to create.")],
    split: Annotated[
        Split, typer.Option(help="train or eval; they never share a world.")
    ] = Split.train,
    worlds: Annotated[
        int | None, typer.Option(help="Number of worlds (default 112 train, 33 eval).")
    ] = None,
    tasks: Annotated[
        int | None, typer.Option(help="Total tasks over all worlds (default 1928 train, 480 eval).")
    ] = None,
    seed: Annotated[int, typer.Option(help="The output depends only on this seed.")] = 0,
    difficulty: Annotated[Difficulty, typer.Option(help="starter: 5-10 files, 1-2 tool calls.")] = (
        Difficulty.standard
    ),
    files: Annotated[
        int | None,
        typer.Option(
            help="Target files per world, 20-200 (starter 5-10), default about 40. "
            "A world always keeps its core documents (21-27).",
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 2,
    force: Annotated[bool, typer.Option(help="Replace a non-empty output folder.")] = False,
) -> None:
    """Build simulated companies in corporate law, consulting and banking, with their tasks."""
    from bureau.cli.commands import run_build

    default_worlds, default_tasks = SPLIT_DEFAULTS[split.value]
    code = run_build(
        split=split.value,
        worlds=default_worlds if worlds is None else worlds,
        tasks=default_tasks if tasks is None else tasks,
        seed=seed,
        out=out,
        difficulty=difficulty.value,
        files=files,
        jobs=jobs,
        force=force,
    )
    raise typer.Exit(code)


@tasks_app.command("validate")
def tasks_validate(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder or a single task folder.")],
    require_solution: Annotated[bool, typer.Option(help="Require solution/solve.sh.")] = True,
) -> None:
    """Check every task directory; report every problem, not just the first."""
    from bureau.cli.commands import run_validate

    raise typer.Exit(run_validate(dataset, require_solution))


@tasks_app.command("grade")
def tasks_grade(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder or a single task folder.")],
    answers: Annotated[Answers, typer.Option(help="oracle: run solutions; empty: no answer.")],
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 2,
    report: Annotated[Path | None, typer.Option(help="Write the results as JSON here.")] = None,
) -> None:
    """Grade oracle or empty answers in-process (no sandbox). Oracle must score 1.0, empty 0.0."""
    from bureau.cli.commands import run_grade

    raise typer.Exit(run_grade(dataset, answers.value, jobs, report))


class BuiltinAgent(StrEnum):
    oracle = "oracle"
    nop = "nop"


class Isolation(StrEnum):
    bwrap = "bwrap"
    none = "none"


@tasks_app.command("check")
def tasks_check(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder or a single task folder.")],
    agent: Annotated[BuiltinAgent, typer.Option(help="oracle must score 1.0, nop 0.0.")],
    concurrency: Annotated[int, typer.Option(help="Trials in flight at once.")] = 8,
    max_starting: Annotated[int, typer.Option(help="Sandboxes starting at the same moment.")] = 4,
    isolation: Annotated[
        Isolation, typer.Option(help="bwrap (bubblewrap sandbox) or none (UNSAFE: no isolation).")
    ] = Isolation.bwrap,
    trials_dir: Annotated[
        Path | None, typer.Option(help="Where trial directories go (default runs/check-...).")
    ] = None,
) -> None:
    """Run every task through a real sandbox with a built-in agent; list broken tasks."""
    from bureau.cli.check import run_check

    raise typer.Exit(
        run_check(dataset, agent.value, concurrency, isolation.value, trials_dir, max_starting)
    )


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Run folder.")] = Path("runs/demo"),
    seed: Annotated[int, typer.Option()] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 2,
) -> None:
    """Build a small train and eval set, grade oracle and empty answers, print a summary."""
    from bureau.cli.commands import run_demo

    raise typer.Exit(run_demo(out, seed, jobs))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
