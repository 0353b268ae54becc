"""Group-relative advantages: credit assignment once a prompt group is complete.

Every prompt is sampled G times; a trajectory's advantage is its reward measured against the
other rewards of its group, so no value model is needed. The advantage is a single number per
trajectory, broadcast onto its sampled tokens for the trainer.

Not every trajectory is usable. One that carries a system error has no reward (`None`): the
machinery failed, not the policy. The mask policy decides whether its whole group goes
(`mask_group`: the group's baseline would otherwise be computed from a biased subset, e.g. the
long trajectories that timed out are missing) or only the failed trajectory (`mask_trajectory`:
the baseline comes from the rest). A group whose usable rewards are all equal carries no
learning signal (every advantage is 0) and is filtered, as in DAPO's dynamic sampling.

Shape legend: G trajectories of one group, T tokens of one trajectory.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import Field

from bureau.config import StrictModel

if TYPE_CHECKING:
    from bureau.records import TrajectoryRecord

Estimator = Literal["grpo", "dr_grpo", "rloo"]
MaskPolicy = Literal["mask_group", "mask_trajectory"]
ExclusionReason = Literal["masked", "group_masked", "group_too_small", "zero_variance"]
EXCLUSION_REASONS: tuple[ExclusionReason, ...] = (
    "masked",
    "group_masked",
    "group_too_small",
    "zero_variance",
)


class AdvantageConfig(StrictModel):
    """How rewards become per-trajectory advantages."""

    estimator: Estimator = "grpo"
    """`grpo` (group mean baseline), `dr_grpo` (the same, never std-scaled) or `rloo`."""
    std_normalize: bool = True
    """Divide GRPO's centred rewards by the group's population std + eps (`grpo` only)."""
    eps: float = Field(default=1e-6, gt=0)
    """Added to the std before dividing, so near-constant groups do not explode."""
    zero_variance_tolerance: float = Field(default=1e-6, ge=0)
    """A group whose usable rewards span at most this much (max - min) is dropped."""
    mask_policy: MaskPolicy = "mask_group"
    """What a trajectory without reward takes with it: its whole group, or only itself."""
    min_group_size: int = Field(default=2, ge=2)
    """Fewest usable trajectories a group needs; a baseline from fewer is meaningless."""
    malformed_turns: Literal["no_credit", "share"] = "no_credit"
    """A turn whose tool call could not be parsed (the harness asked again): `no_credit` gives
    its tokens the trajectory's advantage only when it is negative; `share` gives them the
    trajectory's advantage like every other turn, so a trajectory that recovered and passed
    reinforces the malformed call along with the recovery."""


def grpo_advantages(
    rewards_G: torch.Tensor, std_normalize: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO: A_i = (r_i - mean(r)) / (std(r) + eps), or r_i - mean(r) without `std_normalize`.

    Shao et al. 2024, "DeepSeekMath" (arXiv:2402.03300), outcome supervision, Section 4.1.2.
    The std is the population std (divide by G, not G - 1): the group is standardised as it
    is, not used to estimate a larger population's spread, so the advantages have mean 0 and
    mean square 1 (as eps -> 0) whatever G is. The sample std would shrink every advantage by
    sqrt((G - 1) / G), most for small groups (0.71 at G = 2).
    """
    centred_G = rewards_G - rewards_G.mean()
    if not std_normalize:
        return centred_G
    return centred_G / (rewards_G.std(correction=0) + eps)


def dr_grpo_advantages(rewards_G: torch.Tensor) -> torch.Tensor:
    """Dr. GRPO: A_i = r_i - mean(r), no std division.

    Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective"
    (arXiv:2503.20783): dividing by the std weights prompts by how (in)consistent their rewards
    are, which biases the objective towards too easy and too hard questions.
    """
    return rewards_G - rewards_G.mean()


def rloo_advantages(rewards_G: torch.Tensor) -> torch.Tensor:
    """RLOO: A_i = r_i - (sum_{j != i} r_j) / (G - 1) = G / (G - 1) * (r_i - mean(r)).

    Kool, van Hoof and Welling 2019, "Buy 4 REINFORCE Samples, Get a Baseline for Free!"
    (ICLR workshop); Ahmadian et al. 2024, "Back to Basics" (arXiv:2402.14740). The baseline of
    each sample excludes that sample, so it is unbiased. Needs G >= 2.
    """
    num = rewards_G.numel()
    if num < 2:
        raise ValueError(f"RLOO needs at least 2 rewards in a group, got {num}")
    return (rewards_G - rewards_G.mean()) * (num / (num - 1))


