"""The `bureau` command line: worlds, tasks and the demo.

Commands import their heavy modules inside the function body, so `bureau --help` stays instant
and later extras (torch, Ray, vLLM) are only loaded by the commands that need them.
"""

from __future__ import annotations

import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bureau.cli.analyze import analyze_command
from bureau.cli.audit import audit_app
from bureau.cli.eval import eval_command, preeval_command
from bureau.cli.model import model_app
from bureau.cli.options import SetOverrides
from bureau.cli.plan import plan_command
from bureau.cli.report import report_command
from bureau.cli.rl import train_command
from bureau.cli.serve import serve_command
from bureau.cli.sft import bootstrap_app, train_sft_command
from bureau.cli.train import train_offline_command

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
app.add_typer(audit_app, name="audit")
app.command("serve")(serve_command)
app.command("train-offline")(train_offline_command)
app.add_typer(bootstrap_app, name="bootstrap")
app.command("train-sft")(train_sft_command)
app.command("eval")(eval_command)
app.command("preeval")(preeval_command)
app.command("analyze")(analyze_command)
app.command("train")(train_command)
app.command("plan")(plan_command)
app.command("report")(report_command)

# APEX-Agents scale: 1928 training tasks over 112 worlds, 480 eval tasks over 33 worlds.
SPLIT_DEFAULTS = {"train": (112, 1928), "validation": (33, 480), "eval": (33, 480)}


class Split(StrEnum):
    train = "train"
    validation = "validation"
    eval = "eval"


class Difficulty(StrEnum):
    starter = "starter"
    standard = "standard"
    hard = "hard"


class Answers(StrEnum):
    oracle = "oracle"
    empty = "empty"


