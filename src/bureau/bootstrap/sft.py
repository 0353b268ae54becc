"""Supervised fine-tuning on demonstrations, through the algorithm-blind trainer.

Demonstrations are token lists with a loss mask (1 on the tokens the teacher "sampled"), as the
harness records them. Each step takes the next `sequences_per_step` of a seeded, shuffled
stream (a fresh shuffle per pass), builds a `TrainBatch` whose loss weights are the token mean
over the batch's trained tokens, and runs `forward_backward` + `optim_step` with the `sft` loss
(`bureau.algo.losses.sft_loss`). The result is a complete Hugging Face folder (weights, config,
tokenizer files) that `bureau serve` and the engines load.

The run folder gets `config.json` (the resolved settings), `metrics.jsonl` (one line per step)
and `weights/`.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bureau.bootstrap.config import SFTConfig
from bureau.records import TrainBatch

if TYPE_CHECKING:
    from bureau.trainer.trainer import Trainer

Demo = tuple[list[int], list[int]]
"""(token ids, loss mask) of one demonstration."""

_WEIGHT_FILES = (".safetensors", ".bin", ".pt")


def sft_batch(demos: Sequence[Demo]) -> TrainBatch:
    """A batch of demonstrations: token-mean weights over its trained tokens, advantage 1 on
    them (the `sft` loss reads only the weights; advantages say "imitate" to other readers).

        ids [1, 2, 3, 10, 11], mask [0, 0, 0, 1, 1]  ->  loss_weights [0, 0, 0, .5, .5]
    """
    import torch

    from bureau.algo.reductions import ReductionConfig, loss_weights

    masks = [torch.tensor(mask) for _, mask in demos]
    weights = loss_weights(masks, list(range(len(demos))), ReductionConfig())
    return TrainBatch(
        token_ids=[list(ids) for ids, _ in demos],
        loss_mask=[list(mask) for _, mask in demos],
        sampler_logprobs=[[0.0] * len(ids) for ids, _ in demos],
        advantages=[[float(m) for m in mask] for _, mask in demos],
        loss_weights=[w.tolist() for w in weights],
    )


class DemoStream:
    """An endless seeded stream of demonstrations; each pass over them is a fresh shuffle."""

    def __init__(self, demos: Sequence[Demo], seed: int) -> None:
        if not demos:
            raise ValueError("no demonstrations to train on")
        self.demos = list(demos)
        self.seed = seed
        self.position = 0
        self._order: list[int] = []

    def take(self, count: int) -> list[Demo]:
        taken = []
        for _ in range(count):
            epoch, offset = divmod(self.position, len(self.demos))
            if offset == 0:
                self._order = list(range(len(self.demos)))
                random.Random(f"{self.seed}/{epoch}").shuffle(self._order)
            taken.append(self.demos[self._order[offset]])
            self.position += 1
        return taken


def fit(
    trainer: Trainer,
    demos: Sequence[Demo],
    *,
    steps: int,
    per_step: int,
    seed: int,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    extra: Callable[[int], list[Demo]] | None = None,
) -> list[dict[str, Any]]:
    """`steps` SFT steps of `per_step` demonstrations each (and `extra(step)`'s sequences, when
    given, in the same batch); returns each step's metrics."""
    stream = DemoStream(demos, seed)
    history = []
    for step in range(steps):
        started = time.perf_counter()
        batch = stream.take(per_step) + (extra(step) if extra is not None else [])
        metrics = trainer.forward_backward(sft_batch(batch))
        metrics |= trainer.optim_step()
        metrics["train/step_s"] = time.perf_counter() - started
        history.append(metrics)
        if on_step is not None:
            on_step(metrics)
    return history


def export(trainer: Trainer, source: Path, out: Path) -> Path:
    """The trainer's weights as a Hugging Face folder, with `source`'s tokenizer files."""
    folder = trainer.export_weights(out)
    assert isinstance(folder, Path)
    for path in Path(source).iterdir():
        if path.is_file() and path.suffix not in _WEIGHT_FILES and not (out / path.name).exists():
            shutil.copy2(path, out / path.name)
    return out


def train_sft(
    config: SFTConfig, *, log: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Train `config.model` on the records in `config.trajectories`; see the module docstring."""
    from bureau.algo.losses import SFTLossConfig, make_loss_fn
    from bureau.records import read_parquet
    from bureau.trainer.threads import CoreShare
    from bureau.trainer.trainer import Trainer

    say = log or (lambda _: None)
    records = read_parquet(config.trajectories)
    usable = [
        r
        for r in records
        if r.system_error is None
        and any(r.loss_mask)
        and (config.min_reward is None or (r.reward is not None and r.reward >= config.min_reward))
    ]
    if not usable:
        raise ValueError(f"no usable trajectory among {len(records)} in {config.trajectories}")
    say(f"{len(usable)} of {len(records)} trajectories to train on")
    demos = [(list(r.token_ids), list(r.loss_mask)) for r in usable]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(config.model), local_files_only=True)
    if config.augment:
        from bureau.bootstrap.augment import augment

        fresh, skipped = augment(
            demos, tokenizer, copies=config.augment, split=config.augment_split, seed=config.seed
        )
        demos += fresh
        say(
            f"{len(fresh)} re-rendered with fresh ids and company names of the "
            f"{config.augment_split} split ({skipped} could not be)"
        )
    trainer_config = config.trainer.model_copy(update={"seed": config.seed})
    trainer = Trainer.from_pretrained(config.model, make_loss_fn(SFTLossConfig()), trainer_config)
    if config.attn_implementation is not None:
        trainer.model.set_attn_implementation(config.attn_implementation)
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    metrics_file = (config.out / "metrics.jsonl").open("w")
    cores = CoreShare(log=say)
    cores.start()

    def on_step(metrics: dict[str, Any]) -> None:
        metrics["train/threads"] = cores.threads
        cores.update()
        metrics_file.write(json.dumps(metrics) + "\n")
        metrics_file.flush()
        step = int(metrics["train/step"])
        if step == 1 or step % 10 == 0 or step == config.steps:
            say(
                f"step {step}: nll {metrics.get('nll', float('nan')):.3f}, "
                f"{metrics['train/step_s']:.2f} s, {metrics['train/num_tokens']} tokens"
            )

    replay = None
    if config.copy_replay:
        from bureau.bootstrap.config import PretrainConfig
        from bureau.bootstrap.pretrain import CopyTask

        pretraining = PretrainConfig(model=config.model, out=config.out)  # its defaults
        copies = CopyTask(tokenizer, pretraining.max_words, pretraining.spans)

        def replay(step: int) -> list[Demo]:
            rng = random.Random(f"replay/{config.seed}/{step}")
            return [copies.sample(rng) for _ in range(config.copy_replay)]

        say(f"{config.copy_replay} copy-pretraining sequences beside each step's demonstrations")
    try:
        history = fit(
            trainer,
            demos,
            steps=config.steps,
            per_step=config.sequences_per_step,
            seed=config.seed,
            on_step=on_step,
            extra=replay,
        )
        export(trainer, config.model, config.out / "weights")
    finally:
        metrics_file.close()
        trainer.close()
    say(f"weights in {config.out / 'weights'}")
    return history