def group_advantages(rewards_G: torch.Tensor, config: AdvantageConfig) -> torch.Tensor:
    """The configured estimator on one group's usable rewards."""
    if config.estimator == "grpo":
        return grpo_advantages(rewards_G, config.std_normalize, config.eps)
    if config.estimator == "dr_grpo":
        return dr_grpo_advantages(rewards_G)
    return rloo_advantages(rewards_G)


@dataclass
class AdvantageResult:
    """Per-trajectory advantages of a batch, in input order, and why some were excluded."""

    advantages: list[float | None]
    """The advantage of each trajectory; None for an excluded one (train on it with weight 0,
    or better, leave it out of the batch)."""
    excluded: dict[ExclusionReason, int] = field(default_factory=dict)
    """Trajectories excluded, by reason (every reason present, 0 when none)."""
    excluded_groups: dict[ExclusionReason, int] = field(default_factory=dict)
    """Groups excluded entirely, by the reason that excluded their last usable trajectories
    (`masked` counts groups whose every trajectory had no reward)."""
    num_groups: int = 0
    """Groups in the batch."""

    @property
    def num_used(self) -> int:
        return sum(a is not None for a in self.advantages)


def compute_advantages(
    rewards: Sequence[float | None], group_ids: Sequence[Hashable], config: AdvantageConfig
) -> AdvantageResult:
    """Advantages of a batch of trajectories from their rewards (None: masked) and group ids.

    A trajectory is excluded, with the first reason that applies: `masked` (no reward),
    `group_masked` (another trajectory of its group has no reward, under `mask_group`),
    `group_too_small` (fewer than `min_group_size` usable trajectories remain), `zero_variance`
    (the usable rewards of the group are equal within `zero_variance_tolerance`). Under
    `mask_trajectory` the advantages of the others are computed from the remaining rewards only.
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"{len(rewards)} rewards but {len(group_ids)} group ids")
    members: dict[Hashable, list[int]] = {}
    for index, group_id in enumerate(group_ids):
        members.setdefault(group_id, []).append(index)

    result = AdvantageResult(
        advantages=[None] * len(rewards),
        excluded=dict.fromkeys(EXCLUSION_REASONS, 0),
        excluded_groups=dict.fromkeys(EXCLUSION_REASONS, 0),
        num_groups=len(members),
    )
    for indices in members.values():
        usable = [i for i in indices if rewards[i] is not None]
        result.excluded["masked"] += len(indices) - len(usable)
        reason: ExclusionReason | None = None
        if not usable:
            reason = "masked"
        elif len(usable) < len(indices) and config.mask_policy == "mask_group":
            reason = "group_masked"
        elif len(usable) < config.min_group_size:
            reason = "group_too_small"
        else:
            rewards_G = torch.tensor([rewards[i] for i in usable], dtype=torch.float64)
            if float(rewards_G.max() - rewards_G.min()) <= config.zero_variance_tolerance:
                reason = "zero_variance"
            else:
                for i, advantage in zip(
                    usable, group_advantages(rewards_G, config).tolist(), strict=True
                ):
                    result.advantages[i] = advantage
        if reason is not None:
            result.excluded_groups[reason] += 1
            if reason != "masked":
                result.excluded[reason] += len(usable)
    return result


def record_reward(record: TrajectoryRecord) -> float | None:
    """The reward a trajectory record contributes: None (masked) when it carries a system error."""
    return None if record.system_error is not None else record.reward


def advantages_for_records(
    records: Sequence[TrajectoryRecord], config: AdvantageConfig
) -> AdvantageResult:
    """`compute_advantages` on trajectory records, grouped by their `group_id`."""
    return compute_advantages(
        [record_reward(r) for r in records], [r.group_id for r in records], config
    )


def broadcast_advantage(
    advantage: float,
    loss_mask_T: torch.Tensor,
    dtype: torch.dtype = torch.float32,
    no_credit_T: torch.Tensor | None = None,
) -> torch.Tensor:
    """The trajectory's advantage on its sampled tokens (loss_mask 1), 0 on every other token;
    on tokens marked in `no_credit_T` (malformed turns) only a negative advantage, else 0.

        advantage 0.5, mask [0, 1, 1, 1], no_credit [0, 1, 0, 0]  ->  [0, 0, 0.5, 0.5]
        advantage -1,  mask [0, 1, 1, 1], no_credit [0, 1, 0, 0]  ->  [0, -1, -1, -1]

    A malformed tool call is never what earned a reward (the harness asked again, and the turn
    after it did the work), so it never shares a success; it does share a failure.
    """
    out_T = (loss_mask_T != 0).to(dtype) * advantage
    if no_credit_T is not None and advantage > 0:
        out_T = out_T.masked_fill(no_credit_T != 0, 0.0)
    return out_T
