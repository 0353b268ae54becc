"""Policy-gradient losses over the per-token tensors of one micro-batch.

Three policies meet in asynchronous RL: the sampler mu (the inference engine that produced the
tokens, with its own numerics and possibly older weights), the proximal policy pi_old (the
trainer's parameters before this step's update, when the trainer recomputes them) and the
current policy pi_theta. Each loss here states which ratios it takes between them and what it
does with tokens on which they disagree too much: clip the ratio (no gradient), truncate an
importance weight, or mask the token or its whole sequence out of the loss.

Every loss returns `(loss_weights * per_token_loss).sum()` (plus an optional KL penalty), where
`loss_weights` is the batch-wide reduction (`bureau.algo.reductions`). A masked token
contributes nothing, and the weights of the other tokens are not renormalised: the reduction
was fixed for the whole batch before any micro-batch ran, so masking shrinks the loss rather
than reweighting the surviving tokens.

`sft_loss`, the masked negative log-likelihood, has the same form and contract, so
demonstrations (a warm start, a scripted-agent bootstrap) train through the same trainer.

Shape legend: T tokens of the micro-batch (all tensors of `PolicyLossInputs`), S sequences of
the micro-batch. Every loss minimises the negative of the objective in its paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bureau.algo.inputs import LossFn, PolicyLossInputs
from bureau.algo.metrics import fraction_metric, masked_log_ratio, mean_metric, policy_metrics

KLEstimator = Literal["k1", "k2", "k3"]
KL_LOG_RATIO_BOUND = 20.0
"""|log(pi_ref / pi_theta)| is clamped to this in k3, whose exp would otherwise overflow."""

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class KLPenaltyConfig(BaseModel):
    """An optional KL penalty towards a frozen reference policy."""

    model_config = _CONFIG

    coef: float = Field(default=0.0, ge=0)
    """Weight of the KL term in the loss; 0 turns it off (it then needs no `ref_logprobs`)."""
    estimator: KLEstimator = "k3"
    """Per-token estimator of KL(pi_theta || pi_ref): `k1`, `k2` or `k3` (Schulman 2020)."""


class _PolicyLossConfig(BaseModel):
    model_config = _CONFIG

    kl: KLPenaltyConfig = Field(default_factory=KLPenaltyConfig)
    """The KL penalty towards the reference policy."""


class _ClippedLossConfig(_PolicyLossConfig):
    eps_low: float = Field(default=0.2, ge=0, lt=1)
    """The ratio is clipped below at 1 - eps_low (tokens with negative advantage)."""
    eps_high: float = Field(default=0.2, ge=0)
    """The ratio is clipped above at 1 + eps_high (positive advantage); DAPO uses 0.28."""
    dual_clip_c: float | None = Field(default=None, gt=1)
    """Dual clip: a negative-advantage token's loss is capped at -c * A (Ye et al. use 3)."""


class PPOLossConfig(_ClippedLossConfig):
    """The PPO clipped objective, against old logprobs when given, else the sampler's."""

    kind: Literal["ppo"] = "ppo"
    """Selects this loss."""


class DecoupledPPOLossConfig(_ClippedLossConfig):
    """PPO around the proximal policy, with the sampler mismatch corrected by importance weights."""

    kind: Literal["decoupled_ppo"] = "decoupled_ppo"
    """Selects this loss."""
    tis: bool = True
    """Truncate the behaviour importance weight at `tis_cap` (truncated importance sampling)."""
    tis_cap: float = Field(default=2.0, gt=0)
    """C in min(w, C)."""
    icepop: bool = False
    """Mask tokens whose behaviour ratio leaves [icepop_low, icepop_high] (IcePop)."""
    icepop_low: float = Field(default=0.5, gt=0)
    """Lower bound of the behaviour ratio a token keeps under IcePop."""
    icepop_high: float = Field(default=5.0, gt=0)
    """Upper bound of the behaviour ratio a token keeps under IcePop."""
    geo_mask: bool = False
    """Mask sequences whose geometric-mean behaviour ratio leaves [geo_mask_low, geo_mask_high]."""
    geo_mask_low: float = Field(default=0.99, gt=0)
    """Lower bound of a kept sequence's geometric-mean behaviour ratio."""
    geo_mask_high: float = Field(default=1.01, gt=0)
    """Upper bound of a kept sequence's geometric-mean behaviour ratio."""
    veto: bool = False
    """Mask a whole sequence when any of its tokens has a behaviour ratio below `veto_threshold`."""
    veto_threshold: float = Field(default=1e-4, gt=0)
    """The behaviour ratio under which one token vetoes its sequence."""

    @model_validator(mode="after")
    def _bounds_ordered(self) -> DecoupledPPOLossConfig:
        if self.icepop_low >= self.icepop_high:
            raise ValueError("icepop_low must be below icepop_high")
        if self.geo_mask_low >= self.geo_mask_high:
            raise ValueError("geo_mask_low must be below geo_mask_high")
        return self


