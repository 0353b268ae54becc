"""Token-budget packing: which sequences share a micro-batch, and how they are laid out.

Sequences are packed end to end into one row of at most `token_budget` tokens. Position ids
restart at 0 for every sequence and attention never crosses a boundary, so a packed forward
gives each sequence exactly the logits it would get alone:

    seqs [1, 2, 3], [4, 5]  ->  input_ids [1, 2, 3, 4, 5]  position_ids [0, 1, 2, 0, 1]
                                seq_ids   [0, 0, 0, 1, 1]

Hugging Face models derive the isolation from the restarting position ids (packed sequences
with no 2-D attention mask and no cache): flash attention turns them into varlen `cu_seqlens`,
and sdpa, eager and flex attention build a block-diagonal causal mask.
`bureau.trainer.forward.block_causal_mask` builds that mask explicitly, for models whose mask
code does not detect packing.

Micro-batches are balanced by estimated cost, not tokens: a sequence of length L costs
`a·L + L²`, the linear layers (about `24·d²` FLOPs per token and layer for hidden size d)
against attention (about `4·d` FLOPs per pair of tokens and layer), so `a ≈ 6·d`. Balancing
matters between data-parallel ranks (a step waits for the slowest) and for peak memory.

A sequence longer than the budget gets a micro-batch of its own; it is never truncated.
Padding waste is reported per step: padded positions over all positions computed.

The plain baseline, `fixed` micro-batches of n sequences padded to the longest, is kept for
comparison (`bench/packing.py`). Legend: T tokens of a micro-batch row, R rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from bureau.config import StrictModel


class PackingConfig(StrictModel):
    """How a batch's sequences are split into micro-batches."""

    mode: Literal["budget", "fixed"] = "budget"
    """budget: pack end to end up to `token_budget`; fixed: `fixed_size` sequences, padded."""
    token_budget: int = Field(default=4096, ge=1)
    """Most tokens in one packed micro-batch (a longer sequence gets one of its own)."""
    cost_linear: float | None = Field(default=None, ge=0)
    """`a` in the cost `a·L + L²` of a sequence; None: 6 × the model's hidden size."""
    pad_multiple: int = Field(default=1, ge=1)
    """Pad each packed row to a multiple of this many tokens (fixed shapes for kernels)."""
    fixed_size: int = Field(default=4, ge=1)
    """Sequences per micro-batch in `fixed` mode."""


def sequence_cost(length: int, cost_linear: float) -> float:
    """Estimated forward-backward cost of one sequence: `a·L + L²`."""
    return cost_linear * length + float(length) * length


@dataclass(frozen=True)
class MicroBatchPlan:
    """The batch indices of one micro-batch's sequences, in batch order."""

    seq_indices: tuple[int, ...]
    num_tokens: int
    cost: float


def _open_bins(count: int) -> list[list[int]]:
    return [[] for _ in range(count)]


def _lpt(
    lengths: Sequence[int], order: Sequence[int], budget: int, a: float, initial: int
) -> list[list[int]]:
    """Longest first into the cheapest bin with room; a new bin when none has room."""
    bins = _open_bins(initial)
    tokens = [0] * initial
    costs = [0.0] * initial
    for i in order:
        length = lengths[i]
        fits = [b for b in range(len(bins)) if tokens[b] + length <= budget]
        if fits:
            b = min(fits, key=lambda k: (costs[k], k))
        else:
            bins.append([])
            tokens.append(0)
            costs.append(0.0)
            b = len(bins) - 1
        bins[b].append(i)
        tokens[b] += length
        costs[b] += sequence_cost(length, a)
    return bins


def plan_micro_batches(
    lengths: Sequence[int],
    token_budget: int,
    cost_linear: float,
    *,
    num_ranks: int = 1,
) -> list[list[MicroBatchPlan]]:
    """Micro-batches for each rank: every rank gets the same number of them.

    Sequences go longest first into the cheapest micro-batch that still has room in the token
    budget (LPT scheduling), starting from the fewest micro-batches the budget allows, rounded
    up to a multiple of `num_ranks`. Sequences longer than the budget each get one of their own.
    Micro-batches are then dealt to ranks, most expensive first, to the cheapest rank that still
    needs one. A rank may get an empty micro-batch (no sequences) when there are too few; the
    trainer still runs it, with zero weight, because sharded ranks must take part in every
    collective.
    """
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    if num_ranks < 1:
        raise ValueError("num_ranks must be positive")
    if any(n < 1 for n in lengths):
        raise ValueError("every sequence needs at least one token")
    a = cost_linear
    oversized = [i for i, n in enumerate(lengths) if n > token_budget]
    fitting = [i for i, n in enumerate(lengths) if n <= token_budget]
    order = sorted(fitting, key=lambda i: (-lengths[i], i))
    fitting_tokens = sum(lengths[i] for i in fitting)
    wanted = len(oversized) + math.ceil(fitting_tokens / token_budget)
    wanted = max(num_ranks, math.ceil(wanted / num_ranks) * num_ranks)
    bins: list[list[int]] = []
    for _ in range(4):
        # LPT may need more micro-batches than the token count alone says (fragmentation);
        # start over with a rank-multiple count so that every rank stays busy.
        bins = _lpt(lengths, order, token_budget, a, wanted - len(oversized))
        bins = [[i] for i in oversized] + bins
        if len(bins) % num_ranks == 0:
            break
        wanted = math.ceil(len(bins) / num_ranks) * num_ranks
    while len(bins) % num_ranks:
        bins.append([])
    plans = [
        MicroBatchPlan(
            tuple(sorted(b)),
            sum(lengths[i] for i in b),
            sum(sequence_cost(lengths[i], a) for i in b),
        )
        for b in bins
    ]
    return deal_to_ranks(plans, num_ranks)


