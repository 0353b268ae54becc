"""`bureau bootstrap pretrain|record|subset` and `bureau train-sft`: the base policy before RL.

`bootstrap pretrain` teaches a random tiny model to copy an id from its context on synthetic
text; `bootstrap record` runs the scripted teacher over a starter dataset through real trials and
writes its trajectories; `train-sft` fine-tunes a checkpoint on them through the trainer with
the `sft` loss; `bootstrap subset` makes a dataset folder of only some templates (links to the
task folders), so a model trained on those templates is evaluated on the same mix. Settings
come from an optional TOML file (`bureau.bootstrap.config`), then the flags, then `--set`; the
resolved config goes into the run folder. The command line is parsed before torch is imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bureau.cli.options import (
    FaultsOption,
    SetOverrides,
    fault_overrides,
    flag_overrides,
    load_or_exit,
)

bootstrap_app = typer.Typer(
    help="Scripted-teacher demonstrations for a base policy.", no_args_is_help=True
)

Templates = Annotated[
    list[str] | None,
    typer.Option("--template", help="Only tasks of this template (repeatable)."),
]


@bootstrap_app.command("record")
def record_command(
    dataset: Annotated[Path, typer.Argument(help="A starter dataset folder.")],
    model: Annotated[Path, typer.Option(help="Checkpoint whose tokenizer renders the records.")],
    out: Annotated[Path, typer.Option(help="Run folder (trials/, trajectories.parquet).")],
    attempts: Annotated[int | None, typer.Option(min=1, help="Trajectories per task.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seeds the mistakes.")] = None,
    template: Templates = None,
    max_tasks: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")] = None,
    no_mistakes: Annotated[bool, typer.Option(help="Every mistake rate 0.")] = False,
    isolation: Annotated[
        str | None, typer.Option(help="bwrap (default) or none (UNSAFE: no sandbox).")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file of settings.")] = None,
    faults: FaultsOption = None,
    set_: SetOverrides = None,
) -> None:
    """Record the scripted teacher on a starter dataset, through the real harness and tools."""
    flags: dict[str, object] = {
        "dataset": dataset,
        "model": model,
        "out": out,
        "attempts": attempts,
        "seed": seed,
        "templates": template,
        "max_tasks": max_tasks,
        "isolation": isolation,
    }
    if no_mistakes:
        flags |= {f"mistakes.{name}": 0.0 for name in _mistake_names()}
    from bureau.bootstrap.config import RecordConfig
    from bureau.bootstrap.record import describe, record
    from bureau.config import dump_resolved_config

    overrides = [*flag_overrides(flags), *fault_overrides(faults), *(set_ or [])]
    resolved = load_or_exit(RecordConfig, config, overrides, lambda s: typer.echo(s, err=True))
    dump_resolved_config(resolved, resolved.out)
    try:
        summary = record(resolved)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error
    for line in describe(summary):
        typer.echo(line)
    typer.echo(f"records in {resolved.out / 'trajectories.parquet'}")
    raise typer.Exit(1 if summary.system_errors else 0)


def _mistake_names() -> tuple[str, ...]:
    from bureau.bootstrap.config import MISTAKES

    return MISTAKES


@bootstrap_app.command("pretrain")
def pretrain_command(
    model: Annotated[Path, typer.Option(help="Checkpoint folder to start from.")],
    out: Annotated[Path, typer.Option(help="Run folder; the model goes to OUT/weights.")],
    steps: Annotated[int | None, typer.Option(min=1, help="Optimizer steps (default 600).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sequence and trainer seed.")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file of settings.")] = None,
    set_: SetOverrides = None,
) -> None:
    """Teach a random tiny model to copy an id from its context, on synthetic text (no task
    data): the base-model skill that demonstrations alone do not give it."""
    if not (model / "config.json").is_file():
        typer.echo(f"error: model {model} not found", err=True)
        raise typer.Exit(2)
    from bureau.bootstrap.config import PretrainConfig
    from bureau.bootstrap.pretrain import pretrain_copy
    from bureau.config import dump_resolved_config

    flags = {"model": model, "out": out, "steps": steps, "seed": seed}
    overrides = [*flag_overrides(flags), *(set_ or [])]
    resolved = load_or_exit(PretrainConfig, config, overrides, lambda s: typer.echo(s, err=True))
    dump_resolved_config(resolved, resolved.out)
    try:
        pretrain_copy(resolved, log=typer.echo)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error


@bootstrap_app.command("subset")
def subset_command(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder with a manifest.")],
    out: Annotated[Path, typer.Option(help="Dataset folder to create (links to the tasks).")],
    template: Templates = None,
    max_tasks: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")] = None,
) -> None:
    """A dataset of only some templates' tasks, for evaluating on the mix a model learned."""
    from bureau.bootstrap.record import select_tasks
    from bureau.tasks.dataset import MANIFEST_FILE

    chosen = {p.name for p in select_tasks(dataset, template, max_tasks)}
    manifest = json.loads((dataset / MANIFEST_FILE).read_text())
    manifest["tasks"] = [t for t in manifest["tasks"] if Path(t["path"]).name in chosen]
    out.mkdir(parents=True, exist_ok=True)
    for entry in manifest["tasks"]:
        link = out / entry["path"]
        if not link.exists():
            link.symlink_to((dataset / entry["path"]).resolve(), target_is_directory=True)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    typer.echo(f"{len(manifest['tasks'])} tasks in {out}")


def train_sft_command(
    trajectories: Annotated[Path, typer.Option(help="Parquet file of trajectory records.")],
    model: Annotated[Path, typer.Option(help="Checkpoint folder to start from.")],
    out: Annotated[Path, typer.Option(help="Run folder; the model goes to OUT/weights.")],
    steps: Annotated[int | None, typer.Option(min=1, help="Optimizer steps (default 60).")] = None,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate (default 3e-3).")] = None,
    sequences_per_step: Annotated[
        int | None, typer.Option(min=1, help="Trajectories per step (default 8).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Data order and trainer seed.")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file of settings.")] = None,
    set_: SetOverrides = None,
) -> None:
    """Supervised fine-tuning on recorded trajectories (masked NLL) through the trainer."""
    for path, what in ((trajectories, "trajectories file"), (model / "config.json", "model")):
        if not path.is_file():
            typer.echo(f"error: {what} {path} not found", err=True)
            raise typer.Exit(2)
    flags = {
        "trajectories": trajectories,
        "model": model,
        "out": out,
        "steps": steps,
        "sequences_per_step": sequences_per_step,
        "seed": seed,
        "trainer.optimizer.lr": lr,
    }
    from bureau.bootstrap.config import SFTConfig
    from bureau.bootstrap.sft import train_sft
    from bureau.config import dump_resolved_config

    overrides = [*flag_overrides(flags), *(set_ or [])]
    resolved = load_or_exit(SFTConfig, config, overrides, lambda s: typer.echo(s, err=True))
    dump_resolved_config(resolved, resolved.out)
    try:
        history = train_sft(resolved, log=typer.echo)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    first, last = history[0], history[-1]
    typer.echo(f"nll {first.get('nll', float('nan')):.3f} -> {last.get('nll', float('nan')):.3f}")
