"""Offline training (`bureau train-offline`): records from Parquet, advantages, a loss, N steps.

It sits beside the asynchronous loop, not in the trainer: like the loop it drives the
algorithm-blind trainer with batches the algorithm has prepared, only from stored records.

Each step takes the next `groups_per_step` prompt groups of the stream (`GroupStream`),
computes group-relative advantages and batch-wide loss weights (`bureau.algo`), and runs one
`forward_backward` + `optim_step`. The records were sampled by an older policy, so the default
loss is PPO's clipped objective against their sampler logprobs.

The run folder gets the resolved config (`config.resolved.toml`, which `load_config` reads
back), one JSON line of metrics per step (`metrics.jsonl`), the last checkpoint (`checkpoint/`,
resumed from if present), and the final weights as a complete Hugging Face folder (`weights/`:
the tokenizer files are copied from the source model) that `bureau serve` or an engine's weight
update can take.

Under torchrun (`WORLD_SIZE` > 1) the ranks shard the model with FSDP2; only rank 0 writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from bureau.algo.advantages import AdvantageConfig
from bureau.algo.losses import PolicyLossConfig, PPOLossConfig
from bureau.algo.reductions import ReductionConfig
from bureau.config import StrictModel, dump_resolved_config
from bureau.trainer.config import TrainerConfig

if TYPE_CHECKING:
    from bureau.trainer.data import GroupStream
    from bureau.trainer.trainer import Trainer


class OfflineConfig(StrictModel):
    """`bureau train-offline`: what to train, on what, for how long, and where the run goes."""

    trajectories: Path
    """Parquet file of trajectory records (`bureau.records.write_parquet`), or a folder of them
    (a `bureau train` run's `trajectories/`: the records it trained on)."""
    model: Path
    """Local Hugging Face checkpoint folder to start from."""
    out: Path
    """Run folder (created; a checkpoint in it is resumed from)."""
    steps: int = Field(ge=1)
    """Optimizer steps to reach (counting those of a resumed checkpoint)."""
    groups_per_step: int = Field(default=8, ge=1)
    """Prompt groups per batch."""
    seed: int = 0
    """Seeds the group order and the trainer."""
    save_every: int | None = Field(default=None, ge=1)
    """Write the checkpoint every this many steps (always after the last)."""
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Group-relative advantages and the filters."""
    reduction: ReductionConfig = Field(default_factory=ReductionConfig)
    """How per-token losses average into the batch loss."""
    loss: PolicyLossConfig = Field(default_factory=PPOLossConfig)
    """The policy loss (`kind`: ppo, decoupled_ppo or dppo_tv)."""
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """Optimisation, packing and precision."""


def train_offline(
    config: OfflineConfig, *, log: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Train to `config.steps` steps; returns each step's metrics (on every rank)."""
    from bureau.algo.advantages import advantages_for_records
    from bureau.algo.losses import make_loss_fn, needs_reference
    from bureau.loop.sides import copy_checkpoint_extras
    from bureau.records import read_trajectories
    from bureau.trainer.data import GroupStream
    from bureau.trainer.fsdp import Parallel
    from bureau.trainer.trainer import Trainer

    records = read_trajectories(config.trajectories)
    stream = GroupStream(records, seed=config.seed)
    parallel = Parallel.from_env() if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None
    trainer_config = config.trainer.model_copy(update={"seed": config.seed})
    trainer = Trainer.from_pretrained(
        config.model,
        make_loss_fn(config.loss),
        trainer_config,
        parallel=parallel,
        reference=config.model if needs_reference(config.loss) else None,
    )
    say = log if log is not None and trainer.parallel.is_main else (lambda _: None)
    checkpoint = config.out / "checkpoint"
    try:
        if trainer.parallel.is_main:
            config.out.mkdir(parents=True, exist_ok=True)
            dump_resolved_config(config, config.out)
        if (checkpoint / "trainer_state.json").is_file():
            trainer.load(checkpoint)
            say(f"resumed from {checkpoint} at step {trainer.step}")
        history = []
        # A stream in which no group is usable would never produce a batch.
        usable = advantages_for_records(records, config.advantages)
        if not usable.num_used:
            why = ", ".join(f"{n} {reason}" for reason, n in usable.excluded.items() if n)
            raise ValueError(
                f"no usable trajectory in {config.trajectories}: all {len(records)} excluded "
                f"({why}; {usable.num_groups} groups by group_id)"
            )
        while trainer.step < config.steps:
            metrics = _one_step(trainer, stream, config)
            history.append(metrics)
            if trainer.parallel.is_main:
                with (config.out / "metrics.jsonl").open("a") as f:
                    f.write(json.dumps(metrics) + "\n")
            say(_summary(metrics))
            done = trainer.step >= config.steps
            if done or (config.save_every and trainer.step % config.save_every == 0):
                trainer.save(checkpoint)
        weights = trainer.export_weights(config.out / "weights")
        if trainer.parallel.is_main and isinstance(weights, Path):
            copy_checkpoint_extras(config.model, weights)
        say(f"weights in {config.out / 'weights'}")
        return history
    finally:
        trainer.close()


def _one_step(trainer: Trainer, stream: GroupStream, config: OfflineConfig) -> dict[str, Any]:
    """Batches until one has a usable group, then forward-backward and the optimizer step."""
    from bureau.trainer.data import records_to_batch

    position = int(trainer.data_state.get("groups_consumed", 0))
    skipped = 0
    while True:
        made = records_to_batch(
            stream.take(position, config.groups_per_step), config.advantages, config.reduction
        )
        position += config.groups_per_step
        if made.batch is not None:
            break
        skipped += 1
    trainer.data_state = {"groups_consumed": position}
    metrics = trainer.forward_backward(made.batch)
    metrics |= trainer.optim_step()
    metrics["data/groups_consumed"] = position
    metrics["data/batches_without_signal"] = skipped
    if made.mean_reward is not None:
        metrics["data/mean_reward"] = made.mean_reward
    for reason, count in made.excluded.items():
        metrics[f"data/excluded_{reason}"] = count
    return metrics


def _summary(metrics: dict[str, Any]) -> str:
    parts = [f"step {int(metrics['train/step'])}"]
    for key, label in (
        ("train/loss", "loss"),
        ("train/grad_norm", "grad_norm"),
        ("data/mean_reward", "reward"),
        ("train/num_tokens", "tokens"),
        ("train/padding_waste", "padding"),
        ("train/tokens_per_s", "tok/s"),
    ):
        if key in metrics:
            value = metrics[key]
            parts.append(f"{label} {value:.4g}" if isinstance(value, float) else f"{label} {value}")
    return "  ".join(parts)
