"""RL algorithms as pure functions of tensors: advantages, policy losses, loss reductions.

Nothing here imports Ray, HTTP clients, sandboxes or a model: credit assignment happens on
trajectory records once their group is complete, and the trainer only sees per-token tensors
(`PolicyLossInputs`) and a loss function, so it never knows which algorithm produced them.
"""

from bureau.algo.advantages import (
    AdvantageConfig,
    AdvantageResult,
    advantages_for_records,
    broadcast_advantage,
    compute_advantages,
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
)
from bureau.algo.inputs import LossFn, PolicyLossInputs
from bureau.algo.losses import (
    DecoupledPPOLossConfig,
    DPPOTVLossConfig,
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
    finalize_metrics,
    policy_metrics,
    reduce_metrics,
    staleness_histogram,
)
from bureau.algo.reductions import ReductionConfig, loss_weights

__all__ = [
    "AdvantageConfig",
    "AdvantageResult",
    "DPPOTVLossConfig",
    "DecoupledPPOLossConfig",
    "KLPenaltyConfig",
    "LossFn",
    "PPOLossConfig",
    "PolicyLossConfig",
    "PolicyLossInputs",
    "ReductionConfig",
    "advantages_for_records",
    "broadcast_advantage",
    "combine_metrics",
    "compute_advantages",
    "decoupled_ppo_loss",
    "dppo_tv_loss",
    "dr_grpo_advantages",
    "finalize_metrics",
    "grpo_advantages",
    "kl_penalty",
    "loss_weights",
    "make_loss_fn",
    "policy_metrics",
    "ppo_loss",
    "reduce_metrics",
    "rloo_advantages",
    "staleness_histogram",
]