class DPPOTVLossConfig(_PolicyLossConfig):
    """DPPO with the binary total-variation trust region around the sampler."""

    kind: Literal["dppo_tv"] = "dppo_tv"
    """Selects this loss."""
    delta: float = Field(default=0.2, gt=0, le=1)
    """A token is masked when its probability moved more than this from the sampler's."""
    directional: bool = False
    """Mask only moves in the advantage's direction (the paper's rule) instead of any move."""


class SFTLossConfig(BaseModel):
    """Supervised fine-tuning: the masked negative log-likelihood of the trained tokens."""

    model_config = _CONFIG

    kind: Literal["sft"] = "sft"
    """Selects this loss."""


PolicyLossConfig = Annotated[
    PPOLossConfig | DecoupledPPOLossConfig | DPPOTVLossConfig | SFTLossConfig,
    Field(discriminator="kind"),
]
"""Any of the losses, told apart by `kind`."""


def needs_reference(config: PolicyLossConfig) -> bool:
    """Whether the loss has a KL penalty, so the trainer must score a frozen reference policy."""
    return isinstance(config, _PolicyLossConfig) and config.kl.coef > 0


@dataclass
class ClippedSurrogate:
    """The clipped surrogate's per-token loss and where each clip removed the gradient."""

    loss_T: torch.Tensor
    clip_low_T: torch.Tensor
    clip_high_T: torch.Tensor
    dual_clip_T: torch.Tensor


def clipped_surrogate(
    ratio_T: torch.Tensor, advantages_T: torch.Tensor, config: _ClippedLossConfig
) -> ClippedSurrogate:
    """Per-token max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)), with the dual clip if set.

    The dual clip replaces the loss of a token with A < 0 by min(that, -c A): a very large
    ratio on a bad token can otherwise dominate the batch (Ye et al. 2020).
    """
    unclipped_T = -advantages_T * ratio_T
    clipped_T = -advantages_T * ratio_T.clamp(1 - config.eps_low, 1 + config.eps_high)
    loss_T = torch.maximum(unclipped_T, clipped_T)
    ratio_d = ratio_T.detach()
    clip_low_T = (advantages_T < 0) & (ratio_d < 1 - config.eps_low)
    clip_high_T = (advantages_T > 0) & (ratio_d > 1 + config.eps_high)
    dual_clip_T = torch.zeros_like(clip_low_T)
    if config.dual_clip_c is not None:
        cap_T = -config.dual_clip_c * advantages_T
        dual_clip_T = (advantages_T < 0) & (ratio_d > config.dual_clip_c)
        loss_T = torch.where(advantages_T < 0, torch.minimum(loss_T, cap_T), loss_T)
    return ClippedSurrogate(loss_T, clip_low_T, clip_high_T, dual_clip_T)


