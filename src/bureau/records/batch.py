"""What the trainer trains on: per-sequence token lists with per-token fields.

Every per-token field of sequence b has its length L_b and lines up with `token_ids[b]`, as in
a trajectory record: the value at position i belongs to token i, predicted from tokens [0, i).
Position 0 has no prefix, so `loss_mask[b][0]` must be 0.

    token_ids  [[1, 2, 3, 10, 11]]
    loss_mask  [[0, 0, 0,  1,  1]]         1 on sampled tokens that are trained on
    advantages [[0, 0, 0, .5, .5]]         the algorithm's per-token advantages
    loss_weights [[0, 0, 0, .25, .25]]     the reduction's batch-wide weight of each token

The trainer is algorithm-blind: advantages and loss weights come computed (see
`bureau.algo.reductions`); loss weights sum over the whole batch, so micro-batch losses add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TypeVar

_Row = TypeVar("_Row")


@dataclass
class TrainBatch:
    """B sequences; each per-token field is a list of B lists, the b-th of length L_b.

    The rollout side fills `token_ids`, `loss_mask`, `sampler_logprobs` and `weight_versions`
    from trajectory records, the algorithm fills `advantages` and `loss_weights`, and the
    trainer fills `old_logprobs` and `ref_logprobs` when a loss needs them.
    """

    token_ids: list[list[int]]
    """[B][L_b] token ids: prompt, observations and sampled completions (rollout side)."""
    loss_mask: list[list[int]]
    """[B][L_b] 1 on sampled tokens that are trained on, else 0 (always 0 at position 0)."""
    sampler_logprobs: list[list[float]]
    """[B][L_b] the engine's logprob of each sampled token, natural log (any finite elsewhere)."""
    advantages: list[list[float]]
    """[B][L_b] per-token advantages from the algorithm (0 off the loss mask)."""
    loss_weights: list[list[float]]
    """[B][L_b] batch-wide reduction weights from the algorithm (0 off the loss mask)."""
    weight_versions: list[list[int]] | None = None
    """[B][L_b] the weight version that sampled each token (-1 off the mask), for metrics."""
    old_logprobs: list[list[float]] | None = None
    """[B][L_b] recomputed logprobs before this step's update (`Trainer.compute_logprobs`)."""
    ref_logprobs: list[list[float]] | None = None
    """[B][L_b] logprobs under a frozen reference model, for a KL penalty."""

    def __post_init__(self) -> None:
        lengths = self.lengths
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or f.name == "token_ids":
                continue
            if len(value) != len(lengths):
                raise ValueError(f"{f.name} has {len(value)} sequences, token_ids {len(lengths)}")
            for b, (row, n) in enumerate(zip(value, lengths, strict=True)):
                if len(row) != n:
                    raise ValueError(f"{f.name}[{b}] has {len(row)} values for {n} tokens")
        for b, mask in enumerate(self.loss_mask):
            if not mask:
                raise ValueError(f"sequence {b} is empty")
            if mask[0]:
                raise ValueError(f"loss_mask[{b}][0] is set: the first token has no prefix")

    @property
    def lengths(self) -> list[int]:
        return [len(s) for s in self.token_ids]

    @property
    def num_sequences(self) -> int:
        return len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return sum(self.lengths)

    def select(self, indices: Sequence[int]) -> TrainBatch:
        """The sub-batch of these sequences, in this order."""
        return TrainBatch(
            token_ids=[self.token_ids[i] for i in indices],
            loss_mask=[self.loss_mask[i] for i in indices],
            sampler_logprobs=[self.sampler_logprobs[i] for i in indices],
            advantages=[self.advantages[i] for i in indices],
            loss_weights=[self.loss_weights[i] for i in indices],
            weight_versions=_pick(self.weight_versions, indices),
            old_logprobs=_pick(self.old_logprobs, indices),
            ref_logprobs=_pick(self.ref_logprobs, indices),
        )

    @classmethod
    def for_scoring(
        cls, token_ids: Sequence[Sequence[int]], loss_mask: Sequence[Sequence[int]] | None = None
    ) -> TrainBatch:
        """A batch to score with `Trainer.compute_logprobs`: zeros in the training fields.

        Without a loss mask every position but the first is scored.
        """
        ids = [list(s) for s in token_ids]
        mask = (
            [list(m) for m in loss_mask]
            if loss_mask is not None
            else [[0] + [1] * (len(s) - 1) for s in ids]
        )
        zeros = [[0.0] * len(s) for s in ids]
        return cls(ids, mask, zeros, [list(z) for z in zeros], [list(z) for z in zeros])


def _pick(rows: list[_Row] | None, indices: Sequence[int]) -> list[_Row] | None:
    return None if rows is None else [rows[i] for i in indices]
