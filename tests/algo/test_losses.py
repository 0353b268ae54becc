"""Policy losses and their metrics on literal tensors, values computed by hand in comments.

Ratios are set through logprobs: sampler logprobs of -2 and current logprobs of -2 + log r give
the ratio r, so the comments can work with r directly.
"""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import TypeAdapter
from torch.testing import assert_close

from bureau.algo.inputs import PolicyLossInputs
from bureau.algo.losses import (
    DecoupledPPOLossConfig,
    DPPOTVLossConfig,
    KLEstimator,
    KLPenaltyConfig,
    PolicyLossConfig,
    PPOLossConfig,
    decoupled_ppo_loss,
    dppo_tv_loss,
    kl_penalty,
    make_loss_fn,
    ppo_loss,
)
from bureau.algo.metrics import (
    combine_metrics,
    policy_metrics,
    reduce_metrics,
    staleness_histogram,
)

LN2 = math.log(2)


def _inputs(
    logprobs: list[float],
    sampler: list[float],
    advantages: list[float],
    mask: list[float] | None = None,
    weights: list[float] | None = None,
    seq_ids: list[int] | None = None,
    old_logprobs: list[float] | None = None,
    ref_logprobs: list[float] | None = None,
    entropy: list[float] | None = None,
    weight_versions: list[int] | None = None,
) -> PolicyLossInputs:
    num = len(logprobs)
    mask = mask if mask is not None else [1.0] * num
    trained = sum(mask)
    weights = weights if weights is not None else [m / trained for m in mask]

    def optional(values: list[float] | list[int] | None) -> torch.Tensor | None:
        return None if values is None else torch.tensor(values)

    return PolicyLossInputs(
        logprobs=torch.tensor(logprobs, requires_grad=True),
        sampler_logprobs=torch.tensor(sampler),
        advantages=torch.tensor(advantages),
        loss_mask=torch.tensor(mask),
        loss_weights=torch.tensor(weights),
        seq_ids=torch.tensor(seq_ids if seq_ids is not None else [0] * num),
        old_logprobs=optional(old_logprobs),
        ref_logprobs=optional(ref_logprobs),
        entropy=optional(entropy),
        weight_versions=optional(weight_versions),
    )


def _from_ratios(ratios: list[float], base: float = -2.0) -> list[float]:
    return [base + math.log(r) for r in ratios]


def _grad(loss: torch.Tensor, inputs: PolicyLossInputs) -> torch.Tensor:
    (grad,) = torch.autograd.grad(loss, inputs.logprobs)
    return grad


def _fraction(metrics: dict[str, torch.Tensor], name: str) -> float:
    return float(metrics[f"{name}_sum"] / metrics[f"{name}_count"])


# ---------------------------------------------------------------- PPO


def test_ppo_clips_both_sides_and_zeroes_their_gradient() -> None:
    # eps_low 0.2 (clip below 0.8), eps_high 0.28 (clip above 1.28); the last token is a
    # prompt token (mask 0) with an absurd ratio that must not matter.
    ratios = [1.5, 0.5, 0.5, 1.5, 1.1, 100.0]
    inputs = _inputs(
        _from_ratios(ratios),
        [-2.0] * 6,
        advantages=[1.0, 1.0, -1.0, -1.0, 2.0, 5.0],
        mask=[1, 1, 1, 1, 1, 0],
    )
    loss, metrics = ppo_loss(inputs, PPOLossConfig(eps_low=0.2, eps_high=0.28))
    # per token max(-A r, -A clip(r)):
    #   r=1.5 A=+1: max(-1.5, -1.28) = -1.28  (clip high, no gradient)
    #   r=0.5 A=+1: max(-0.5, -0.8)  = -0.5   (unclipped)
    #   r=0.5 A=-1: max(0.5, 0.8)    = 0.8    (clip low, no gradient)
    #   r=1.5 A=-1: max(1.5, 1.28)   = 1.5    (unclipped)
    #   r=1.1 A=+2: -2.2                      (inside)
    # token mean over 5 tokens: 0.2 * (-1.28 - 0.5 + 0.8 + 1.5 - 2.2) = 0.2 * -1.68 = -0.336
    assert_close(loss, torch.tensor(-0.336))
    # d/dlogp of w * (-A r) = -w A r where unclipped: [0, -0.1, 0, 0.3, -0.44, 0]
    assert_close(_grad(loss, inputs), torch.tensor([0.0, -0.1, 0.0, 0.3, -0.44, 0.0]))
    assert _fraction(metrics, "clipped_fraction") == pytest.approx(2 / 5)
    assert _fraction(metrics, "clip_low_fraction") == pytest.approx(1 / 5)
    assert _fraction(metrics, "clip_high_fraction") == pytest.approx(1 / 5)
    assert _fraction(metrics, "masked_fraction") == 0.0
    assert_close(metrics["policy_loss_sum"], torch.tensor(-0.336))


