"""Teacher-forced logprobs of chosen tokens under a causal LM (the trainer-side forward pass).

Only the positions that are asked for get logits (`logits_to_keep` with an index tensor), so a
long trajectory never materializes a sequence-by-vocabulary logits matrix. Log-softmax runs in
float32 whatever the model's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


def token_logprobs(
    model: PreTrainedModel,
    token_ids: Sequence[int],
    positions: Sequence[int],
    temperature: float = 1.0,
) -> torch.Tensor:
    """log p(token_ids[i] | token_ids[:i]) for each i in `positions` (each i >= 1), float32,
    under the distribution tempered by `temperature` (the one a sampler at that temperature
    draws from and reports logprobs of)."""
    import torch

    if not positions:
        return torch.zeros(0)
    if min(positions) < 1:
        raise ValueError("position 0 has no prefix to condition on")
    device = next(model.parameters()).device
    ids = torch.tensor([list(token_ids)], device=device)
    keep = torch.tensor([p - 1 for p in positions], device=device)
    with torch.no_grad():
        logits = model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits[0]
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    targets = torch.tensor([token_ids[p] for p in positions], device=device)
    return logp.gather(-1, targets[:, None])[:, 0].cpu()
