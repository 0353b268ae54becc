"""Drawing the next token of each row of a batch, each with its own request's parameters.

Temperature 0 is greedy; otherwise a row is drawn from softmax(logits / temperature), cut to the
top-p nucleus, by inverse CDF (`cumsum` and `searchsorted`): `torch.multinomial` over a
151,936-wide vocabulary costs about 6 ms a row on CPU, the inverse CDF about 0.4 ms. A seeded
request draws from its own generator, so its sample does not depend on its batch neighbours.
Legend: N rows, S sampled (non-greedy) rows, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from bureau.inference.client import SamplingParams

# Nucleus sampling first looks for the nucleus among this many top tokens, then sorts the row.
NUCLEUS_TOP_K = 1024


def draw(
    logits_NV: torch.Tensor,
    params: Sequence[SamplingParams | None],
    generators: Sequence[torch.Generator | None],
    fallback: torch.Generator,
) -> torch.Tensor:
    """One token id per row: greedy for temperature 0 (or no params), else sampled."""
    import torch

    n, vocab = logits_NV.shape
    tokens_N = torch.empty(n, dtype=torch.long, device=logits_NV.device)
    greedy = [i for i, p in enumerate(params) if p is None or p.temperature == 0]
    drawn = [i for i, p in enumerate(params) if p is not None and p.temperature != 0]
    if greedy:
        tokens_N[greedy] = logits_NV[greedy].argmax(dim=-1)
    if not drawn:
        return tokens_N
    picked = [params[i] for i in drawn]
    temps = torch.tensor([p.temperature for p in picked if p is not None], dtype=logits_NV.dtype)
    probs_SV = torch.softmax(logits_NV[drawn] / temps.to(logits_NV.device)[:, None], dim=-1)
    for row, p in enumerate(picked):
        if p is not None and p.top_p < 1:
            probs_SV[row] = nucleus(probs_SV[row], p.top_p)
    cdf_SV = probs_SV.cumsum(dim=-1)
    uniforms = [
        float(torch.rand((), generator=generators[i] or fallback, dtype=torch.float64))
        for i in drawn
    ]
    targets = torch.tensor(uniforms, dtype=cdf_SV.dtype, device=cdf_SV.device) * cdf_SV[:, -1]
    index_S = torch.searchsorted(cdf_SV, targets[:, None], right=True).squeeze(1)
    index_S.clamp_(max=vocab - 1)
    # A target rounded onto the total could land on a zero-probability tail token.
    empty = probs_SV.gather(1, index_S[:, None]).squeeze(1) <= 0
    if bool(empty.any()):
        index_S[empty] = probs_SV[empty].argmax(dim=-1)
    tokens_N[drawn] = index_S
    return tokens_N


def nucleus(probs_V: torch.Tensor, top_p: float) -> torch.Tensor:
    """`probs_V` with the tokens outside the top-p nucleus zeroed (unnormalized).

    The nucleus is the smallest set of most likely tokens whose mass reaches `top_p`: a token
    stays when the mass of the tokens ranked above it is below `top_p`.
    """
    import torch

    values, indices = probs_V.topk(min(NUCLEUS_TOP_K, probs_V.shape[0]))
    if float(values.sum()) < top_p:
        values, indices = probs_V.sort(descending=True)
    keep = (values.cumsum(0) - values) < top_p
    out = torch.zeros_like(probs_V)
    out[indices[keep]] = values[keep]
    return out


def sampled_logprobs(
    logits_NV: torch.Tensor, tokens_N: torch.Tensor, params: Sequence[SamplingParams | None]
) -> torch.Tensor:
    """log softmax(logits / temperature)[token] per row, in float32.

    The temperature is the row's own; a greedy row (temperature 0, or no params) gets the raw
    logits' logprob. Top-p truncation is not applied: the result is the logprob a trainer's
    forward pass at the same temperature computes.
    """
    import torch

    temps = [p.temperature if p is not None and p.temperature > 0 else 1.0 for p in params]
    logits = logits_NV.float()
    if any(t != 1.0 for t in temps):
        logits = logits / torch.tensor(temps, dtype=logits.dtype, device=logits.device)[:, None]
    return torch.log_softmax(logits, dim=-1).gather(1, tokens_N[:, None]).squeeze(1)
