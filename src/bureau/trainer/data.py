"""From stored trajectory records to training batches.

Records come in prompt groups (`group_id`): advantages are relative to the group and the
`prompt_mean` reduction averages within it, so a batch always takes whole groups. The order of
groups is a pure function of the seed and the position in the stream (each pass over the data
is a fresh shuffle), so a resumed run continues with exactly the groups it had not seen yet.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from bureau.algo.advantages import AdvantageConfig, advantages_for_records, broadcast_advantage
from bureau.algo.reductions import ReductionConfig, loss_weights
from bureau.records import NOT_SAMPLED_VERSION, TrainBatch, TrajectoryRecord


@dataclass
class RecordBatch:
    """A training batch built from records, and what happened to the records left out."""

    batch: TrainBatch | None
    """None when no record of the groups was usable."""
    records: list[TrajectoryRecord]
    """The records trained on, in batch order."""
    excluded: dict[str, int] = field(default_factory=dict)
    """Records left out, by reason (the advantage filters, and `no_sampled_tokens`)."""
    mean_reward: float | None = None
    """Mean reward of the records that have one (trained on or not)."""


def records_to_batch(
    records: Sequence[TrajectoryRecord],
    advantages: AdvantageConfig,
    reduction: ReductionConfig,
) -> RecordBatch:
    """Advantages over the records' groups, then per-token advantages and loss weights.

    Records excluded by the advantage estimator (no reward, filtered groups) and records with no
    sampled token are left out of the batch; the loss weights are normalised over what remains.
    """
    import torch

    result = advantages_for_records(records, advantages)
    excluded = {str(k): v for k, v in result.excluded.items()}
    excluded["no_sampled_tokens"] = 0
    kept: list[tuple[TrajectoryRecord, float]] = []
    for record, advantage in zip(records, result.advantages, strict=True):
        if advantage is None:
            continue
        if not any(record.loss_mask):
            excluded["no_sampled_tokens"] += 1
            continue
        kept.append((record, advantage))
    rewards = [r.reward for r in records if r.reward is not None]
    mean_reward = sum(rewards) / len(rewards) if rewards else None
    if not kept:
        return RecordBatch(None, [], excluded, mean_reward)
    masks = [torch.tensor(r.loss_mask) for r, _ in kept]
    weights = loss_weights(masks, [r.group_id for r, _ in kept], reduction)
    share = advantages.malformed_turns == "share"
    batch = TrainBatch(
        token_ids=[list(r.token_ids) for r, _ in kept],
        loss_mask=[list(r.loss_mask) for r, _ in kept],
        sampler_logprobs=[list(r.sampler_logprobs) for r, _ in kept],
        advantages=[
            broadcast_advantage(
                a, mask, no_credit_T=None if share else torch.tensor(malformed_tokens(r))
            ).tolist()
            for (r, a), mask in zip(kept, masks, strict=True)
        ],
        loss_weights=[w.tolist() for w in weights],
        weight_versions=[list(r.weight_versions) for r, _ in kept],
    )
    return RecordBatch(batch, [r for r, _ in kept], excluded, mean_reward)


def malformed_tokens(record: TrajectoryRecord) -> list[int]:
    """1 on the sampled tokens of turns whose tool call could not be parsed, else 0.

    The sampled tokens (loss_mask 1) are the turns' completions, in order; a record whose
    masked tokens do not add up to its turns (edited by hand, or from before turns were kept)
    gets no marks rather than wrong ones.
    """
    marks = [0] * len(record.token_ids)
    sampled = [i for i, m in enumerate(record.loss_mask) if m]
    if len(sampled) != sum(len(t.completion_ids) for t in record.turns):
        return marks
    start = 0
    for turn in record.turns:
        end = start + len(turn.completion_ids)
        if turn.parse_error is not None:
            for i in sampled[start:end]:
                marks[i] = 1
        start = end
    return marks


def completions_to_batch(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    sampler_logprobs: Sequence[Sequence[float]],
    advantages: Sequence[float],
    group_ids: Sequence[Hashable],
    reduction: ReductionConfig | None = None,
    *,
    weight_version: int = 0,
) -> TrainBatch:
    """A batch of single-turn samples: each prompt followed by its sampled completion.

        prompt [1, 2, 3], completion [10, 11], advantage 0.5
        ->  token_ids [1, 2, 3, 10, 11]  loss_mask [0, 0, 0, 1, 1]  advantages [0, 0, 0, .5, .5]

    Loss weights follow `reduction` (token mean by default) over the whole batch.
    """
    import torch

    n = len(prompts)
    if not n == len(completions) == len(sampler_logprobs) == len(advantages) == len(group_ids):
        raise ValueError(
            "prompts, completions, logprobs, advantages and group ids differ in length"
        )
    token_ids, masks, logprobs, versions = [], [], [], []
    for prompt, completion, lp in zip(prompts, completions, sampler_logprobs, strict=True):
        if not prompt:
            raise ValueError("a prompt needs at least one token")
        if len(lp) != len(completion):
            raise ValueError(f"{len(completion)} completion ids but {len(lp)} logprobs")
        token_ids.append([*prompt, *completion])
        masks.append([0] * len(prompt) + [1] * len(completion))
        logprobs.append([0.0] * len(prompt) + [float(v) for v in lp])
        versions.append([NOT_SAMPLED_VERSION] * len(prompt) + [weight_version] * len(completion))
    tensors = [torch.tensor(m) for m in masks]
    weights = loss_weights(tensors, list(group_ids), reduction or ReductionConfig())
    return TrainBatch(
        token_ids=token_ids,
        loss_mask=masks,
        sampler_logprobs=logprobs,
        advantages=[
            broadcast_advantage(a, m).tolist() for a, m in zip(advantages, tensors, strict=True)
        ],
        loss_weights=[w.tolist() for w in weights],
        weight_versions=versions,
    )


class GroupStream:
    """An endless, seeded stream of whole prompt groups; `take(position, n)` is stateless.

    Groups are the records sharing a `group_id`, as the advantage estimator groups them.
    """

    def __init__(self, records: Sequence[TrajectoryRecord], seed: int = 0) -> None:
        groups: dict[str, list[TrajectoryRecord]] = {}
        for record in records:
            groups.setdefault(record.group_id, []).append(record)
        if not groups:
            raise ValueError("no trajectory records")
        self.groups = list(groups.values())
        self.seed = seed
        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            order = list(range(len(self.groups)))
            random.Random(f"{self.seed}/{epoch}").shuffle(order)
            self._orders = {epoch: order}  # positions only move forward
        return self._orders[epoch]

    def take(self, position: int, count: int) -> list[TrajectoryRecord]:
        """The records of groups [position, position + count) of the stream."""
        records: list[TrajectoryRecord] = []
        size = len(self.groups)
        for index in range(position, position + count):
            epoch, offset = divmod(index, size)
            records.extend(self.groups[self._order(epoch)[offset]])
        return records
