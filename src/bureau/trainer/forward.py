"""The packed forward pass: token logprobs of a micro-batch under the current parameters.

A micro-batch's tensors are built from its `PackedLayout`; per-token fields are concatenated
over its sequences into [N] tensors (N real tokens, padding excluded), the layout of
`bureau.algo.inputs.PolicyLossInputs`.

The output layer runs only where a logprob is needed (`logits_to_keep` with an index tensor):
with a 151,936-token vocabulary it dominates small models, and a [T, V] logits matrix for a
long packed row would not fit in memory. For a plain linear output layer it is fused with the
logprob (`bureau.trainer.head`): no logits tensor at all. Otherwise the logprob
`logit[target] - logsumexp(logits)` and the entropy (a metric, no gradient) are computed in
float32 by `SelectedLogprobs`, a few rows at a time; only the logits stay alive for the
backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

from bureau.algo.inputs import PolicyLossInputs
from bureau.records import TrainBatch
from bureau.trainer.head import HeadRequest, can_fuse, fused_head
from bureau.trainer.packing import MicroBatchPlan, PackedLayout, pack_row, pad_rows

if TYPE_CHECKING:
    from transformers import PreTrainedModel

AttentionMode = Literal["auto", "mask"]


@dataclass
class MicroBatch:
    """Tensors of one micro-batch; [R, W] model inputs and [N] per-token fields."""

    plan: MicroBatchPlan
    layout: PackedLayout
    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor | None
    token_index: torch.Tensor
    """[N] int64 flat positions (row * W + column) of the real tokens."""
    loss_mask: torch.Tensor
    """[N] float32."""
    sampler_logprobs: torch.Tensor
    advantages: torch.Tensor
    loss_weights: torch.Tensor
    seq_ids: torch.Tensor
    weight_versions: torch.Tensor | None
    old_logprobs: torch.Tensor | None
    ref_logprobs: torch.Tensor | None

    @property
    def is_empty(self) -> bool:
        return not self.plan.seq_indices


def build_micro_batch(
    batch: TrainBatch,
    plan: MicroBatchPlan,
    *,
    pad_id: int,
    padded_rows: bool = False,
    pad_multiple: int = 1,
    device: torch.device | str = "cpu",
) -> MicroBatch:
    """The micro-batch of `plan`'s sequences: packed in one row, or one padded row each.

    An empty plan gives a one-token row of padding with no real tokens (a rank's filler).
    """
    seqs = [batch.token_ids[i] for i in plan.seq_indices] or [[pad_id]]
    layout = pad_rows(seqs, pad_id) if padded_rows else pack_row(seqs, pad_id, pad_multiple)
    if not plan.seq_indices:
        layout = PackedLayout(layout.input_ids, layout.position_ids, None, [], [], [])

    def flat(rows: list[list[int]] | list[list[float]] | None, dtype: torch.dtype) -> torch.Tensor:
        values = [] if rows is None else [v for i in plan.seq_indices for v in rows[i]]
        return torch.tensor(values, dtype=dtype, device=device)

    def optional(rows: list[list[float]] | None) -> torch.Tensor | None:
        return None if rows is None else flat(rows, torch.float32)

    return MicroBatch(
        plan=plan,
        layout=layout,
        input_ids=torch.tensor(layout.input_ids, dtype=torch.long, device=device),
        position_ids=torch.tensor(layout.position_ids, dtype=torch.long, device=device),
        attention_mask=(
            None
            if layout.attention_mask is None
            else torch.tensor(layout.attention_mask, dtype=torch.long, device=device)
        ),
        token_index=torch.tensor(layout.token_index, dtype=torch.long, device=device),
        loss_mask=flat(batch.loss_mask, torch.float32),
        sampler_logprobs=flat(batch.sampler_logprobs, torch.float32),
        advantages=flat(batch.advantages, torch.float32),
        loss_weights=flat(batch.loss_weights, torch.float32),
        seq_ids=torch.tensor(layout.seq_ids, dtype=torch.long, device=device),
        weight_versions=(
            None if batch.weight_versions is None else flat(batch.weight_versions, torch.long)
        ),
        old_logprobs=optional(batch.old_logprobs),
        ref_logprobs=optional(batch.ref_logprobs),
    )


def block_causal_mask(position_ids: torch.Tensor) -> torch.Tensor:
    """[R, 1, W, W] bool: a query attends to a key iff it is not later and in the same sequence.

    A new sequence starts wherever the position id does not continue the previous one by 1 (as
    in transformers' packed-sequence detection), so padding that restarts at 0 is its own block.
    """
    first = position_ids[:, :1] - 1
    starts = torch.diff(position_ids, prepend=first, dim=-1) != 1
    segment = starts.long().cumsum(-1)  # [R, W]
    width = position_ids.shape[-1]
    causal = torch.ones(width, width, dtype=torch.bool, device=position_ids.device).tril()
    same = segment[:, :, None] == segment[:, None, :]
    return (same & causal)[:, None]


def _model_inputs(
    model: PreTrainedModel, mb: MicroBatch, attention: AttentionMode
) -> dict[str, torch.Tensor | None]:
    inputs: dict[str, torch.Tensor | None] = {
        "input_ids": mb.input_ids,
        "position_ids": mb.position_ids,
        "attention_mask": mb.attention_mask,
    }
    if attention == "mask" and mb.attention_mask is None:
        # An additive float mask suits both sdpa and eager attention.
        dtype = next(model.parameters()).dtype
        allowed = block_causal_mask(mb.position_ids)
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        inputs["attention_mask"] = mask.masked_fill(~allowed, torch.finfo(dtype).min)
    return inputs


def micro_batch_logprobs(
    model: PreTrainedModel,
    mb: MicroBatch,
    score: torch.Tensor,
    *,
    with_entropy: bool = False,
    attention: AttentionMode = "auto",
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(token | its sequence's prefix) at the [N] positions where `score` is set, 0 elsewhere.

    p is softmax(logits / temperature): the distribution the sampler drew from (at temperature 1,
    the raw model).

    Returns float32 [N] logprobs (with gradient when enabled) and, if asked, [N] entropies of
    the next-token distribution at the same positions (no gradient). `score` must be unset at
    each sequence's first token.
    """
    scored = score.nonzero()[:, 0]  # indices into N
    flat = mb.token_index[scored]
    rows, width = mb.input_ids.shape
    row, col = flat // width, flat % width
    if bool((mb.position_ids[row, col] == 0).any()):
        raise ValueError("cannot score the first token of a sequence (it has no prefix)")
    # logits at the previous position predict each scored token
    if rows == 1:
        keep, slot = col - 1, torch.arange(len(col), device=col.device)
    else:
        keep, slot = torch.unique(col - 1, sorted=True, return_inverse=True)
    targets = mb.input_ids[row, col]
    inputs = _model_inputs(model, mb, attention)
    if can_fuse(model):
        request = HeadRequest(row, slot, targets, temperature, with_entropy)
        with fused_head(model, request):
            model(**inputs, logits_to_keep=keep, use_cache=False)
        assert request.picked is not None and request.entropy is not None
        picked, entropy_k = request.picked, request.entropy
    else:
        out = model(**inputs, logits_to_keep=keep, use_cache=False)
        # [K, V]; a view when packed (indexing [0] would zero-fill a copy in the backward)
        logits = (
            out.logits[row, slot] if rows > 1 else out.logits.view(len(col), out.logits.shape[-1])
        )
        if temperature != 1.0:
            logits = logits / temperature
        picked, entropy_k = SelectedLogprobs.apply(logits, targets, with_entropy)
    n = mb.token_index.numel()
    logprobs = torch.zeros(n, dtype=torch.float32, device=picked.device).index_put(
        (scored,), picked
    )
    entropy = None
    if with_entropy:
        entropy = torch.zeros(n, dtype=torch.float32, device=picked.device)
        entropy[scored] = entropy_k
    return logprobs, entropy


class SelectedLogprobs(torch.autograd.Function):
    """log softmax(logits)[target] per row, and the rows' entropies, a few rows at a time.

    Autograd's `gather - logsumexp` makes several [K, V] temporaries in the forward and the
    backward (and a zero-filled one for the gather); over a 151,936-wide vocabulary those
    passes cost more than the output layer's matmul. Here every elementwise pass runs on a
    chunk of rows small enough to stay off the allocator's mmap path, and the backward writes
    the gradient `g * (onehot(target) - softmax)` once. Entropy (no gradient) is
    `lse - sum(p * logits)` from the same exponentials.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, targets: torch.Tensor, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = logits.shape[0]
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
        entropy = torch.zeros(rows if with_entropy else 0, device=logits.device)
        step = _chunk_rows(logits)
        for start in range(0, rows, step):
            x = logits[start : start + step].float()
            peak = x.amax(-1, keepdim=True)
            e = (x - peak).exp_()
            total = e.sum(-1)
            lse[start : start + step] = peak[:, 0] + total.log()
            if with_entropy:
                mean_logit = (e.mul_(x)).sum(-1) / total
                entropy[start : start + step] = lse[start : start + step] - mean_logit
        picked = logits.gather(-1, targets[:, None])[:, 0].float() - lse
        ctx.save_for_backward(logits, targets, lse)
        ctx.mark_non_differentiable(entropy)
        return picked, entropy

    @staticmethod
    def backward(
        ctx: Any, grad_picked: torch.Tensor, _grad_entropy: torch.Tensor
    ) -> tuple[torch.Tensor, None, None]:
        logits, targets, lse = ctx.saved_tensors
        grad = torch.empty_like(logits)
        step = _chunk_rows(logits)
        for start in range(0, logits.shape[0], step):
            stop = start + step
            p = (logits[start:stop].float() - lse[start:stop, None]).exp_()
            grad[start:stop] = p.mul_(-grad_picked[start:stop, None])
        rows = torch.arange(logits.shape[0], device=logits.device)
        grad[rows, targets] += grad_picked.to(grad.dtype)
        return grad, None, None


def _chunk_rows(logits: torch.Tensor) -> int:
    """Rows per chunk: about 8 MiB of float32 temporaries."""
    return max(1, (8 << 20) // (4 * max(1, logits.shape[-1])))


def loss_inputs(
    mb: MicroBatch, logprobs: torch.Tensor, entropy: torch.Tensor | None
) -> PolicyLossInputs:
    """The loss function's view of a micro-batch."""
    return PolicyLossInputs(
        logprobs=logprobs,
        sampler_logprobs=mb.sampler_logprobs,
        advantages=mb.advantages,
        loss_mask=mb.loss_mask,
        loss_weights=mb.loss_weights,
        seq_ids=mb.seq_ids,
        old_logprobs=mb.old_logprobs,
        ref_logprobs=mb.ref_logprobs,
        entropy=entropy,
        weight_versions=mb.weight_versions,
    )