def kl_penalty(
    logprobs_T: torch.Tensor,
    ref_logprobs_T: torch.Tensor,
    action_T: torch.Tensor,
    estimator: KLEstimator,
) -> torch.Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) on tokens sampled from pi_theta.

    With log r = log pi_ref - log pi_theta (Schulman 2020, "Approximating KL Divergence",
    http://joschu.net/blog/kl-approx.html): k1 = -log r (unbiased, high variance, can be
    negative), k2 = (log r)^2 / 2 (biased, low variance), k3 = (r - 1) - log r (unbiased,
    nonnegative, low variance). 0 off the action tokens.
    """
    log_r_T = masked_log_ratio(ref_logprobs_T, logprobs_T, action_T)
    if estimator == "k1":
        return -log_r_T
    if estimator == "k2":
        return 0.5 * log_r_T.square()
    log_r_T = log_r_T.clamp(-KL_LOG_RATIO_BOUND, KL_LOG_RATIO_BOUND)
    return torch.exp(log_r_T) - 1 - log_r_T


def _finish(
    inputs: PolicyLossInputs,
    config: _PolicyLossConfig,
    per_token_loss_T: torch.Tensor,
    keep_T: torch.Tensor,
    metrics: dict[str, torch.Tensor],
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The weighted policy loss over kept tokens, plus the KL term, and the shared metrics."""
    action_T = inputs.loss_mask != 0
    zeros_T = torch.zeros_like(per_token_loss_T)
    policy_loss = (inputs.loss_weights * torch.where(keep_T, per_token_loss_T, zeros_T)).sum()
    metrics = policy_metrics(inputs) | metrics
    metrics |= fraction_metric("masked_fraction", action_T & ~keep_T, action_T)
    metrics["policy_loss_sum"] = policy_loss.detach()
    loss = policy_loss
    if config.kl.coef > 0 and inputs.ref_logprobs is None:
        raise ValueError("the KL penalty needs ref_logprobs")
    if inputs.ref_logprobs is not None:
        kl_T = kl_penalty(inputs.logprobs, inputs.ref_logprobs, action_T, config.kl.estimator)
        metrics |= mean_metric("kl_ref", kl_T, action_T)
        if config.kl.coef > 0:
            kl_loss = (
                config.kl.coef * (inputs.loss_weights * torch.where(keep_T, kl_T, zeros_T)).sum()
            )
            metrics["kl_loss_sum"] = kl_loss.detach()
            loss = loss + kl_loss
    return loss, metrics


def _clip_metrics(surrogate: ClippedSurrogate, keep_T: torch.Tensor) -> dict[str, torch.Tensor]:
    clip_T = surrogate.clip_low_T | surrogate.clip_high_T | surrogate.dual_clip_T
    return (
        fraction_metric("clipped_fraction", clip_T, keep_T)
        | fraction_metric("clip_low_fraction", surrogate.clip_low_T, keep_T)
        | fraction_metric("clip_high_fraction", surrogate.clip_high_T, keep_T)
        | fraction_metric("dual_clip_fraction", surrogate.dual_clip_T, keep_T)
    )


def ppo_loss(
    inputs: PolicyLossInputs, config: PPOLossConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped objective with asymmetric bounds and an optional dual clip.

    loss = sum_t w_t * max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high)),
    r_t = pi_theta(a_t) / pi_old(a_t), where pi_old is `old_logprobs` when given and the
    sampler's logprobs otherwise; with `dual_clip_c`, a token with A_t < 0 contributes
    min(that, -c A_t).

    Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv:1707.06347);
    asymmetric "clip-higher": Yu et al. 2025, "DAPO" (arXiv:2503.14476); dual clip: Ye et al.
    2020, "Mastering Complex Control in MOBA Games with Deep Reinforcement Learning"
    (arXiv:1912.09729).

    Metrics: clipped fractions (any clip, low, high, dual) among action tokens.
    """
    action_T = inputs.loss_mask != 0
    reference_T = (
        inputs.old_logprobs if inputs.old_logprobs is not None else inputs.sampler_logprobs
    )
    ratio_T = torch.exp(masked_log_ratio(inputs.logprobs, reference_T.detach(), action_T))
    surrogate = clipped_surrogate(ratio_T, inputs.advantages, config)
    metrics = _clip_metrics(surrogate, action_T)
    return _finish(inputs, config, surrogate.loss_T, action_T, metrics)


def sequence_masks(
    log_ratio_T: torch.Tensor,
    action_T: torch.Tensor,
    seq_ids_T: torch.Tensor,
    geo_bounds: tuple[float, float],
    veto_threshold: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token: is its sequence out by the geometric-mean mask, and by the veto?

    The geometric mean of a sequence's ratios over its action tokens is exp(mean_t log r_t); the
    sequence is out when it leaves [low, high]. The veto takes the sequence out when any of its
    action tokens has r_t < veto_threshold. A sequence without action tokens is never out.
    """
    num_seqs = int(seq_ids_T.max()) + 1 if seq_ids_T.numel() else 0
    action_f_T = action_T.to(log_ratio_T.dtype)
    counts_S = torch.zeros(num_seqs, dtype=log_ratio_T.dtype, device=log_ratio_T.device)
    counts_S = counts_S.index_add_(0, seq_ids_T, action_f_T)
    log_sums_S = torch.zeros_like(counts_S).index_add_(0, seq_ids_T, log_ratio_T * action_f_T)
    mean_log_S = log_sums_S / counts_S.clamp(min=1)
    low, high = geo_bounds
    geo_out_S = (counts_S > 0) & ((mean_log_S < math.log(low)) | (mean_log_S > math.log(high)))
    vetoes_T = (action_T & (log_ratio_T < math.log(veto_threshold))).to(log_ratio_T.dtype)
    veto_out_S = torch.zeros_like(counts_S).index_add_(0, seq_ids_T, vetoes_T) > 0
    return geo_out_S[seq_ids_T], veto_out_S[seq_ids_T]