def test_ppo_dual_clip_caps_negative_advantages() -> None:
    ratios = [4.0, 2.0, 4.0]
    inputs = _inputs(_from_ratios(ratios), [-2.0] * 3, advantages=[-1.0, -1.0, 1.0])
    loss, metrics = ppo_loss(inputs, PPOLossConfig(eps_low=0.2, eps_high=0.28, dual_clip_c=3.0))
    #   r=4 A=-1: max(4, 1.28) = 4, capped at -c A = 3   (dual clip, no gradient)
    #   r=2 A=-1: max(2, 1.28) = 2 < 3                   (unclipped, gradient -A r = 2)
    #   r=4 A=+1: max(-4, -1.28) = -1.28                 (clip high, untouched by the dual clip)
    # (3 + 2 - 1.28) / 3 = 1.24
    assert_close(loss, torch.tensor(1.24))
    assert_close(_grad(loss, inputs), torch.tensor([0.0, 2 / 3, 0.0]))
    assert _fraction(metrics, "dual_clip_fraction") == pytest.approx(1 / 3)
    assert _fraction(metrics, "clipped_fraction") == pytest.approx(2 / 3)
    # Without the dual clip the first token costs 4: (4 + 2 - 1.28) / 3
    plain, _ = ppo_loss(inputs, PPOLossConfig(eps_low=0.2, eps_high=0.28))
    assert_close(plain, torch.tensor(4.72 / 3))


def test_ppo_ratio_is_against_old_logprobs_when_given() -> None:
    # Against the sampler r = 2 (clipped); against old r = exp(0.1) (inside the clip).
    inputs = _inputs([-2.0 + LN2], [-2.0], advantages=[1.0], old_logprobs=[-2.0 + LN2 - 0.1])
    loss, metrics = ppo_loss(inputs, PPOLossConfig())
    assert_close(loss, torch.tensor(-math.exp(0.1)))
    assert _fraction(metrics, "clipped_fraction") == 0.0
    # The mismatch metrics still compare with the sampler: ratio 2.
    assert _fraction(metrics, "importance_ratio") == pytest.approx(2.0)


# ---------------------------------------------------------------- decoupled PPO


def test_decoupled_without_old_logprobs_is_truncated_importance_sampling() -> None:
    # No old logprobs: r = pi/pi.detach() = 1 (inside any clip), behaviour weight
    # rho = pi/mu = [0.5, 3, 1], TIS at C = 2 -> c = [0.5, 2, 1].
    inputs = _inputs(_from_ratios([0.5, 3.0, 1.0]), [-2.0] * 3, advantages=[1.0, 1.0, -1.0])
    loss, metrics = decoupled_ppo_loss(inputs, DecoupledPPOLossConfig(tis_cap=2.0))
    # (1/3) * (-0.5 - 2 + 1) = -0.5
    assert_close(loss, torch.tensor(-0.5))
    # gradient -w c A: [-0.5/3, -2/3, 1/3]
    assert_close(_grad(loss, inputs), torch.tensor([-0.5 / 3, -2 / 3, 1 / 3]))
    assert _fraction(metrics, "tis_truncated_fraction") == pytest.approx(1 / 3)
    # Without TIS the weight is rho itself: (1/3) * (-0.5 - 3 + 1)
    untruncated, _ = decoupled_ppo_loss(inputs, DecoupledPPOLossConfig(tis=False))
    assert_close(untruncated, torch.tensor(-2.5 / 3))


