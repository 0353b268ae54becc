"""Packing on literal ids: layouts, position ids, masks, budgets, balance and rank shares."""

from __future__ import annotations

import pytest

from bureau.trainer.packing import (
    MicroBatchPlan,
    deal_to_ranks,
    fixed_micro_batches,
    pack_row,
    pad_rows,
    plan_micro_batches,
    sequence_cost,
)


def test_pack_row_lays_sequences_end_to_end_with_positions_restarting() -> None:
    layout = pack_row([[1, 2, 3], [4, 5]], pad_id=0)
    assert layout.input_ids == [[1, 2, 3, 4, 5]]
    assert layout.position_ids == [[0, 1, 2, 0, 1]]
    assert layout.seq_ids == [0, 0, 0, 1, 1]
    assert layout.token_index == [0, 1, 2, 3, 4]
    assert layout.attention_mask is None
    assert layout.num_padding == 0


def test_pack_row_pads_to_a_multiple_with_padding_as_its_own_block() -> None:
    layout = pack_row([[1, 2, 3], [4, 5]], pad_id=9, pad_multiple=4)
    assert layout.input_ids == [[1, 2, 3, 4, 5, 9, 9, 9]]
    assert layout.position_ids == [[0, 1, 2, 0, 1, 0, 1, 2]]
    assert layout.token_index == [0, 1, 2, 3, 4]
    assert layout.num_positions == 8
    assert layout.num_padding == 3


def test_pad_rows_is_one_padded_row_per_sequence() -> None:
    layout = pad_rows([[1, 2, 3], [4, 5]], pad_id=9)
    assert layout.input_ids == [[1, 2, 3], [4, 5, 9]]
    assert layout.position_ids == [[0, 1, 2], [0, 1, 2]]
    assert layout.attention_mask == [[1, 1, 1], [1, 1, 0]]
    assert layout.token_index == [0, 1, 2, 3, 4]  # row 1 starts at flat position 3
    assert layout.seq_ids == [0, 0, 0, 1, 1]
    assert layout.num_padding == 1


def test_block_causal_mask_is_block_diagonal_and_causal() -> None:
    import torch

    from bureau.trainer.forward import block_causal_mask

    mask = block_causal_mask(torch.tensor([[0, 1, 2, 0, 1]]))
    expected = [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 0, 0, 1, 0],
        [0, 0, 0, 1, 1],
    ]
    assert mask.shape == (1, 1, 5, 5)
    assert mask[0, 0].int().tolist() == expected
    # A one-token sequence next to another: [0] then [0, 1].
    assert block_causal_mask(torch.tensor([[0, 0, 1]]))[0, 0].int().tolist() == [
        [1, 0, 0],
        [0, 1, 0],
        [0, 1, 1],
    ]


def _indices(plans: list[list[MicroBatchPlan]]) -> list[list[tuple[int, ...]]]:
    return [[p.seq_indices for p in rank] for rank in plans]


def test_plan_fills_the_budget_and_keeps_every_sequence_once() -> None:
    lengths = [3, 2, 4, 1, 2]
    plans = plan_micro_batches(lengths, token_budget=6, cost_linear=0.0)
    assert len(plans) == 1
    flat = [i for p in plans[0] for i in p.seq_indices]
    assert sorted(flat) == [0, 1, 2, 3, 4]
    assert all(p.num_tokens <= 6 for p in plans[0])
    assert len(plans[0]) == 2  # 12 tokens in 2 micro-batches of at most 6


def test_a_sequence_over_the_budget_gets_a_micro_batch_of_its_own() -> None:
    plans = plan_micro_batches([10, 2, 3], token_budget=5, cost_linear=0.0)[0]
    alone = [p for p in plans if 0 in p.seq_indices]
    assert alone == [MicroBatchPlan((0,), 10, 100.0)]  # whole: 10 tokens, never truncated
    assert sorted(p.seq_indices for p in plans if p is not alone[0]) == [(1, 2)]


def test_plan_balances_cost_not_tokens() -> None:
    # By L² (a = 0) the 8 alone costs 64 and 4+4+1+1 costs 34: both 1s join the 4s.
    plans = plan_micro_batches([8, 4, 4, 1, 1], token_budget=10, cost_linear=0.0)[0]
    assert sorted(p.seq_indices for p in plans) == [(0,), (1, 2, 3, 4)]
    # When the linear term dominates, cost is tokens: 9 and 9.
    plans = plan_micro_batches([8, 4, 4, 1, 1], token_budget=10, cost_linear=1e6)[0]
    assert sorted(p.seq_indices for p in plans) == [(0, 4), (1, 2, 3)]
    assert sequence_cost(4, 2.0) == 2.0 * 4 + 16


def test_plan_gives_each_rank_the_same_number_of_micro_batches() -> None:
    lengths = [50, 3, 20, 20, 7, 9, 31, 2, 18]
    plans = plan_micro_batches(lengths, token_budget=40, cost_linear=1.0, num_ranks=2)
    assert len(plans) == 2
    assert len(plans[0]) == len(plans[1])
    flat = sorted(i for rank in plans for p in rank for i in p.seq_indices)
    assert flat == list(range(len(lengths)))
    # Balanced by cost across ranks: the heavier rank carries at most the lighter rank plus
    # its largest micro-batch.
    load = [sum(p.cost for p in rank) for rank in plans]
    biggest = max(p.cost for rank in plans for p in rank)
    assert max(load) - min(load) <= biggest


def test_too_few_sequences_leave_a_rank_an_empty_micro_batch() -> None:
    plans = plan_micro_batches([5], token_budget=8, cost_linear=0.0, num_ranks=2)
    assert _indices(plans) in ([[(0,)], [()]], [[()], [(0,)]])


def test_fixed_micro_batches_group_consecutive_sequences() -> None:
    plans = fixed_micro_batches([3, 1, 4, 1, 5], size=2)
    assert _indices(plans) == [[(0, 1), (2, 3), (4,)]]
    two = fixed_micro_batches([3, 1, 4, 1, 5], size=2, num_ranks=2)
    assert _indices(two) == [[(0, 1), (4,)], [(2, 3), ()]]


def test_deal_to_ranks_refuses_an_uneven_split() -> None:
    plan = MicroBatchPlan((0,), 1, 1.0)
    with pytest.raises(ValueError, match="do not split"):
        deal_to_ranks([plan], 2)


def test_plan_rejects_empty_sequences() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        plan_micro_batches([3, 0], token_budget=4, cost_linear=0.0)
