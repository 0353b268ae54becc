"""Loss reductions as batch-wide token weights, on literal masks and losses."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from bureau.algo.reductions import Reduction, ReductionConfig, loss_weights

# Four sequences: n = 2, 4, 1, 0 trained tokens; groups a, a, b, c.
MASKS = [
    torch.tensor([0, 1, 1]),
    torch.tensor([1, 1, 1, 1]),
    torch.tensor([0, 0, 1]),
    torch.tensor([0, 0]),
]
GROUPS = ["a", "a", "b", "c"]
# Untrained positions carry large losses: they must get zero weight.
LOSSES = [
    torch.tensor([9.0, 1.0, 2.0]),
    torch.tensor([1.0, 2.0, 3.0, 4.0]),
    torch.tensor([9.0, 9.0, 6.0]),
    torch.tensor([5.0, 5.0]),
]


def _weights(reduction: Reduction, max_tokens: int | None = None) -> list[torch.Tensor]:
    return loss_weights(MASKS, GROUPS, ReductionConfig(reduction=reduction, max_tokens=max_tokens))


def _value(weights: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([(w * loss).sum() for w, loss in zip(weights, LOSSES, strict=True)]).sum()


def test_token_mean() -> None:
    weights = _weights("token_mean")
    # 7 trained tokens, 1/7 each.
    s = 1 / 7
    assert_close(weights[0], torch.tensor([0, s, s]))
    assert_close(weights[1], torch.tensor([s, s, s, s]))
    assert_close(weights[2], torch.tensor([0, 0, s]))
    assert_close(weights[3], torch.tensor([0.0, 0.0]))
    # (1 + 2 + 1 + 2 + 3 + 4 + 6) / 7 = 19/7
    assert_close(_value(weights), torch.tensor(19 / 7))


def test_sequence_mean() -> None:
    weights = _weights("sequence_mean")
    # S = 3 sequences with trained tokens: 1/(3*2), 1/(3*4), 1/(3*1); the empty one counts not.
    assert_close(weights[0], torch.tensor([0, 1 / 6, 1 / 6]))
    assert_close(weights[1], torch.full((4,), 1 / 12))
    assert_close(weights[2], torch.tensor([0, 0, 1 / 3]))
    assert_close(weights[3], torch.zeros(2))
    # (3/2 + 10/4 + 6/1) / 3 = 10/3
    assert_close(_value(weights), torch.tensor(10 / 3))


def test_prompt_mean_is_a_token_mean_within_each_group() -> None:
    weights = _weights("prompt_mean")
    # Group a has 2 + 4 = 6 tokens, b has 1, c none -> 2 groups: 1/(2*6) and 1/(2*1).
    assert_close(weights[0], torch.tensor([0, 1 / 12, 1 / 12]))
    assert_close(weights[1], torch.full((4,), 1 / 12))
    assert_close(weights[2], torch.tensor([0, 0, 1 / 2]))
    assert_close(weights[3], torch.zeros(2))
    # ((1 + 2 + 1 + 2 + 3 + 4) / 6 + 6 / 1) / 2 = (13/6 + 6) / 2 = 49/12
    assert_close(_value(weights), torch.tensor(49 / 12))


def test_seq_mean_token_sum_norm() -> None:
    weights = _weights("seq_mean_token_sum_norm")
    # L = longest trained length 4, S = 3 -> 1/12 on every trained token.
    assert_close(weights[0], torch.tensor([0, 1 / 12, 1 / 12]))
    assert_close(weights[2], torch.tensor([0, 0, 1 / 12]))
    # (3/4 + 10/4 + 6/4) / 3 = 19/12; weights sum to mean(n)/L = (7/3)/4 = 7/12
    assert_close(_value(weights), torch.tensor(19 / 12))
    assert_close(sum(float(w.sum()) for w in weights), 7 / 12)
    # A configured constant L = 8: (3/8 + 10/8 + 6/8) / 3 = 19/24
    assert_close(_value(_weights("seq_mean_token_sum_norm", max_tokens=8)), torch.tensor(19 / 24))


@pytest.mark.parametrize("reduction", ["token_mean", "sequence_mean", "prompt_mean"])
def test_weights_sum_to_one(reduction: Reduction) -> None:
    assert_close(sum(float(w.sum()) for w in _weights(reduction)), 1.0)


@pytest.mark.parametrize(
    "reduction", ["token_mean", "sequence_mean", "prompt_mean", "seq_mean_token_sum_norm"]
)
def test_any_split_into_micro_batches_gives_the_batch_loss(reduction: Reduction) -> None:
    weights = _weights(reduction)
    total = _value(weights)
    # Micro-batches pack whole sequences in any order; each contributes (w * loss).sum() over
    # its packed tokens.
    for split in ([[0, 1, 2, 3]], [[3], [1, 0], [2]], [[2, 0], [3, 1]], [[0], [1], [2], [3]]):
        parts = []
        for micro in split:
            packed_w = torch.cat([weights[i] for i in micro])
            packed_loss = torch.cat([LOSSES[i] for i in micro])
            parts.append((packed_w * packed_loss).sum())
        assert_close(torch.stack(parts).sum(), total)


def test_nothing_trained_gives_zero_weights() -> None:
    for reduction in ("token_mean", "sequence_mean", "prompt_mean", "seq_mean_token_sum_norm"):
        weights = loss_weights(
            [torch.zeros(3), torch.zeros(1)], ["a", "b"], ReductionConfig(reduction=reduction)
        )
        assert all(float(w.abs().sum()) == 0.0 for w in weights)


def test_shapes_and_dtype_follow_the_masks() -> None:
    weights = loss_weights(MASKS, GROUPS, ReductionConfig(), dtype=torch.float64)
    assert [w.shape for w in weights] == [m.shape for m in MASKS]
    assert all(w.dtype == torch.float64 for w in weights)


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError, match="group ids"):
        loss_weights(MASKS, GROUPS[:2], ReductionConfig())