def test_decoupled_clips_the_proximal_ratio_and_weights_by_the_behaviour_ratio() -> None:
    sampler = [-2.0, -2.0]
    old = [-2.0 + math.log(0.8), -2.0 + math.log(3.0)]  # rho = old/mu = [0.8, 3 -> TIS 2]
    current = [old[0] + math.log(1.5), old[1] + math.log(0.9)]  # r = pi/old = [1.5, 0.9]
    inputs = _inputs(current, sampler, advantages=[1.0, 1.0], old_logprobs=old)
    loss, metrics = decoupled_ppo_loss(inputs, DecoupledPPOLossConfig(eps_high=0.28))
    # token 0: 0.8 * max(-1.5, -1.28) = -1.024 (clip high); token 1: 2 * -0.9 = -1.8
    # 0.5 * (-1.024 - 1.8) = -1.412
    assert_close(loss, torch.tensor(-1.412))
    # gradient: 0 for the clipped token, -w c A r = -0.5 * 2 * 0.9 = -0.9 for the other
    assert_close(_grad(loss, inputs), torch.tensor([0.0, -0.9]))
    assert _fraction(metrics, "clip_high_fraction") == pytest.approx(0.5)
    assert _fraction(metrics, "behaviour_ratio") == pytest.approx((0.8 + 3.0) / 2)


def test_icepop_masks_tokens_outside_the_band() -> None:
    # rho = [0.4, 1, 6, 2]; band [0.5, 5] masks tokens 0 and 2. No TIS, A = 1, w = 1/4.
    inputs = _inputs(_from_ratios([0.4, 1.0, 6.0, 2.0]), [-2.0] * 4, advantages=[1.0] * 4)
    config = DecoupledPPOLossConfig(tis=False, icepop=True, icepop_low=0.5, icepop_high=5.0)
    loss, metrics = decoupled_ppo_loss(inputs, config)
    # 0.25 * (-1 - 2) = -0.75; weights are not renormalised over the surviving tokens
    assert_close(loss, torch.tensor(-0.75))
    assert_close(_grad(loss, inputs), torch.tensor([0.0, -0.25, 0.0, -0.5]))
    assert _fraction(metrics, "masked_icepop_fraction") == pytest.approx(0.5)
    assert _fraction(metrics, "masked_fraction") == pytest.approx(0.5)


def test_geometric_mean_mask_drops_whole_sequences() -> None:
    # seq 0: rho [1, 1] -> geo 1, kept
    # seq 1: a prompt token (ratio e^-5, ignored), then rho [1.05, 1] -> geo sqrt(1.05) = 1.0247
    #        > 1.01, dropped
    # seq 2: rho [1.02, 0.98] -> geo sqrt(0.9996) = 0.9998, kept (each token alone is > 1%
    #        off; the sequence as a whole is not)
    ratios = [1.0, 1.0, math.exp(-5), 1.05, 1.0, 1.02, 0.98]
    inputs = _inputs(
        _from_ratios(ratios),
        [-2.0] * 7,
        advantages=[1.0] * 7,
        mask=[1, 1, 0, 1, 1, 1, 1],
        seq_ids=[0, 0, 1, 1, 1, 2, 2],
    )
    loss, metrics = decoupled_ppo_loss(inputs, DecoupledPPOLossConfig(geo_mask=True))
    # w = 1/6 on the 6 action tokens: -(1/6) * (1 + 1 + 1.02 + 0.98) = -4/6
    assert_close(loss, torch.tensor(-4 / 6))
    assert_close(_grad(loss, inputs), -torch.tensor([1, 1, 0, 0, 0, 1.02, 0.98]) / 6)
    assert _fraction(metrics, "masked_geo_fraction") == pytest.approx(2 / 6)
    # Tighter than the default band, seq 2 goes too: geo 0.9998 < 0.9999
    tight = DecoupledPPOLossConfig(geo_mask=True, geo_mask_low=0.9999, geo_mask_high=1.0001)
    loss, _ = decoupled_ppo_loss(inputs, tight)
    assert_close(loss, torch.tensor(-2 / 6))


