"""The contract between the algorithm and the trainer.

The trainer packs sequences end to end into micro-batches and calls a `LossFn` on each, with
per-token tensors flattened over the micro-batch's packed sequences (shape [T]; legend: T tokens
of the micro-batch). A sequence is never split across micro-batches.

Loss reductions are per-token weights computed once for the whole batch (see
`bureau.algo.reductions`), so the sum over micro-batches of `(weights * per_token_loss).sum()`
is exactly the batch loss, whatever the packing: gradient accumulation needs no rescaling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


@dataclass
class PolicyLossInputs:
    """Per-token tensors of one micro-batch, all of shape [T] (T = tokens in the micro-batch).

    Positions with `loss_mask` 0 (prompts, observations, padding) carry any finite value in the
    float fields and must get zero weight.
    """

    logprobs: torch.Tensor
    """log pi_theta(token) under the current parameters (carries the gradient)."""
    sampler_logprobs: torch.Tensor
    """The logprob the inference engine reported when it sampled the token (behaviour policy)."""
    advantages: torch.Tensor
    """Per-token advantages, broadcast onto sampled tokens (0 elsewhere)."""
    loss_mask: torch.Tensor
    """1.0 on sampled tokens that are trained on, 0.0 elsewhere (float)."""
    loss_weights: torch.Tensor
    """The reduction's weight of each token for the whole batch (0 where loss_mask is 0)."""
    seq_ids: torch.Tensor
    """int64: index of each token's sequence within the micro-batch (for sequence masks)."""
    old_logprobs: torch.Tensor | None = None
    """Recomputed logprobs of the parameters before this step's update (proximal policy), if
    the trainer computed them; None means the sampler's stand in (fully on-policy)."""
    ref_logprobs: torch.Tensor | None = None
    """Logprobs under a frozen reference model, for an optional KL penalty."""
    entropy: torch.Tensor | None = None
    """Per-token entropy of the current policy (no gradient needed), for the metrics."""
    weight_versions: torch.Tensor | None = None
    """int64: the weight version that sampled each token (-1 off-mask), for staleness metrics."""


class LossFn(Protocol):
    def __call__(self, inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The micro-batch's loss (a scalar: the weighted sum over its tokens) and its metrics.

        Metrics are detached tensors that combine across micro-batches by their name's suffix,
        so a step's metrics cover the whole batch: `*_sum` and `*_count` are added, `*_max` and
        `*_min` take the extreme, `*_values` (1-D) are concatenated (for quantiles such as the
        p99 of the importance ratio).
        """
        ...