def fixed_micro_batches(
    lengths: Sequence[int], size: int, *, num_ranks: int = 1
) -> list[list[MicroBatchPlan]]:
    """The baseline: consecutive groups of `size` sequences, dealt round-robin to ranks."""
    groups = [list(range(s, min(s + size, len(lengths)))) for s in range(0, len(lengths), size)]
    while len(groups) % num_ranks or not groups:
        groups.append([])
    plans = [MicroBatchPlan(tuple(g), sum(lengths[i] for i in g), 0.0) for g in groups]
    return [plans[r::num_ranks] for r in range(num_ranks)]


def deal_to_ranks(plans: Sequence[MicroBatchPlan], num_ranks: int) -> list[list[MicroBatchPlan]]:
    """Most expensive first, each to the cheapest rank that still needs micro-batches."""
    if len(plans) % num_ranks:
        raise ValueError(f"{len(plans)} micro-batches do not split over {num_ranks} ranks")
    per_rank = len(plans) // num_ranks
    ranks: list[list[MicroBatchPlan]] = [[] for _ in range(num_ranks)]
    load = [0.0] * num_ranks
    for plan in sorted(plans, key=lambda p: (-p.cost, -p.num_tokens, p.seq_indices)):
        open_ranks = [r for r in range(num_ranks) if len(ranks[r]) < per_rank]
        r = min(open_ranks, key=lambda k: (load[k], k))
        ranks[r].append(plan)
        load[r] += plan.cost
    for rank in ranks:
        rank.sort(key=lambda p: p.seq_indices[:1] or (math.inf,))
    return ranks


@dataclass(frozen=True)
class PackedLayout:
    """The token layout of one micro-batch: R rows of W positions (R = 1 when packed).

    `token_index` lists, in sequence order, the flat position (row * W + column) of every real
    token, so a per-token field concatenated over the micro-batch's sequences lines up with it.
    Padding takes positions that are not in `token_index`.
    """

    input_ids: list[list[int]]
    """[R][W] token ids, padding included."""
    position_ids: list[list[int]]
    """[R][W] position of each token within its own sequence (padding restarts at 0 too)."""
    attention_mask: list[list[int]] | None
    """[R][W] 1 on real tokens, 0 on padding; None when packed (isolation by position ids)."""
    token_index: list[int]
    """[N] flat positions of the real tokens, in sequence order."""
    seq_ids: list[int]
    """[N] index of each real token's sequence within the micro-batch."""
    seq_lengths: list[int]
    """Length of each sequence of the micro-batch."""

    @property
    def num_positions(self) -> int:
        return len(self.input_ids) * (len(self.input_ids[0]) if self.input_ids else 0)

    @property
    def num_padding(self) -> int:
        return self.num_positions - len(self.token_index)


def pack_row(seqs: Sequence[Sequence[int]], pad_id: int, pad_multiple: int = 1) -> PackedLayout:
    """Sequences end to end in one row; padding (if any) at the end, its positions restarting."""
    ids = [t for s in seqs for t in s]
    positions = [p for s in seqs for p in range(len(s))]
    seq_ids = [k for k, s in enumerate(seqs) for _ in s]
    n = len(ids)
    width = max(pad_multiple, math.ceil(n / pad_multiple) * pad_multiple) if n else pad_multiple
    pad = width - n
    return PackedLayout(
        input_ids=[ids + [pad_id] * pad],
        position_ids=[positions + list(range(pad))],
        attention_mask=None,
        token_index=list(range(n)),
        seq_ids=seq_ids,
        seq_lengths=[len(s) for s in seqs],
    )


def pad_rows(seqs: Sequence[Sequence[int]], pad_id: int) -> PackedLayout:
    """One sequence per row, right-padded to the longest (the `fixed` baseline)."""
    if not seqs:
        return pack_row([], pad_id)
    width = max(len(s) for s in seqs)
    token_index = [r * width + p for r, s in enumerate(seqs) for p in range(len(s))]
    return PackedLayout(
        input_ids=[list(s) + [pad_id] * (width - len(s)) for s in seqs],
        position_ids=[list(range(width)) for _ in seqs],
        attention_mask=[[1] * len(s) + [0] * (width - len(s)) for s in seqs],
        token_index=token_index,
        seq_ids=[k for k, s in enumerate(seqs) for _ in s],
        seq_lengths=[len(s) for s in seqs],
    )