def decoupled_ppo_loss(
    inputs: PolicyLossInputs, config: DecoupledPPOLossConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Decoupled PPO: the clip around the proximal policy, an importance weight for the sampler.

    loss = sum_t w_t * m_t * c_t * max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high))
    (dual clip as in `ppo_loss`), with
    - r_t = pi_theta(a_t) / pi_prox(a_t), pi_prox = `old_logprobs`, or pi_theta itself with the
      gradient stopped when there are none (r_t = 1 in value, so the clip does nothing);
    - the behaviour ratio rho_t = pi_prox(a_t) / mu(a_t), mu the sampler, no gradient;
    - c_t = min(rho_t, C) with TIS, rho_t without;
    - m_t = 0 for a token outside [icepop_low, icepop_high] (IcePop), for every token of a
      sequence whose geometric-mean rho leaves [geo_mask_low, geo_mask_high], and for every
      token of a sequence with a token whose rho < veto_threshold; 1 otherwise.

    Decoupled objective: Hilton, Cobbe and Schulman 2022, "Batch size-invariance for policy
    optimization" (arXiv:2110.00641). TIS: Yao, Liu et al. 2025, "Your Efficient RL Framework
    Secretly Brings You Off-Policy RL Training" (blog). IcePop: Ling Team 2025, "Every Step
    Evolves: Scaling Reinforcement Learning for Trillion-Scale Thinking Model"
    (arXiv:2510.18855), bounds [0.5, 5]. Geometric-mean sequence mask and the token veto:
    sequence-level masked importance sampling in Liu, Li et al. 2025, "When Speed Kills
    Stability: Demystifying RL Collapse from the Training-Inference Mismatch" (blog); the veto
    in the form of verl's rollout correction (any token below a threshold such as 1e-4 rejects
    its sequence).

    Metrics: clipped fractions among kept tokens, TIS-truncated fraction, masked fraction by
    cause (`masked_icepop_fraction`, `masked_geo_fraction`, `masked_veto_fraction`; a token
    can have several), and the mean behaviour ratio.
    """
    action_T = inputs.loss_mask != 0
    proximal_T = (
        inputs.old_logprobs if inputs.old_logprobs is not None else inputs.logprobs
    ).detach()
    ratio_T = torch.exp(masked_log_ratio(inputs.logprobs, proximal_T, action_T))
    log_rho_T = masked_log_ratio(proximal_T, inputs.sampler_logprobs, action_T)
    rho_T = torch.exp(log_rho_T)

    no_T = torch.zeros_like(action_T)
    icepop_T = no_T
    if config.icepop:
        icepop_T = action_T & ((rho_T < config.icepop_low) | (rho_T > config.icepop_high))
    geo_T, veto_T = sequence_masks(
        log_rho_T,
        action_T,
        inputs.seq_ids,
        (config.geo_mask_low, config.geo_mask_high),
        config.veto_threshold,
    )
    geo_T = geo_T if config.geo_mask else no_T
    veto_T = veto_T if config.veto else no_T
    keep_T = action_T & ~(icepop_T | geo_T | veto_T)

    weight_T = rho_T.clamp(max=config.tis_cap) if config.tis else rho_T
    surrogate = clipped_surrogate(ratio_T, inputs.advantages, config)
    metrics = _clip_metrics(surrogate, keep_T)
    truncated_T = rho_T > config.tis_cap if config.tis else no_T
    metrics |= fraction_metric("tis_truncated_fraction", truncated_T, keep_T)
    metrics |= fraction_metric("masked_icepop_fraction", icepop_T, action_T)
    metrics |= fraction_metric("masked_geo_fraction", geo_T, action_T)
    metrics |= fraction_metric("masked_veto_fraction", veto_T, action_T)
    metrics |= mean_metric("behaviour_ratio", rho_T, action_T)
    return _finish(inputs, config, weight_T * surrogate.loss_T, keep_T, metrics)


def dppo_tv_loss(
    inputs: PolicyLossInputs, config: DPPOTVLossConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """DPPO, binary total-variation variant: mask tokens whose probability moved more than delta.

    loss = sum_t w_t * m_t * (-A_t r_t), r_t = pi_theta(a_t) / mu(a_t), mu the sampler. With
    the token probabilities p_t = exp(log pi_theta(a_t)) and q_t = exp(log mu(a_t)),
    |p_t - q_t| is the total variation between the Bernoulli distributions "the sampled token or
    not" under both policies (the paper's binary approximation of the TV trust region). By
    default m_t = 0 when |p_t - q_t| > delta, as the issue describes. With `directional`, m_t = 0
    only when the move goes the way the gradient would push it further (A_t > 0 and
    p_t - q_t > delta, or A_t < 0 and p_t - q_t < -delta), which is the paper's mask (the
    analogue of PPO's clip, which removes the gradient on one side only). The symmetric default
    also drops tokens the update would pull back into the region; with stale samples the
    gradient on them is the least trustworthy.

    The trust region is around the sampler, as in the paper's two-policy setup: `old_logprobs`
    is not used.

    Qi, Zhou, Liu, Pang, Du, Lin and Lee 2026, "Rethinking the Trust Region in LLM Reinforcement
    Learning" (arXiv:2602.04879). The default delta = 0.2 is a starting point, not a value taken
    from the paper.

    Metrics: `masked_dppo_fraction` among action tokens.
    """
    action_T = inputs.loss_mask != 0
    log_ratio_T = masked_log_ratio(inputs.logprobs, inputs.sampler_logprobs, action_T)
    ratio_T = torch.exp(log_ratio_T)
    zeros_T = torch.zeros_like(inputs.logprobs)
    p_T = torch.exp(torch.where(action_T, inputs.logprobs.detach(), zeros_T))
    q_T = torch.exp(torch.where(action_T, inputs.sampler_logprobs, zeros_T))
    moved_T = p_T - q_T
    if config.directional:
        out_T = ((inputs.advantages > 0) & (moved_T > config.delta)) | (
            (inputs.advantages < 0) & (moved_T < -config.delta)
        )
    else:
        out_T = moved_T.abs() > config.delta
    out_T = out_T & action_T
    keep_T = action_T & ~out_T
    metrics = fraction_metric("masked_dppo_fraction", out_T, action_T)
    return _finish(inputs, config, -inputs.advantages * ratio_T, keep_T, metrics)


def sft_loss(
    inputs: PolicyLossInputs, config: SFTLossConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Masked token negative log-likelihood (behaviour cloning of the trained tokens).

    loss = -sum_t w_t * m_t * log pi_theta(a_t), with m_t the loss mask and w_t the batch-wide
    reduction weight (`token_mean`: 1 / trained tokens of the batch, the usual SFT average).
    Advantages and the sampler's logprobs are not used: every trained token is a target.

    Metrics: `nll` (mean -log pi_theta over trained tokens) and `entropy` when given.
    """
    action_T = inputs.loss_mask != 0
    logprobs_T = torch.where(action_T, inputs.logprobs, torch.zeros_like(inputs.logprobs))
    loss = -(inputs.loss_weights * logprobs_T).sum()
    metrics = mean_metric("nll", -logprobs_T, action_T)
    if inputs.entropy is not None:
        metrics |= mean_metric("entropy", inputs.entropy, action_T)
    metrics["policy_loss_sum"] = loss.detach()
    return loss, metrics


def make_loss_fn(
    config: PPOLossConfig | DecoupledPPOLossConfig | DPPOTVLossConfig | SFTLossConfig,
) -> LossFn:
    """The configured loss as a `LossFn` of the micro-batch's inputs alone."""
    if isinstance(config, SFTLossConfig):
        sft_config = config

        def sft(inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            return sft_loss(inputs, sft_config)

        return sft
    if isinstance(config, PPOLossConfig):
        ppo_config = config

        def ppo(inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            return ppo_loss(inputs, ppo_config)

        return ppo
    if isinstance(config, DecoupledPPOLossConfig):
        decoupled_config = config

        def decoupled(inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            return decoupled_ppo_loss(inputs, decoupled_config)

        return decoupled
    dppo_config = config

    def dppo(inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return dppo_tv_loss(inputs, dppo_config)

    return dppo
