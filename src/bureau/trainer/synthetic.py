"""Synthetic training data for tests, benchmarks and smoke runs: no engine, no sandbox.

`synthetic_batch` makes a `TrainBatch` of random token sequences (a prompt, then a sampled
completion) with given lengths; `synthetic_records` makes trajectory records in groups, with
rewards, that `bureau train-offline` reads back from Parquet. `reinforce_loss` is the
simplest `LossFn`: the policy gradient of the weighted, advantage-scaled logprobs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING

from bureau.records import NOT_SAMPLED_VERSION, TrainBatch, TrajectoryRecord, TurnRecord

if TYPE_CHECKING:
    import torch

    from bureau.algo.inputs import PolicyLossInputs

# Ordinary Qwen3 vocabulary ids (below the special tokens), so text-like but arbitrary.
_TOKEN_RANGE = (1000, 30000)


def lognormal_lengths(
    count: int,
    *,
    median: float,
    p99_over_p50: float,
    seed: int,
    low: int = 2,
    high: int = 1 << 20,
    stratified: bool = False,
) -> list[int]:
    """`count` lengths from a lognormal with this median and p99/p50 ratio, clamped.

    `stratified` takes the quantiles (k + 0.5) / count instead of random draws (then shuffles
    them), so even a small sample has the distribution's p50 and p99.
    """
    sigma = math.log(p99_over_p50) / NormalDist().inv_cdf(0.99)
    rng = random.Random(seed)
    if stratified:
        z = [NormalDist().inv_cdf((k + 0.5) / count) for k in range(count)]
        rng.shuffle(z)
    else:
        z = [rng.gauss(0.0, 1.0) for _ in range(count)]
    return [min(high, max(low, round(median * math.exp(sigma * v)))) for v in z]


def synthetic_batch(
    lengths: Sequence[int], *, seed: int = 0, prompt_fraction: float = 0.25
) -> TrainBatch:
    """Sequences of these lengths: a prompt (about `prompt_fraction`, at least 1 token), then a
    sampled completion. Advantages are ±1 per sequence; loss weights are the token mean over
    the batch's sampled tokens."""
    rng = random.Random(seed)
    token_ids, loss_mask, sampler, advantages, versions = [], [], [], [], []
    for n in lengths:
        prompt = min(n - 1, max(1, round(n * prompt_fraction))) if n > 1 else 1
        token_ids.append([rng.randrange(*_TOKEN_RANGE) for _ in range(n)])
        mask = [0] * prompt + [1] * (n - prompt)
        loss_mask.append(mask)
        sampler.append([-rng.uniform(5.0, 15.0) if m else 0.0 for m in mask])
        sign = rng.choice((-1.0, 1.0))
        advantages.append([sign * m for m in mask])
        versions.append([0 if m else NOT_SAMPLED_VERSION for m in mask])
    trained = max(1, sum(map(sum, loss_mask)))
    weights = [[m / trained for m in mask] for mask in loss_mask]
    return TrainBatch(token_ids, loss_mask, sampler, advantages, weights, weight_versions=versions)


def reinforce_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`-sum_t w_t * A_t * log pi(a_t)`: the plain policy gradient, as a `LossFn`."""
    loss = -(inputs.loss_weights * inputs.advantages * inputs.logprobs).sum()
    mask = inputs.loss_mask
    return loss, {
        "logprob_sum": (inputs.logprobs.detach() * mask).sum(),
        "logprob_count": mask.sum(),
    }


def synthetic_records(
    num_groups: int,
    group_size: int,
    *,
    seed: int = 0,
    prompt_length: int = 8,
    completion_length: tuple[int, int] = (4, 24),
    model: str = "synthetic",
) -> list[TrajectoryRecord]:
    """Single-turn trajectory records in groups sharing a prompt, with rewards in {0, 1}."""
    rng = random.Random(seed)
    records = []
    for g in range(num_groups):
        prompt = [rng.randrange(*_TOKEN_RANGE) for _ in range(prompt_length)]
        for k in range(group_size):
            n = rng.randint(*completion_length)
            completion = [rng.randrange(*_TOKEN_RANGE) for _ in range(n)]
            logprobs = [-rng.uniform(5.0, 15.0) for _ in range(n)]
            records.append(
                TrajectoryRecord(
                    trajectory_id=f"g{g}-t{k}",
                    task_name=f"synthetic/{g}",
                    model=model,
                    prompt_ids=prompt,
                    token_ids=prompt + completion,
                    loss_mask=[0] * prompt_length + [1] * n,
                    sampler_logprobs=[0.0] * prompt_length + logprobs,
                    weight_versions=[NOT_SAMPLED_VERSION] * prompt_length + [0] * n,
                    messages=[],
                    tools=[],
                    turns=[TurnRecord(completion, logprobs, [0] * n, "stop", "synthetic", 0.0)],
                    tool_calls=[],
                    stop_reason="answered",
                    llm_time_s=0.0,
                    tool_time_s=0.0,
                    total_time_s=0.0,
                    group_id=f"g{g}",
                    reward=float(rng.random() < 0.5),
                )
            )
    return records