def test_veto_drops_a_sequence_with_one_outlier_token() -> None:
    # seq 0: rho [1e-5, 1] has a token below 1e-4 -> vetoed; seq 1: rho [0.5, 1] kept.
    inputs = _inputs(
        _from_ratios([1e-5, 1.0, 0.5, 1.0]),
        [-2.0] * 4,
        advantages=[1.0] * 4,
        seq_ids=[0, 0, 1, 1],
    )
    loss, metrics = decoupled_ppo_loss(inputs, DecoupledPPOLossConfig(veto=True))
    # -0.25 * (0.5 + 1) = -0.375
    assert_close(loss, torch.tensor(-0.375))
    assert _fraction(metrics, "masked_veto_fraction") == pytest.approx(0.5)
    assert _fraction(metrics, "masked_geo_fraction") == 0.0  # off unless asked for
    # Without the veto: -0.25 * (1e-5 + 1 + 0.5 + 1)
    loss, _ = decoupled_ppo_loss(inputs, DecoupledPPOLossConfig())
    assert_close(loss, torch.tensor(-0.25 * 2.50001))


# ---------------------------------------------------------------- DPPO


DPPO_P = [0.9, 0.3, 0.5, 0.2, 0.8]  # current token probabilities
DPPO_Q = [0.6, 0.6, 0.4, 0.5, 0.5]  # sampler token probabilities
DPPO_A = [1.0, 1.0, -1.0, -1.0, -1.0]
# p - q = [0.3, -0.3, 0.1, -0.3, 0.3]; r = p/q = [1.5, 0.5, 1.25, 0.4, 1.6]


def _dppo_inputs() -> PolicyLossInputs:
    return _inputs([math.log(p) for p in DPPO_P], [math.log(q) for q in DPPO_Q], advantages=DPPO_A)


def test_dppo_tv_masks_large_probability_moves() -> None:
    inputs = _dppo_inputs()
    loss, metrics = dppo_tv_loss(inputs, DPPOTVLossConfig(delta=0.2))
    # |p - q| > 0.2 masks all but token 2: 0.2 * -A r = 0.2 * 1.25 = 0.25
    assert_close(loss, torch.tensor(0.25))
    assert_close(_grad(loss, inputs), torch.tensor([0.0, 0.0, 0.25, 0.0, 0.0]))
    assert _fraction(metrics, "masked_dppo_fraction") == pytest.approx(4 / 5)


def test_dppo_tv_directional_masks_only_moves_the_gradient_would_continue() -> None:
    inputs = _dppo_inputs()
    loss, metrics = dppo_tv_loss(inputs, DPPOTVLossConfig(delta=0.2, directional=True))
    # masked: token 0 (A > 0, moved up 0.3) and token 3 (A < 0, moved down 0.3);
    # kept: token 1 (A > 0, moved down), token 2 (inside), token 4 (A < 0, moved up).
    # 0.2 * (-0.5 + 1.25 + 1.6) = 0.47
    assert_close(loss, torch.tensor(0.47))
    assert_close(_grad(loss, inputs), torch.tensor([0.0, -0.1, 0.25, 0.0, 0.32]))
    assert _fraction(metrics, "masked_dppo_fraction") == pytest.approx(2 / 5)


# ---------------------------------------------------------------- KL to a reference


def test_kl_estimators() -> None:
    logprobs = torch.tensor([math.log(0.5), math.log(0.25), 0.0])
    ref = torch.tensor([math.log(0.25), math.log(0.5), -9.0])
    action = torch.tensor([True, True, False])
    # log r = log pi_ref - log pi = [-ln2, ln2], r = [0.5, 2]; 0 off the mask
    assert_close(kl_penalty(logprobs, ref, action, "k1"), torch.tensor([LN2, -LN2, 0.0]))
    assert_close(kl_penalty(logprobs, ref, action, "k2"), torch.tensor([LN2**2 / 2] * 2 + [0.0]))
    # k3 = r - 1 - log r: [0.5 - 1 + ln2, 2 - 1 - ln2] = [0.1931, 0.3069]
    assert_close(kl_penalty(logprobs, ref, action, "k3"), torch.tensor([LN2 - 0.5, 1 - LN2, 0.0]))


