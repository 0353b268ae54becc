"""Group-relative advantages on literal rewards, values computed by hand in the comments."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from pydantic import ValidationError
from torch.testing import assert_close

from bureau.algo.advantages import (
    AdvantageConfig,
    advantages_for_records,
    broadcast_advantage,
    compute_advantages,
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
)
from bureau.records import TrajectoryRecord


def _t(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_grpo_uses_population_std() -> None:
    # mean 0.5; deviations +-0.5; population var = 4 * 0.25 / 4 = 0.25, std 0.5 -> +-1.
    # (The sample std would be sqrt(1/3) = 0.577 and give +-0.866.)
    advantages = grpo_advantages(_t([1, 0, 1, 0]), std_normalize=True, eps=1e-6)
    assert_close(advantages, _t([0.5, -0.5, 0.5, -0.5]) / (0.5 + 1e-6))
    # [4, 0, 2, 2]: mean 2, deviations [2, -2, 0, 0], var 8 / 4 = 2 -> [sqrt2, -sqrt2, 0, 0].
    advantages = grpo_advantages(_t([4, 0, 2, 2]), std_normalize=True, eps=1e-12)
    assert_close(advantages, _t([2**0.5, -(2**0.5), 0, 0]))


def test_grpo_without_std_and_dr_grpo_centre_only() -> None:
    # mean 0.25 -> [0.75, -0.25, -0.25, -0.25]
    expected = _t([0.75, -0.25, -0.25, -0.25])
    assert_close(grpo_advantages(_t([1, 0, 0, 0]), std_normalize=False), expected)
    assert_close(dr_grpo_advantages(_t([1, 0, 0, 0])), expected)


def test_rloo_leaves_one_out() -> None:
    # A_0 = 1 - (0 + 0 + 0) / 3 = 1;  A_1 = 0 - (1 + 0 + 0) / 3 = -1/3
    assert_close(rloo_advantages(_t([1, 0, 0, 0])), _t([1, -1 / 3, -1 / 3, -1 / 3]))
    # A_0 = 3 - 1 = 2; A_1 = 1 - 3 = -2
    assert_close(rloo_advantages(_t([3, 1])), _t([2, -2]))
    with pytest.raises(ValueError, match="at least 2"):
        rloo_advantages(_t([1]))


# Groups interleaved on purpose: results come back in input order.
REWARDS: list[float | None] = [1.0, 1.0, 0.5, 0.0, None, 0.5, 0.0, None, 1.0]
GROUPS = ["a", "b", "c", "a", "b", "c", "b", "d", "b"]


def test_mask_group_drops_the_whole_group() -> None:
    config = AdvantageConfig(estimator="dr_grpo", mask_policy="mask_group")
    result = compute_advantages(REWARDS, GROUPS, config)
    # a: [1, 0] -> mean 0.5 -> [0.5, -0.5]; b: one None -> all 4 out; c: [0.5, 0.5] zero
    # variance; d: its only trajectory has no reward.
    assert result.advantages == [0.5, None, None, -0.5, None, None, None, None, None]
    assert result.excluded == {
        "masked": 2,
        "group_masked": 3,
        "group_too_small": 0,
        "zero_variance": 2,
    }
    assert result.excluded_groups == {
        "masked": 1,
        "group_masked": 1,
        "group_too_small": 0,
        "zero_variance": 1,
    }
    assert result.num_groups == 4
    assert result.num_used == 2


def test_mask_trajectory_uses_the_remaining_rewards() -> None:
    config = AdvantageConfig(estimator="dr_grpo", mask_policy="mask_trajectory")
    result = compute_advantages(REWARDS, GROUPS, config)
    # b keeps [1, 0, 1] (indices 1, 6, 8): mean 2/3 -> [1/3, -2/3, 1/3].
    expected = [0.5, 1 / 3, None, -0.5, None, None, -2 / 3, None, 1 / 3]
    assert result.advantages == pytest.approx(expected)
    assert result.excluded == {
        "masked": 2,
        "group_masked": 0,
        "group_too_small": 0,
        "zero_variance": 2,
    }


def test_group_too_small_after_masking() -> None:
    config = AdvantageConfig(estimator="rloo", mask_policy="mask_trajectory")
    result = compute_advantages([1.0, None, 1.0, 0.0], ["x", "x", "y", "y"], config)
    # x keeps one trajectory (< 2). y: RLOO [1 - 0, 0 - 1] = [1, -1].
    assert result.advantages == [None, None, 1.0, -1.0]
    assert result.excluded["group_too_small"] == 1
    assert result.excluded["masked"] == 1
    assert result.excluded_groups["group_too_small"] == 1


def test_zero_variance_tolerance() -> None:
    rewards: list[float | None] = [1.0, 1.0 + 1e-9]
    filtered = compute_advantages(rewards, ["g", "g"], AdvantageConfig())
    assert filtered.advantages == [None, None]
    assert filtered.excluded["zero_variance"] == 2
    # With no tolerance the tiny spread counts, and GRPO blows it up to +-1:
    # deviations +-0.5e-9, std 0.5e-9 -> +-0.5e-9 / (0.5e-9 + 1e-12) ~ +-0.998.
    kept = compute_advantages(
        rewards, ["g", "g"], AdvantageConfig(zero_variance_tolerance=0.0, eps=1e-12)
    )
    assert kept.advantages == pytest.approx([-0.998, 0.998], abs=1e-3)


def test_grpo_in_the_batch_function() -> None:
    result = compute_advantages([1.0, 0.0, 1.0, 0.0], ["g"] * 4, AdvantageConfig(eps=1e-6))
    # As in test_grpo_uses_population_std: +-0.5 / (0.5 + 1e-6).
    assert result.advantages == pytest.approx([0.5 / 0.500001, -0.5 / 0.500001] * 2)


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError, match="group ids"):
        compute_advantages([1.0, 0.0], ["g"], AdvantageConfig())


def test_config_is_strict() -> None:
    with pytest.raises(ValidationError):
        AdvantageConfig(estimator="ppo")  # an invalid literal on purpose
    with pytest.raises(ValidationError):
        AdvantageConfig(min_group_size=1)


def test_records_with_system_errors_are_masked(
    make_record: Callable[..., TrajectoryRecord],
) -> None:
    records = [
        dataclasses.replace(make_record("t1", reward=1.0), group_id="g"),
        dataclasses.replace(make_record("t2", reward=0.0), group_id="g"),
        # A reward next to a system error does not count: the machinery failed.
        dataclasses.replace(
            make_record("t3", reward=1.0), group_id="g", system_error="sandbox: died"
        ),
    ]
    config = AdvantageConfig(estimator="dr_grpo", mask_policy="mask_trajectory")
    # usable [1, 0] -> [0.5, -0.5]
    assert advantages_for_records(records, config).advantages == [0.5, -0.5, None]
    grouped = advantages_for_records(
        records, config.model_copy(update={"mask_policy": "mask_group"})
    )
    assert grouped.advantages == [None, None, None]


def test_broadcast_onto_sampled_tokens_only() -> None:
    # ob=[1,2,3] ac=[10,11] ob=[4] ac=[12] -> loss_mask=[0,0,0,1,1,0,1]
    loss_mask_T = torch.tensor([0, 0, 0, 1, 1, 0, 1])
    assert_close(
        broadcast_advantage(-0.5, loss_mask_T),
        torch.tensor([0.0, 0.0, 0.0, -0.5, -0.5, 0.0, -0.5]),
    )


def test_a_malformed_turn_shares_a_failure_but_never_a_success() -> None:
    # ob=[1] ac=[10] (malformed call) ob=[2] ac=[11, 12] -> mask [0, 1, 0, 1, 1]
    loss_mask_T = torch.tensor([0, 1, 0, 1, 1])
    no_credit_T = torch.tensor([0, 1, 0, 0, 0])
    assert_close(
        broadcast_advantage(0.5, loss_mask_T, no_credit_T=no_credit_T),
        torch.tensor([0.0, 0.0, 0.0, 0.5, 0.5]),
    )
    assert_close(
        broadcast_advantage(-1.0, loss_mask_T, no_credit_T=no_credit_T),
        torch.tensor([0.0, -1.0, 0.0, -1.0, -1.0]),
    )
