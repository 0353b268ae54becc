"""`bureau train-offline`: train a checkpoint on stored trajectory records.

The command line is parsed before torch is imported, so `--help` is instant. Settings come from
an optional TOML file (the fields of `bureau.loop.offline.OfflineConfig`, e.g. a
`[trainer.optimizer]` table), then the flags given here, then `--set key=value` overrides; the
resolved config is written into the run folder. Several ranks:
`torchrun --nproc_per_node N -m bureau.cli.main train-offline ...` (FSDP2).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from bureau.cli.options import SetOverrides, config_choice, flag_overrides, load_or_exit

_OFFLINE = "bureau.loop.offline:OfflineConfig"


def train_offline_command(
    trajectories: Annotated[Path, typer.Option(help="Parquet file of trajectory records.")],
    model: Annotated[Path, typer.Option(help="Local Hugging Face checkpoint to start from.")],
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps to reach.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Run folder (default runs/train-offline-...); resumes its checkpoint."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML file of settings; flags given here override it.")
    ] = None,
    set_: SetOverrides = None,
    groups_per_step: Annotated[
        int | None, typer.Option(min=1, help="Prompt groups per batch (default 8).")
    ] = None,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate (default 1e-5).")] = None,
    token_budget: Annotated[
        int | None,
        typer.Option(min=1, help="Most tokens in one packed micro-batch (default 4096)."),
    ] = None,
    loss: Annotated[
        str | None,
        typer.Option(
            help="Policy loss, a `loss.kind` (default ppo).",
            callback=config_choice(_OFFLINE, "loss.kind"),
        ),
    ] = None,
    estimator: Annotated[
        str | None,
        typer.Option(
            help="Advantage estimator, an `advantages.estimator` (default grpo).",
            callback=config_choice(_OFFLINE, "advantages.estimator"),
        ),
    ] = None,
    reduction: Annotated[
        str | None,
        typer.Option(
            help="Loss reduction, a `reduction.reduction` (default token_mean).",
            callback=config_choice(_OFFLINE, "reduction.reduction"),
        ),
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(
            help="Compute dtype, a `trainer.dtype` (default float32).",
            callback=config_choice(_OFFLINE, "trainer.dtype"),
        ),
    ] = None,
    activation_checkpointing: Annotated[
        bool | None, typer.Option(help="Recompute activations in the backward pass (default off).")
    ] = None,
    save_every: Annotated[
        int | None, typer.Option(min=1, help="Checkpoint every N steps (default: at the end only).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Data order and trainer seed (default 0).")
    ] = None,
) -> None:
    """Train a checkpoint offline on trajectory records: advantages, a policy loss, N steps."""
    for path, what in ((trajectories, "trajectories file"), (model / "config.json", "model")):
        if not path.is_file():
            typer.echo(f"error: {what} {path} not found", err=True)
            raise typer.Exit(2)
    run = out or Path("runs") / f"train-offline-{time.strftime('%Y%m%d-%H%M%S')}"
    flags = {
        "trajectories": trajectories,
        "model": model,
        "steps": steps,
        "out": run,
        "groups_per_step": groups_per_step,
        "seed": seed,
        "save_every": save_every,
        "trainer.optimizer.lr": lr,
        "trainer.packing.token_budget": token_budget,
        "trainer.dtype": dtype,
        "trainer.activation_checkpointing": activation_checkpointing,
        "loss.kind": loss,
        "advantages.estimator": estimator,
        "reduction.reduction": reduction,
    }

    from bureau.loop.offline import OfflineConfig, train_offline

    overrides = [*flag_overrides(flags), *(set_ or [])]
    resolved = load_or_exit(OfflineConfig, config, overrides, lambda s: typer.echo(s, err=True))
    try:
        train_offline(resolved, log=typer.echo)
    except ValueError as error:  # e.g. no usable trajectory in the file
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
