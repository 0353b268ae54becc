"""The output layer fused with the token logprob: no [N, V] logits tensor, forward or backward.

With a 151,936-token vocabulary a small model's training step is the output layer: N scored
positions make an N x V logits matrix (670 MB in float32 for 1,100 positions), then as many
bytes again for its gradient, each a fresh allocation (the allocator maps and zero-fills the
pages every time) walked by several elementwise passes. `LinearLogprobs` computes
`log softmax(h W^T / T)[target]` (and the entropy, as a metric) a block of the vocabulary at a
time, with an online logsumexp, so every temporary stays small; the backward recomputes each
block's logits (one more matmul) and accumulates the gradients of `h` and `W` from it. The
same idea as Liger Kernel's fused linear cross-entropy and Apple's Cut Cross-Entropy, written
for this trainer's needs: per-token logprobs under a temperature, for any loss.

`fused_head(model)` runs it inside the model's own forward, in place of `lm_head` (so FSDP2
still unshards and reduces the weight as for any parameter of the root module); models whose
output layer is not a plain bias-free linear map keep the logits path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel

BLOCK_BYTES = 8 << 20
"""About this many bytes of float32 logits per block."""


def _blocks(rows: int, vocab: int) -> Iterator[tuple[int, int]]:
    width = max(256, BLOCK_BYTES // (4 * max(1, rows)))
    for start in range(0, vocab, width):
        yield start, min(vocab, start + width)


class LinearLogprobs(torch.autograd.Function):
    """[N] log softmax(h W^T / temperature)[target] and [N] entropies (no gradient).

    h: [N, H] hidden states, W: [V, H] output weights, targets: [N] token ids. Matmuls run in
    W's dtype (in autocast's dtype under autocast, as `nn.Linear` would), everything else in
    float32 (or W's dtype when wider); the gradients come back in the inputs' dtypes.
    """

    @staticmethod
    def forward(
        ctx: Any,
        h: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        temperature: float,
        with_entropy: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows, acc = h.shape[0], _wide(weight)
        mm = _matmul_dtype(weight)
        x, w = h.to(mm), weight.to(mm)
        peak = torch.full((rows,), -torch.inf, dtype=acc, device=x.device)
        total = torch.zeros(rows, dtype=acc, device=x.device)
        weighted = torch.zeros(rows if with_entropy else 0, dtype=acc, device=x.device)
        target_logit = torch.zeros(rows, dtype=acc, device=x.device)
        for start, stop in _blocks(rows, w.shape[0]):
            z = (x @ w[start:stop].T).to(acc).div_(temperature)
            hit = ((targets >= start) & (targets < stop)).nonzero()[:, 0]
            target_logit[hit] = z[hit, targets[hit] - start]  # the very logit the sum saw
            new_peak = torch.maximum(peak, z.amax(-1))
            rescale = (peak - new_peak).exp_()
            e = (z - new_peak[:, None]).exp_()
            total.mul_(rescale).add_(e.sum(-1))
            if with_entropy:
                weighted.mul_(rescale).add_(e.mul_(z).sum(-1))
            peak = new_peak
        lse = peak + total.log()
        entropy = lse - weighted / total if with_entropy else weighted
        ctx.save_for_backward(x, w, targets, lse)
        ctx.temperature = temperature
        ctx.dtypes = (h.dtype, weight.dtype)
        ctx.mark_non_differentiable(entropy)
        return target_logit - lse, entropy

    @staticmethod
    def backward(
        ctx: Any, grad_picked: torch.Tensor, _grad_entropy: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None, None]:
        x, weight, targets, lse = ctx.saved_tensors
        h_dtype, weight_dtype = ctx.dtypes
        acc = torch.promote_types(weight_dtype, torch.float32)
        scale = grad_picked.to(acc) / ctx.temperature  # d picked / d z, times d z / d h = W / T
        grad_x = torch.zeros(x.shape, dtype=acc, device=x.device)
        grad_w = torch.zeros(weight.shape, dtype=acc, device=x.device)
        for start, stop in _blocks(x.shape[0], weight.shape[0]):
            block = weight[start:stop]
            z = (x @ block.T).to(acc).div_(ctx.temperature)
            # d picked / d z = onehot(target) - softmax(z); the onehot part is added below
            q = (z - lse[:, None]).exp_().mul_(-scale[:, None]).to(weight.dtype)
            grad_x.add_(q @ block)
            grad_w[start:stop].add_(q.T @ x)
        grad_x.add_(weight[targets].to(acc) * scale[:, None])
        grad_w.index_add_(0, targets, x.to(acc) * scale[:, None])
        grad_h = grad_x.to(h_dtype) if ctx.needs_input_grad[0] else None
        grad_weight = grad_w.to(weight_dtype) if ctx.needs_input_grad[1] else None
        return grad_h, grad_weight, None, None, None


def _wide(weight: torch.Tensor) -> torch.dtype:
    return torch.promote_types(weight.dtype, torch.float32)


def _matmul_dtype(weight: torch.Tensor) -> torch.dtype:
    device = weight.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return weight.dtype


@dataclass
class HeadRequest:
    """What the fused output layer computes during one forward, and what it gives back."""

    rows: torch.Tensor
    """[N] row of the hidden-state tensor [R, K, H] the output layer receives, per position."""
    slots: torch.Tensor
    """[N] index into its K kept positions."""
    targets: torch.Tensor
    """[N] the token each position is scored on."""
    temperature: float
    with_entropy: bool
    picked: torch.Tensor | None = field(default=None, init=False)
    entropy: torch.Tensor | None = field(default=None, init=False)


def can_fuse(model: PreTrainedModel) -> bool:
    """A plain bias-free linear output layer, and no logit post-processing (softcapping)."""
    head = model.get_output_embeddings()
    config = model.config
    return (
        type(head) is torch.nn.Linear
        and head.bias is None
        and getattr(config, "final_logit_softcapping", None) is None
        and getattr(config, "logit_scale", None) is None
    )


@contextmanager
def fused_head(model: PreTrainedModel, request: HeadRequest) -> Iterator[HeadRequest]:
    """Within the block, the model's output layer fills `request` instead of making logits
    (the model's `logits` output is then the [N] logprobs, not [R, K, V])."""
    head = model.get_output_embeddings()
    assert isinstance(head, torch.nn.Linear)

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        h = hidden[request.rows, request.slots]
        picked, entropy = LinearLogprobs.apply(
            h, head.weight, request.targets, request.temperature, request.with_entropy
        )
        request.picked, request.entropy = picked, entropy
        return picked

    head.forward = forward  # type: ignore[method-assign,assignment]
    try:
        yield request
    finally:
        del head.forward  # back to the class's method
