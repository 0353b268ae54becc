"""The trainer: forward-backward over packed micro-batches, optimizer steps, checkpoints.

The API has the shape modern RL stacks use (Tinker's): `forward_backward(batch)` accumulates
the gradient of one batch and returns its metrics, `optim_step()` applies it, and
`compute_logprobs`, `save`/`load` and `export_weights` serve the loop around it. The trainer is
algorithm-blind: it calls the `LossFn` it was given on each micro-batch's `PolicyLossInputs`
and sums the losses (the loss weights are normalised over the whole batch, so the sum is the
batch loss however the batch was packed or sharded).

Under FSDP2 every rank calls the same methods with the same batch; each rank runs its share of
the micro-batches and the metrics are combined over all ranks. See `bureau.trainer.fsdp`.

A driver loop:

    trainer = Trainer.from_pretrained(model_dir, loss_fn, TrainerConfig(...))
    for batch in batches:
        metrics = trainer.forward_backward(batch)
        metrics |= trainer.optim_step()
        engine.update_weights(trainer.export_weights(out / f"step-{trainer.step}"), trainer.step)
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bureau.algo.inputs import LossFn
from bureau.algo.metrics import combine_metrics, finalize_metrics, staleness_histogram
from bureau.records import TrainBatch
from bureau.trainer.checkpoint import (
    full_state_dict,
    load_training_state,
    save_training_state,
    write_weights,
)
from bureau.trainer.config import TrainerConfig, build_optimizer
from bureau.trainer.forward import MicroBatch, build_micro_batch, loss_inputs, micro_batch_logprobs
from bureau.trainer.fsdp import Parallel, full_tensor
from bureau.trainer.packing import MicroBatchPlan, fixed_micro_batches, plan_micro_batches

if TYPE_CHECKING:
    from transformers import PreTrainedModel


# Per-rank tallies of a forward-backward, summed over ranks for the step's metrics.
_COUNTS = ("positions", "padding", "tokens", "loss_tokens", "sequences", "micro_batches", "slots")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # numpy is optional
        pass


class Trainer:
    """Trains a Hugging Face causal LM on `TrainBatch`es with a given loss function."""

    def __init__(
        self,
        model: PreTrainedModel,
        loss_fn: LossFn,
        config: TrainerConfig | None = None,
        *,
        parallel: Parallel | None = None,
        pad_id: int | None = None,
        reference: PreTrainedModel | None = None,
    ) -> None:
        """Take ownership of `model` (moved, possibly sharded, put in training mode).

        `pad_id` fills padding positions (default: the model's pad, else eos, else 0 token).
        `reference`: a frozen policy (usually the starting weights) that scores every batch
        `forward_backward` gets without `ref_logprobs`, for a KL penalty towards it; it is
        placed and sharded like `model` and never trained.
        """
        self.config = config or TrainerConfig()
        self.parallel = parallel or Parallel.single(self.config.device)
        self.loss_fn = loss_fn
        seed_everything(self.config.seed)
        self.pad_id = _pad_id(model) if pad_id is None else pad_id
        hidden = int(getattr(model.config, "hidden_size", 1024))
        packing = self.config.packing
        self.cost_linear = packing.cost_linear if packing.cost_linear is not None else 6.0 * hidden
        self.bf16 = self.config.dtype == "bfloat16"
        model.float()  # the master weights; bf16 is a compute dtype only
        if self.config.activation_checkpointing:
            model.activation_checkpointing_enable({"use_reentrant": False})
        model.config.use_cache = False
        self.model = self.parallel.wrap(model, bf16=self.bf16)
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.reference: PreTrainedModel | None = None
        if reference is not None:
            reference.float()
            reference.config.use_cache = False
            reference.requires_grad_(False)
            self.reference = self.parallel.wrap(reference, bf16=self.bf16)
            self.reference.eval()
        self.optimizer, self.scheduler = build_optimizer(params, self.config.optimizer)
        self.step = 0
        """Optimizer steps taken."""
        self.consumed_sequences = 0
        """Sequences trained on so far."""
        self.data_state: dict[str, Any] = {}
        """The driver's position in its data (JSON-ready), saved and restored with the rest."""
        self._accumulated = 0

    @classmethod
    def from_pretrained(
        cls,
        path: Path,
        loss_fn: LossFn,
        config: TrainerConfig | None = None,
        *,
        parallel: Parallel | None = None,
        reference: Path | None = None,
    ) -> Trainer:
        """A trainer on a local Hugging Face checkpoint folder (and a frozen reference policy
        from `reference`'s, for a KL penalty)."""
        from bureau.models.checkpoint import load_checkpoint

        model, tokenizer = load_checkpoint(path, dtype=torch.float32)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else None
        frozen = None if reference is None else load_checkpoint(reference, dtype=torch.float32)[0]
        return cls(model, loss_fn, config, parallel=parallel, pad_id=pad, reference=frozen)

    # -- planning -------------------------------------------------------------------------

    def plan(self, batch: TrainBatch) -> list[list[MicroBatchPlan]]:
        """The micro-batches of every rank for this batch."""
        packing = self.config.packing
        ranks = self.parallel.world_size
        if packing.mode == "fixed":
            return fixed_micro_batches(batch.lengths, packing.fixed_size, num_ranks=ranks)
        return plan_micro_batches(
            batch.lengths, packing.token_budget, self.cost_linear, num_ranks=ranks
        )

    def _micro_batches(self, batch: TrainBatch) -> list[MicroBatch]:
        packing = self.config.packing
        return [
            build_micro_batch(
                batch,
                plan,
                pad_id=self.pad_id,
                padded_rows=packing.mode == "fixed",
                pad_multiple=packing.pad_multiple,
                device=self.parallel.device,
            )
            for plan in self.plan(batch)[self.parallel.rank]
        ]

    # -- training -------------------------------------------------------------------------

    def forward_backward(self, batch: TrainBatch, loss_fn: LossFn | None = None) -> dict[str, Any]:
        """Accumulate the gradient of `batch`'s loss; the batch's metrics (all ranks).

        May be called several times before `optim_step` (the gradients add up).
        """
        loss_fn = loss_fn or self.loss_fn
        started = time.perf_counter()
        reference_s = 0.0
        if self.reference is not None and batch.ref_logprobs is None:
            reference_s = time.perf_counter()
            scored = self._score(self.reference, batch)
            batch = replace(batch, ref_logprobs=[row.tolist() for row in scored])
            reference_s = time.perf_counter() - reference_s
        self.model.train()
        loss_metrics: list[Mapping[str, torch.Tensor]] = []
        total_loss = 0.0
        counts = dict.fromkeys(_COUNTS, 0)
        budget = self.config.packing.token_budget
        for mb in self._micro_batches(batch):
            with self.parallel.autocast(self.bf16):
                logprobs, entropy = micro_batch_logprobs(
                    self.model,
                    mb,
                    mb.loss_mask > 0,
                    with_entropy=self.config.compute_entropy,
                    attention=self.config.attention,
                    temperature=self.config.temperature,
                )
            if mb.is_empty:
                # A filler micro-batch: ranks must take part in every collective.
                loss = logprobs.sum() * 0.0
            else:
                loss, metrics = loss_fn(loss_inputs(mb, logprobs, entropy))
                loss_metrics.append({k: v.detach().cpu() for k, v in metrics.items()})
                total_loss += float(loss.detach())
                counts["micro_batches"] += 1
            loss.backward()
            tokens = len(mb.layout.token_index)
            counts["positions"] += mb.layout.num_positions
            counts["padding"] += mb.layout.num_positions - tokens
            counts["tokens"] += tokens
            counts["loss_tokens"] += int(mb.loss_mask.sum())
            counts["sequences"] += len(mb.plan.seq_indices)
            counts["slots"] += max(budget, tokens)
        self._accumulated += 1
        self.consumed_sequences += batch.num_sequences
        elapsed = time.perf_counter() - started
        step_metrics = self._step_metrics(
            combine_metrics(loss_metrics), total_loss, counts, elapsed
        )
        if batch.weight_versions is not None:
            # The trainer's weights after `step` updates are version `step`: a token sampled by
            # version v is `step - v` updates stale (every rank holds the whole batch).
            versions = [v for row in batch.weight_versions for v in row]
            for staleness, n in staleness_histogram(versions, self.step).items():
                step_metrics[f"train/staleness_tokens/{staleness}"] = n
        if self.reference is not None:
            step_metrics["train/reference_s"] = reference_s
        return step_metrics

    def _step_metrics(
        self,
        combined: dict[str, torch.Tensor],
        total_loss: float,
        counts: dict[str, int],
        elapsed: float,
    ) -> dict[str, Any]:
        gathered = self.parallel.gather_objects((combined, total_loss, counts, elapsed))
        metrics: dict[str, Any] = finalize_metrics(combine_metrics(g[0] for g in gathered))
        total = {k: sum(g[2][k] for g in gathered) for k in counts}
        wall = max(g[3] for g in gathered)
        own = {
            "train/loss": sum(g[1] for g in gathered),
            "train/num_sequences": total["sequences"],
            "train/num_tokens": total["tokens"],
            "train/num_loss_tokens": total["loss_tokens"],
            "train/num_micro_batches": total["micro_batches"],
            "train/padding_waste": total["padding"] / max(1, total["positions"]),
            "train/forward_backward_s": wall,
            "train/tokens_per_s": total["tokens"] / wall if wall > 0 else math.nan,
        }
        if self.config.packing.mode == "budget":
            # How full the micro-batches are against the budget (a lone long sequence: 1).
            own["train/budget_fill"] = total["tokens"] / max(1, total["slots"])
        clash = sorted(set(own) & set(metrics))
        if clash:
            raise ValueError(f"the loss function's metrics {clash} clash with the trainer's")
        metrics.update(own)
        return metrics

    def optim_step(self) -> dict[str, float]:
        """Apply the accumulated gradient: clip, AdamW, schedule; returns lr and grad norm.

        A non-finite gradient norm skips the update (the gradient is dropped) and says so.
        """
        if not self._accumulated:
            raise RuntimeError("optim_step without forward_backward")
        lr = float(self.scheduler.get_last_lr()[0])
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.config.optimizer.grad_clip or math.inf
        norm = float(full_tensor(torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)))
        skipped = not math.isfinite(norm)
        if not skipped:
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
        self.optimizer.zero_grad(set_to_none=True)
        self._accumulated = 0
        metrics = {
            "train/lr": lr,
            "train/grad_norm": norm,
            "train/step": float(self.step),
            "train/skipped_step": float(skipped),
        }
        if self.parallel.device.type == "cuda":
            metrics["train/cuda_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        return metrics

    # -- scoring --------------------------------------------------------------------------

    @torch.no_grad()
    def compute_logprobs(self, batch: TrainBatch | Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Per sequence, float32 [L_b]: the logprob of each token under the current parameters
        where the loss mask is set (every position but the first for plain token lists), 0.0
        elsewhere. Useful as `old_logprobs` before several updates on one batch, or to audit
        the sampler's logprobs. Every rank gets every sequence's result.
        """
        if not isinstance(batch, TrainBatch):
            batch = TrainBatch.for_scoring(batch)
        self.model.eval()
        try:
            return self._score(self.model, batch)
        finally:
            self.model.train()

    @torch.no_grad()
    def _score(self, model: PreTrainedModel, batch: TrainBatch) -> list[torch.Tensor]:
        mine: dict[int, torch.Tensor] = {}
        for mb in self._micro_batches(batch):
            with self.parallel.autocast(self.bf16):
                logprobs, _ = micro_batch_logprobs(
                    model,
                    mb,
                    mb.loss_mask > 0,
                    attention=self.config.attention,
                    temperature=self.config.temperature,
                )
            logprobs = logprobs.cpu()
            start = 0
            for index, n in zip(mb.plan.seq_indices, mb.layout.seq_lengths, strict=True):
                mine[index] = logprobs[start : start + n].clone()
                start += n
        results: dict[int, torch.Tensor] = {}
        for part in self.parallel.gather_objects(mine):
            results.update(part)
        return [results[b] for b in range(batch.num_sequences)]

    # -- state ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "consumed_sequences": self.consumed_sequences,
            "data_state": self.data_state,
            "config": self.config.model_dump(mode="json"),
        }

    def save(self, path: Path) -> Path:
        """A checkpoint to resume from (all ranks call this). Refuses pending gradients."""
        if self._accumulated:
            raise RuntimeError("save between forward_backward and optim_step")
        return save_training_state(
            Path(path), self.parallel, self.model, self.optimizer, self.scheduler, self.state()
        )

    def load(self, path: Path) -> None:
        """Resume from `save`'s folder: parameters, optimizer, schedule, RNG, step, data."""
        state = load_training_state(
            Path(path), self.parallel, self.model, self.optimizer, self.scheduler
        )
        self.step = int(state["step"])
        self.consumed_sequences = int(state["consumed_sequences"])
        self.data_state = dict(state["data_state"])
        self._accumulated = 0

    def export_weights(
        self, out: Path | None = None, *, dtype: torch.dtype | None = None
    ) -> Path | dict[str, torch.Tensor]:
        """The current weights for an inference engine (all ranks call this).

        With `out`: a folder with `model.safetensors` (Hugging Face tensor names) and
        `config.json`, written by the main rank; returns `out`. Without: the state dict on CPU
        (copies; empty on the other ranks). `dtype` casts floating tensors (e.g. bfloat16).
        """
        state = full_state_dict(self.model, self.parallel, dtype)
        if out is None:
            return state
        if self.parallel.is_main:
            write_weights(state, Path(out), self.model)
        self.parallel.barrier()
        return Path(out)

    def close(self) -> None:
        """Leave the process group, if any (idempotent)."""
        self.parallel.close()


def _pad_id(model: PreTrainedModel) -> int:
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(model.config, name, None)
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, int):
            return value
    return 0