@pytest.mark.parametrize(
    ("estimator", "expected"),
    # 0.1 * 0.5 * sum(k): k1 -> ln2 - ln2 = 0; k2 -> 0.05 * ln2^2; k3 -> 0.05 * 0.5
    [("k1", 0.0), ("k2", 0.05 * LN2**2), ("k3", 0.025)],
)
def test_kl_term_is_added_with_the_same_weights(estimator: KLEstimator, expected: float) -> None:
    # A = 0 and r = 1: the policy term is 0, only the KL term remains.
    logprobs = [math.log(0.5), math.log(0.25)]
    inputs = _inputs(logprobs, logprobs, [0.0, 0.0], ref_logprobs=[math.log(0.25), math.log(0.5)])
    config = PPOLossConfig(kl=KLPenaltyConfig(coef=0.1, estimator=estimator))
    loss, metrics = ppo_loss(inputs, config)
    assert_close(loss, torch.tensor(expected))
    assert_close(metrics["kl_loss_sum"], torch.tensor(expected))
    if estimator == "k3":
        # d k3 / d log pi = 1 - r = [0.5, -1], times 0.1 * 0.5
        assert_close(_grad(loss, inputs), torch.tensor([0.025, -0.05]))


def test_kl_needs_reference_logprobs() -> None:
    inputs = _inputs([-1.0], [-1.0], [1.0])
    with pytest.raises(ValueError, match="ref_logprobs"):
        ppo_loss(inputs, PPOLossConfig(kl=KLPenaltyConfig(coef=0.1)))


def test_kl_skips_masked_tokens() -> None:
    # icepop masks token 0 (rho = 0.1); only token 1's k1 = ln2 counts: 1.0 * 0.5 * ln2
    inputs = _inputs(
        [-2.0 + math.log(0.1), math.log(0.5)],
        [-2.0, math.log(0.5)],
        [0.0, 0.0],
        ref_logprobs=[0.0, math.log(0.25)],
    )
    config = DecoupledPPOLossConfig(icepop=True, kl=KLPenaltyConfig(coef=1.0, estimator="k1"))
    loss, _ = decoupled_ppo_loss(inputs, config)
    assert_close(loss, torch.tensor(0.5 * LN2))


# ---------------------------------------------------------------- factory


def test_make_loss_fn_selects_the_variant_from_config() -> None:
    adapter: TypeAdapter[PolicyLossConfig] = TypeAdapter(PolicyLossConfig)
    inputs = _dppo_inputs()
    config = adapter.validate_python({"kind": "dppo_tv", "delta": 0.2})
    assert isinstance(config, DPPOTVLossConfig)
    loss, _ = make_loss_fn(config)(inputs)
    assert_close(loss, torch.tensor(0.25))
    ppo = adapter.validate_python({"kind": "ppo", "eps_high": 0.28})
    assert_close(make_loss_fn(ppo)(inputs)[0], ppo_loss(inputs, PPOLossConfig(eps_high=0.28))[0])
    decoupled = adapter.validate_python({"kind": "decoupled_ppo", "icepop": True})
    assert isinstance(decoupled, DecoupledPPOLossConfig)
    with pytest.raises(ValueError, match="icepop_low"):
        DecoupledPPOLossConfig(icepop_low=6.0)


# ---------------------------------------------------------------- metrics


def test_policy_metrics_over_action_tokens() -> None:
    # Action tokens have d = log pi - log mu = [ln2, -ln2, 0]; the prompt token (first) is
    # ignored although its values are wild.
    inputs = _inputs(
        [5.0, -2.0 + LN2, -2.0 - LN2, -2.0],
        [-30.0, -2.0, -2.0, -2.0],
        [0.0] * 4,
        mask=[0, 1, 1, 1],
        entropy=[100.0, 1.0, 2.0, 3.0],
        weight_versions=[-1, 3, 4, 4],
    )
    metrics = policy_metrics(inputs)
    # k3 of KL(mu || pi) = e^d - 1 - d: [1 - ln2, ln2 - 0.5, 0], sum 0.5
    assert_close(metrics["mismatch_kl_sum"], torch.tensor(0.5))
    assert_close(metrics["mismatch_kl_count"], torch.tensor(3.0))
    assert_close(metrics["abs_logprob_diff_sum"], torch.tensor(2 * LN2))
    assert_close(metrics["abs_logprob_diff_max"], torch.tensor(LN2))
    assert_close(metrics["importance_ratio_sum"], torch.tensor(3.5))
    assert_close(metrics["importance_ratio_values"], torch.tensor([2.0, 0.5, 1.0]))
    assert_close(metrics["entropy_sum"], torch.tensor(6.0))
    assert int(metrics["weight_version_min"]) == 3
    assert int(metrics["weight_version_max"]) == 4


