"""`bureau train-offline`: train a checkpoint on stored trajectory records.

The command line is parsed before torch is imported, so `--help` is instant. Settings come from
an optional TOML file (the fields of `bureau.trainer.offline.OfflineConfig`, e.g. a
`[trainer.optimizer]` table), and the flags given on the command line override it. Several
ranks: `torchrun --nproc_per_node N -m bureau.cli.main train-offline ...` (FSDP2).
"""

from __future__ import annotations

import time
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer


class LossChoice(StrEnum):
    ppo = "ppo"
    decoupled_ppo = "decoupled_ppo"
    dppo_tv = "dppo_tv"


class EstimatorChoice(StrEnum):
    grpo = "grpo"
    dr_grpo = "dr_grpo"
    rloo = "rloo"


class ReductionChoice(StrEnum):
    token_mean = "token_mean"
    sequence_mean = "sequence_mean"
    prompt_mean = "prompt_mean"
    seq_mean_token_sum_norm = "seq_mean_token_sum_norm"


class TrainDType(StrEnum):
    float32 = "float32"
    bfloat16 = "bfloat16"


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for key in parents:
        tree = tree.setdefault(key, {})
    tree[leaf] = value


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
    groups_per_step: Annotated[
        int | None, typer.Option(min=1, help="Prompt groups per batch (default 8).")
    ] = None,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate (default 1e-5).")] = None,
    token_budget: Annotated[
        int | None,
        typer.Option(min=1, help="Most tokens in one packed micro-batch (default 4096)."),
    ] = None,
    loss: Annotated[LossChoice | None, typer.Option(help="Policy loss (default ppo).")] = None,
    estimator: Annotated[
        EstimatorChoice | None, typer.Option(help="Advantage estimator (default grpo).")
    ] = None,
    reduction: Annotated[
        ReductionChoice | None, typer.Option(help="Loss reduction (default token_mean).")
    ] = None,
    dtype: Annotated[
        TrainDType | None, typer.Option(help="Compute dtype (default float32).")
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
    settings: dict[str, Any] = {}
    if config is not None:
        try:
            settings = tomllib.loads(config.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            typer.echo(f"error: cannot read {config}: {error}", err=True)
            raise typer.Exit(2) from error
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
        "trainer.dtype": dtype.value if dtype else None,
        "trainer.activation_checkpointing": activation_checkpointing,
        "loss.kind": loss.value if loss else None,
        "advantages.estimator": estimator.value if estimator else None,
        "reduction.reduction": reduction.value if reduction else None,
    }
    for dotted, value in flags.items():
        if value is not None:
            _set(settings, dotted, value)

    from pydantic import ValidationError

    from bureau.trainer.offline import OfflineConfig, train_offline

    try:
        resolved = OfflineConfig.model_validate(settings)
    except ValidationError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error
    try:
        train_offline(resolved, log=typer.echo)
    except ValueError as error:  # e.g. no usable trajectory in the file
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