@worlds_app.command("build")
def worlds_build(
    out: Annotated[Path, typer.Option(help="Dataset folder to create.")],
    split: Annotated[
        Split,
        typer.Option(
            help="train, validation or eval: they never share a world, and no name or id of "
            "one is in another (each value's split is a hash of it)."
        ),
    ] = Split.train,
    worlds: Annotated[
        int | None,
        typer.Option(help="Number of worlds (default 112 train, 33 validation or eval)."),
    ] = None,
    tasks: Annotated[
        int | None,
        typer.Option(
            help="Total tasks over all worlds (default 1928 train, 480 validation or eval)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="The output depends only on this seed.")] = 0,
    difficulty: Annotated[
        Difficulty,
        typer.Option(
            help="starter: 5-10 files, the file named; standard: 150-250 files; hard: 500-700 "
            "files and 10,000+ chat messages (docs/worlds.md)."
        ),
    ] = (Difficulty.standard),
    files: Annotated[
        int | None,
        typer.Option(
            help="Target files per world, 20-250 (starter 5-10, hard 20-700), default by "
            "difficulty. "
            "A world always keeps its core documents and calendars (about 26-32).",
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 2,
    force: Annotated[bool, typer.Option(help="Replace a non-empty output folder.")] = False,
    judge_criteria: Annotated[
        bool,
        typer.Option(
            help="Add LLM-judge criteria to the deliverable tasks that offer them; grading "
            "them needs a judge (`tasks check --judge`), or --missing-judge skip."
        ),
    ] = False,
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
        judge_criteria=judge_criteria,
    )
    raise typer.Exit(code)


class MissingJudgeChoice(StrEnum):
    fail = "fail"
    skip = "skip"


class RuntimeChoice(StrEnum):
    local = "local"
    docker = "docker"


@tasks_app.command("validate")
def tasks_validate(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder or a single task folder.")],
    require_solution: Annotated[bool, typer.Option(help="Require solution/solve.sh.")] = True,
    runtime: Annotated[
        RuntimeChoice,
        typer.Option(
            help="local: also report what the bubblewrap runtime cannot run without an image "
            "build (RUN lines, other bases, multi-step tasks); docker: the format alone."
        ),
    ] = RuntimeChoice.local,
) -> None:
    """Check every task directory; report every problem, not just the first."""
    from bureau.cli.commands import run_validate

    raise typer.Exit(run_validate(dataset, require_solution, local=runtime is RuntimeChoice.local))


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


class OverlapLevel(StrEnum):
    exact = "exact"
    masked = "masked"
    near = "near"
    never = "never"


class NoveltyVocab(StrEnum):
    qwen3 = "qwen3"
    qwen3_6 = "qwen3.6"
    qwen3_demo = "qwen3-demo"
    none = "none"


@tasks_app.command("overlap")
def tasks_overlap(
    first: Annotated[Path, typer.Argument(help="The first dataset (the training set).")],
    second: Annotated[Path, typer.Argument(help="The second dataset (the evaluation set).")],
    threshold: Annotated[
        float, typer.Option(min=0.01, max=1.0, help="Word 3-gram Jaccard of a near duplicate.")
    ] = 0.8,
    fail_on: Annotated[
        OverlapLevel,
        typer.Option(help="Exit 1 if any task of SECOND overlaps FIRST at this level or closer."),
    ] = OverlapLevel.exact,
    report: Annotated[Path | None, typer.Option(help="Write the results as JSON here.")] = None,
    vocab: Annotated[
        NoveltyVocab,
        typer.Option(help="Tokenizer of the novel-token columns (none: leave them out)."),
    ] = NoveltyVocab.qwen3_demo,
    tokenizer_cache: Annotated[
        Path | None,
        typer.Option(help="Tokenizer cache folder (default ~/.cache/bureau/tokenizers)."),
    ] = None,
) -> None:
    """Instructions of SECOND that repeat FIRST's: exact, the same but for the worlds' own names,
    or near (3-gram Jaccard of the name-masked texts); per template, with examples. Then, per
    template, what SECOND's answers and programs copy (paths and values from the instruction,
    answer values from the files) that FIRST never shows, and the templates that copy nothing
    new (in-distribution, not transfer)."""
    from bureau.cli.commands import run_overlap

    level = None if fail_on is OverlapLevel.never else fail_on.value
    tokens = None if vocab is NoveltyVocab.none else vocab.value
    raise typer.Exit(run_overlap(first, second, threshold, level, report, tokens, tokenizer_cache))


@tasks_app.command("carve")
def tasks_carve(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder with its manifest.")],
    worlds: Annotated[int, typer.Option(min=1, help="How many worlds to move out.")],
    out: Annotated[Path, typer.Option(help="The validation dataset's folder (new or empty).")],
) -> None:
    """Move some worlds' tasks out of DATASET into a validation dataset of their own (the last
    worlds of each domain, the domains in turn), for choosing hyperparameters on worlds that
    are neither trained on nor the reported evaluation split."""
    from bureau.cli.commands import run_carve

    raise typer.Exit(run_carve(dataset, worlds, out))


class AgentChoice(StrEnum):
    oracle = "oracle"
    nop = "nop"
    harness = "harness"


class EngineChoice(StrEnum):
    builtin = "builtin"
    vllm = "vllm"
    url = "url"


class Isolation(StrEnum):
    bwrap = "bwrap"
    none = "none"


@tasks_app.command("check")
def tasks_check(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder or a single task folder.")],
    agent: Annotated[
        AgentChoice,
        typer.Option(help="oracle must score 1.0, nop 0.0; harness runs a model (--model)."),
    ],
    concurrency: Annotated[int, typer.Option(help="Trials in flight at once.")] = 8,
    max_starting: Annotated[int, typer.Option(help="Sandboxes starting at the same moment.")] = 4,
    isolation: Annotated[
        Isolation, typer.Option(help="bwrap (bubblewrap sandbox) or none (UNSAFE: no isolation).")
    ] = Isolation.bwrap,
    runtime: Annotated[
        RuntimeChoice,
        typer.Option(
            help="local (bubblewrap on this host, no image build) or docker (builds each "
            "task's image; needs a Docker engine). oracle and nop only."
        ),
    ] = RuntimeChoice.local,
    judge: Annotated[
        Path | None,
        typer.Option(
            help="A TOML file of judge settings (url, model, key_env or key_file, limits) for "
            "LLM-judge criteria; keys are read from the environment or key_file."
        ),
    ] = None,
    missing_judge: Annotated[
        MissingJudgeChoice,
        typer.Option(
            help="Judge criteria without --judge: fail (a judge_unavailable system error) or "
            "skip (grade the task on its other criteria)."
        ),
    ] = MissingJudgeChoice.fail,
    offline_public_tasks: Annotated[
        bool,
        typer.Option(
            help="Run tasks that ask for a network offline (sandboxes have none) instead of "
            "refusing them; each is reported."
        ),
    ] = False,
    trials_dir: Annotated[
        Path | None, typer.Option(help="Where trial directories go (default runs/check-...).")
    ] = None,
    model: Annotated[
        Path | None, typer.Option(help="harness: a local Hugging Face checkpoint folder.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="harness: run folder (trials/, trajectories.parquet, run.json)."),
    ] = None,
    engine: Annotated[
        EngineChoice,
        typer.Option(help="harness: builtin (bureau serve), vllm (.venv-vllm) or url."),
    ] = EngineChoice.builtin,
    engine_url: Annotated[
        list[str] | None,
        typer.Option(help="harness with --engine url: a running server; repeat for several."),
    ] = None,
    harness_config: Annotated[
        Path | None, typer.Option(help="harness: a TOML file of harness settings.")
    ] = None,
    set_: SetOverrides = None,
    max_turns: Annotated[int | None, typer.Option(help="harness: turn limit.")] = None,
    context_length: Annotated[int | None, typer.Option(help="harness: context, tokens.")] = None,
    max_tokens_per_turn: Annotated[int | None, typer.Option(help="harness: per turn.")] = None,
    temperature: Annotated[float | None, typer.Option(help="harness: sampling.")] = None,
    tool_prefix: Annotated[
        list[str] | None, typer.Option(help="harness: expose only tools with this prefix.")
    ] = None,
    max_tasks: Annotated[int | None, typer.Option(help="Check only the first N tasks.")] = None,
    attempts: Annotated[
        int, typer.Option(min=1, help="harness: trajectories per task (one group per task).")
    ] = 1,
    agent_timeout: Annotated[
        float | None, typer.Option(help="Cap on each agent's time, seconds.")
    ] = None,
) -> None:
    """Run every task through a real sandbox with an agent.

    With oracle or nop, list broken tasks. With harness, a model drives the tools; rewards and
    stop reasons are reported, and only system errors fail the command.
    """
    if agent is not AgentChoice.harness:
        from bureau.cli.check import run_check

        raise typer.Exit(
            run_check(
                dataset, agent.value, concurrency, isolation.value, trials_dir, max_starting,
                max_tasks=max_tasks, offline_public_tasks=offline_public_tasks,
                runtime_name=runtime.value, judge_config=judge,
                missing_judge=missing_judge.value,
            )
        )  # fmt: skip
    from bureau.cli.check import load_tasks, resolve_harness_config

    if model is None:
        raise typer.BadParameter("--agent harness needs --model DIR", param_hint="--model")
    if engine is EngineChoice.url and not engine_url:
        raise typer.BadParameter("--engine url needs --engine-url", param_hint="--engine-url")
    config = resolve_harness_config(
        harness_config,
        set_,
        max_turns=max_turns,
        context_length=context_length,
        max_tokens_per_turn=max_tokens_per_turn,
        temperature=temperature,
        tool_prefixes=tool_prefix,
    )
    tasks = load_tasks(dataset, max_tasks, offline_public_tasks=offline_public_tasks)
    from bureau.cli.harness_check import run_harness_check

    raise typer.Exit(
        run_harness_check(
            tasks,
            model=model,
            engine=engine.value,
            engine_urls=list(engine_url or []),
            out=out or Path("runs") / f"harness-{time.strftime('%Y%m%d-%H%M%S')}",
            harness=config,
            concurrency=concurrency,
            max_starting=max_starting,
            isolation=isolation.value,
            agent_timeout_s=agent_timeout,
            attempts=attempts,
        )
    )


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Run folder.")] = Path("runs/demo"),
    seed: Annotated[int, typer.Option()] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 2,
) -> None:
    """Build a small train and eval set, grade oracle and empty answers, print a summary."""
    from bureau.cli.demo import run_demo

    raise typer.Exit(run_demo(out, seed, jobs))


@app.command("demo-tune")
def demo_tune(
    out: Annotated[Path, typer.Option(help="Tuning folder.")] = Path("runs/demo-tune"),
    seed: Annotated[int, typer.Option(help="The tuning seed.")] = 0,
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            help="One candidate: space-separated KEY=VALUE overrides of configs/cpu-demo.toml "
            "(repeat the option for each; an empty string is the config as it is)."
        ),
    ] = None,
    reuse: Annotated[
        bool, typer.Option(help="Reuse the policy and validation split already in OUT/rl.")
    ] = False,
    size: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY=VALUE: one of the demo's sizes for the policy's preparation (a field of "
            "`DemoSizes`: sft_steps=200, layers=4, templates=a,b; repeat the option)."
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="Worker processes.")] = 2,
) -> None:
    """Choose the demo's RL settings on the validation split (worlds of its own, never eval's):
    the demo's policy, trained once per candidate, Pass@1 before and after on validation
    tasks (never on the eval split), the paired difference of each, the best one named."""
    from bureau.cli.demo_rl import DemoSizes
    from bureau.cli.demo_tune import tune_demo

    try:
        sizes = DemoSizes().replaced(size or [])
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--size") from None
    candidates = [c.split() for c in (candidate or [""])]
    result = tune_demo(out, seed=seed, jobs=jobs, candidates=candidates, reuse=reuse, sizes=sizes)
    raise typer.Exit(0 if result["chosen"] is not None else 1)


def main() -> None:
    """Run the CLI; bad input (a missing or malformed path, task, config or value) is one
    `error: ...` line and exit status 2, not a traceback (`BUREAU_DEBUG=1` shows it)."""
    from pydantic import ValidationError

    from bureau.config import ConfigError
    from bureau.tasks.errors import TaskFormatError, TaskFormatErrors

    bad_input = (TaskFormatErrors, TaskFormatError, ConfigError, ValidationError)
    try:
        app()
    except (*bad_input, FileNotFoundError, NotADirectoryError, IsADirectoryError) as error:
        if os.environ.get("BUREAU_DEBUG"):
            raise
        typer.echo(f"error: {error}", err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