def test_staleness_histogram() -> None:
    # sampled versions [3, 4, 4, 5] at current version 5 -> staleness [2, 1, 1, 0]
    assert staleness_histogram(torch.tensor([-1, 3, 4, 4, 5, -1]), 5) == {0: 1, 1: 2, 2: 1}
    assert staleness_histogram([-1, -1], 2) == {}


def test_reduce_metrics_by_suffix() -> None:
    first = {
        "a_sum": torch.tensor(3.0),
        "a_count": torch.tensor(2.0),
        "m_max": torch.tensor(1.0),
        "m_min": torch.tensor(0.0),
        "v_values": torch.tensor([1.0, 2.0]),
        "loss_sum": torch.tensor(0.5),
        "empty_sum": torch.tensor(0.0),
        "empty_count": torch.tensor(0.0),
    }
    second = {
        "a_sum": torch.tensor(1.0),
        "a_count": torch.tensor(2.0),
        "m_max": torch.tensor(5.0),
        "m_min": torch.tensor(-1.0),
        "v_values": torch.tensor([3.0, 4.0, 5.0]),
        "loss_sum": torch.tensor(0.25),
    }
    reduced = reduce_metrics([first, second])
    # a = (3 + 1) / (2 + 2); v = [1..5]: p50 = 3, p99 at position 0.99 * 4 = 3.96 -> 4.96;
    # a lone sum is a total; a mean over nothing is left out.
    assert reduced == pytest.approx(
        {"a": 1.0, "m_max": 5.0, "m_min": -1.0, "v_p50": 3.0, "v_p99": 4.96, "loss": 0.75}
    )
    with pytest.raises(ValueError, match="suffix"):
        combine_metrics([{"accuracy": torch.tensor(1.0)}])


def test_micro_batch_metrics_combine_to_the_whole_batch() -> None:
    # Two sequences in one micro-batch, or one in each: the same loss and the same metrics.
    ratios = [1.5, 0.5, 1.0, 0.7, 1.2]
    logprobs = _from_ratios(ratios)
    advantages = [1.0, -1.0, 0.5, 2.0, -0.5]
    mask = [1.0, 1.0, 0.0, 1.0, 1.0]
    weights = [0.25, 0.25, 0.0, 0.25, 0.25]
    config = DecoupledPPOLossConfig(icepop=True, icepop_low=0.6, icepop_high=1.4)
    whole = _inputs(logprobs, [-2.0] * 5, advantages, mask, weights, seq_ids=[0, 0, 1, 1, 1])
    parts = [
        _inputs(logprobs[:2], [-2.0] * 2, advantages[:2], mask[:2], weights[:2], [0, 0]),
        _inputs(logprobs[2:], [-2.0] * 3, advantages[2:], mask[2:], weights[2:], [0, 0, 0]),
    ]
    whole_loss, whole_metrics = decoupled_ppo_loss(whole, config)
    part_results = [decoupled_ppo_loss(part, config) for part in parts]
    assert_close(whole_loss, part_results[0][0] + part_results[1][0])
    assert reduce_metrics([m for _, m in part_results]) == pytest.approx(
        reduce_metrics([whole_metrics])
    )


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=[
                pytest.mark.gpu,
                pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
            ],
        ),
    ],
)
def test_losses_run_on_the_device_of_their_inputs(device: str) -> None:
    inputs = _inputs(
        _from_ratios([1e-5, 1.0, 1.05, 1.0]),
        [-2.0] * 4,
        advantages=[1.0, -1.0, 1.0, 1.0],
        seq_ids=[0, 0, 1, 1],
        ref_logprobs=[-2.0] * 4,
    )
    moved = PolicyLossInputs(
        **{
            name: value.to(device) if isinstance(value, torch.Tensor) else value
            for name, value in vars(inputs).items()
        }
    )
    config = DecoupledPPOLossConfig(
        icepop=True, geo_mask=True, veto=True, kl=KLPenaltyConfig(coef=0.1)
    )
    loss, metrics = decoupled_ppo_loss(moved, config)
    expected_loss, expected_metrics = decoupled_ppo_loss(inputs, config)
    assert loss.device.type == device
    assert_close(loss.cpu(), expected_loss)
    assert reduce_metrics([metrics]) == pytest.approx(reduce_metrics([expected_metrics]))
