"""Loss reductions as per-token weights, fixed once for the whole batch.

A reduction turns per-token losses into the batch loss. Written as a weight on every token,
`loss = sum_t w_t * loss_t`, it no longer depends on how the trainer packs sequences into
micro-batches: each micro-batch contributes `(w * loss).sum()` over its own tokens and the
contributions add up to the batch loss, so gradient accumulation needs no rescaling. The
denominators (token counts, sequence counts, group counts, the length constant) are therefore
taken over the whole batch here, never per micro-batch.

Only trained tokens (loss_mask 1) get weight. A sequence with no trained token counts for
nothing, also not in the number of sequences; likewise a group with no trained token.

Shape legend: T tokens of one sequence. Lists run over the batch's sequences; a mask may be a
tensor or a list of 0/1.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import torch
from pydantic import Field

from bureau.config import StrictModel

Reduction = Literal["token_mean", "sequence_mean", "prompt_mean", "seq_mean_token_sum_norm"]


class ReductionConfig(StrictModel):
    """How per-token losses are averaged into the batch loss."""

    reduction: Reduction = "token_mean"
    """`token_mean`, `sequence_mean`, `prompt_mean` or `seq_mean_token_sum_norm` (Dr. GRPO)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """The constant divisor of `seq_mean_token_sum_norm`; None uses the batch's largest number
    of trained tokens in one sequence."""


def loss_weights(
    loss_masks: Sequence[torch.Tensor | Sequence[int]],
    group_ids: Sequence[Hashable],
    config: ReductionConfig,
    dtype: torch.dtype = torch.float32,
) -> list[torch.Tensor]:
    """Each sequence's per-token weights under the configured reduction (0 where the mask is 0).

    With n_i trained tokens in sequence i, S sequences with n_i > 0, and Gr groups with trained
    tokens (N_g = sum of n_i over group g's sequences), a trained token of sequence i in group g
    weighs:

    - `token_mean`: 1 / sum_i n_i. Every trained token of the batch weighs the same (DAPO's
      token-level loss, Yu et al. 2025, arXiv:2503.14476).
    - `sequence_mean`: 1 / (S * n_i). Mean over each sequence's tokens, then over sequences
      (the original GRPO objective, Shao et al. 2024, arXiv:2402.03300).
    - `prompt_mean`: 1 / (Gr * N_g). Mean over the tokens of all of the group's sequences
      together (a token mean within the group, so a group's long answers weigh more than its
      short ones), then mean over groups: every prompt weighs the same.
    - `seq_mean_token_sum_norm`: 1 / (S * L), L = `max_tokens` or max_i n_i. A sequence's token
      sum divided by a constant, then mean over sequences (Dr. GRPO, Liu et al. 2025,
      arXiv:2503.20783): no per-sequence length normalisation, so no length bias. Its weights
      sum to mean_i(n_i) / L, not 1.

    The other three reductions' weights sum to 1 (0 when nothing is trained).
    """
    if len(loss_masks) != len(group_ids):
        raise ValueError(f"{len(loss_masks)} loss masks but {len(group_ids)} group ids")
    trained_T = [(torch.as_tensor(mask) != 0).to(torch.float64) for mask in loss_masks]
    counts = [float(t.sum()) for t in trained_T]
    num_sequences = sum(n > 0 for n in counts)

    if config.reduction == "token_mean":
        total = sum(counts)
        scales = [1.0 / total if total > 0 else 0.0 for _ in counts]
    elif config.reduction == "sequence_mean":
        scales = [1.0 / (num_sequences * n) if n > 0 else 0.0 for n in counts]
    elif config.reduction == "prompt_mean":
        group_tokens: dict[Hashable, float] = {}
        for group_id, n in zip(group_ids, counts, strict=True):
            group_tokens[group_id] = group_tokens.get(group_id, 0.0) + n
        num_groups = sum(n > 0 for n in group_tokens.values())
        scales = [
            1.0 / (num_groups * group_tokens[g]) if n > 0 else 0.0
            for g, n in zip(group_ids, counts, strict=True)
        ]
    else:
        length = (
            float(config.max_tokens) if config.max_tokens is not None else max(counts, default=0)
        )
        scales = [1.0 / (num_sequences * length) if n > 0 else 0.0 for n in counts]
    return [(t * scale).to(dtype) for t, scale in zip(trained_T, scales, strict=True)]
