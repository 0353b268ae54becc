"""Per-step policy metrics over action tokens, and how micro-batch metrics combine.

A loss function returns its metrics as detached tensors whose name's suffix says how they
combine across micro-batches (see `bureau.algo.inputs.LossFn`): `*_sum` and `*_count` add,
`*_max` and `*_min` take the extreme, `*_values` concatenate. A mean `x` is always sent as the
pair `x_sum` / `x_count`, a fraction `x_fraction` as (tokens where it holds) / (tokens it is
measured on: action tokens unless the loss says otherwise), so the step's value covers the
whole batch however it was packed. Sums are taken in float32 whatever the inputs' dtype.

The mismatch metrics compare the trainer's logprobs with the sampler's on the same tokens: the
two should agree up to numerics when the weights are the same, and drift apart with staleness.

Shape legend: T tokens of one micro-batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from bureau.algo.inputs import PolicyLossInputs

ADDITIVE_SUFFIXES = ("_sum", "_count")
"""Suffixes of metrics that add across micro-batches."""
DEFAULT_QUANTILES = (0.5, 0.99)
"""Quantiles `reduce_metrics` reports for every `*_values` metric."""


def masked_log_ratio(
    numerator_T: torch.Tensor, denominator_T: torch.Tensor, action_T: torch.Tensor
) -> torch.Tensor:
    """numerator - denominator on action tokens, 0 elsewhere.

    Positions off the mask may hold any finite value, so their difference could overflow once
    exponentiated (and inf * 0 is nan); zeroing them first keeps every ratio finite there.
    """
    return torch.where(action_T, numerator_T - denominator_T, torch.zeros_like(numerator_T))


def mean_metric(
    name: str, values_T: torch.Tensor, action_T: torch.Tensor
) -> dict[str, torch.Tensor]:
    """`name_sum` and `name_count` of `values_T` over action tokens (a mean once combined)."""
    values_T = values_T.detach().float()
    return {
        f"{name}_sum": torch.where(action_T, values_T, torch.zeros_like(values_T)).sum(),
        f"{name}_count": action_T.sum().to(values_T.dtype),
    }


def fraction_metric(
    name: str, holds_T: torch.Tensor, among_T: torch.Tensor
) -> dict[str, torch.Tensor]:
    """`name_sum` / `name_count`: tokens of `among_T` where `holds_T`, over tokens of `among_T`."""
    return mean_metric(name, (holds_T & among_T).float(), among_T)


def extreme_metrics(
    name: str, values_T: torch.Tensor, action_T: torch.Tensor
) -> dict[str, torch.Tensor]:
    """`name_max` and `name_min` over action tokens (omitted when there are none)."""
    if not bool(action_T.any()):
        return {}
    selected = values_T.detach()[action_T]
    return {f"{name}_max": selected.max(), f"{name}_min": selected.min()}


def policy_metrics(inputs: PolicyLossInputs) -> dict[str, torch.Tensor]:
    """Metrics every loss reports, over action tokens (loss_mask 1).

    - `mismatch_kl`: k3 estimate of KL(sampler || trainer) per token, exp(d) - 1 - d with
      d = log pi_trainer - log pi_sampler (Schulman 2020, "Approximating KL Divergence"; the
      tokens are samples of the sampler, so this is the estimator's unbiased, nonnegative form).
    - `abs_logprob_diff` mean and max: |log pi_trainer - log pi_sampler|.
    - `importance_ratio` mean, and `importance_ratio_values` for quantiles: pi_trainer/pi_sampler.
    - `entropy` mean, when the trainer passes the policy's entropy.
    - `weight_version` min and max, when the batch carries weight versions.
    """
    action_T = inputs.loss_mask != 0
    log_ratio_T = masked_log_ratio(inputs.logprobs.detach(), inputs.sampler_logprobs, action_T)
    ratio_T = torch.exp(log_ratio_T)
    metrics: dict[str, torch.Tensor] = {}
    metrics |= mean_metric("mismatch_kl", ratio_T - 1 - log_ratio_T, action_T)
    metrics |= mean_metric("abs_logprob_diff", log_ratio_T.abs(), action_T)
    metrics |= {"abs_logprob_diff_max": log_ratio_T.abs().max()} if action_T.any() else {}
    metrics |= mean_metric("importance_ratio", ratio_T, action_T)
    metrics["importance_ratio_values"] = ratio_T[action_T]
    if inputs.entropy is not None:
        metrics |= mean_metric("entropy", inputs.entropy, action_T)
    if inputs.weight_versions is not None:
        metrics |= extreme_metrics("weight_version", inputs.weight_versions, action_T)
    return metrics


def staleness_histogram(
    weight_versions: torch.Tensor | Sequence[int], current_version: int
) -> dict[int, int]:
    """Sampled tokens by staleness, `current_version - version`, in ascending staleness.

    Tokens with a negative version were not sampled (prompts, observations) and are skipped.
    Counts are tokens, not trajectories: a multi-turn trajectory can span weight updates.
    """
    versions = torch.as_tensor(weight_versions, dtype=torch.int64).flatten()
    staleness, counts = torch.unique(current_version - versions[versions >= 0], return_counts=True)
    return dict(zip(staleness.tolist(), counts.tolist(), strict=True))


def _kind(name: str) -> str:
    for suffix in (*ADDITIVE_SUFFIXES, "_max", "_min", "_values"):
        if name.endswith(suffix):
            return suffix
    raise ValueError(f"metric {name!r} has no combining suffix (_sum, _count, _max, _min, _values)")


def combine_metrics(
    metrics: Iterable[Mapping[str, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """Micro-batch metrics combined into the step's, by suffix; names keep their suffix.

    The result still combines the same way, e.g. across ranks before `finalize_metrics`.
    """
    combined: dict[str, torch.Tensor] = {}
    for micro in metrics:
        for name, value in micro.items():
            value = value.detach()
            kind = _kind(name)
            if name not in combined:
                combined[name] = value.flatten() if kind == "_values" else value
            elif kind in ADDITIVE_SUFFIXES:
                combined[name] = combined[name] + value
            elif kind == "_max":
                combined[name] = torch.maximum(combined[name], value)
            elif kind == "_min":
                combined[name] = torch.minimum(combined[name], value)
            else:
                combined[name] = torch.cat([combined[name], value.flatten()])
    return combined


def _quantiles(values: torch.Tensor, quantiles: Sequence[float]) -> list[float]:
    """Quantiles with linear interpolation between order statistics (numpy's default).

    By sorting rather than `torch.quantile`, which refuses inputs above 2**24 elements: a
    step's tokens can exceed that.
    """
    ordered = torch.sort(values.detach().to(torch.float64).cpu().flatten()).values
    last = ordered.numel() - 1
    result = []
    for q in quantiles:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        position = q * last
        below = int(position)
        value = float(ordered[below])
        frac = position - below
        if frac > 0:  # weighted form, so a pair of equal infinities stays inf rather than nan
            value = value * (1 - frac) + float(ordered[below + 1]) * frac
        result.append(value)
    return result


def _quantile_name(q: float) -> str:
    return f"p{q * 100:g}"


def finalize_metrics(
    combined: Mapping[str, torch.Tensor], quantiles: Sequence[float] = DEFAULT_QUANTILES
) -> dict[str, float]:
    """Combined metrics as plain numbers for logging.

    `x_sum` with its `x_count` becomes the mean `x` (left out when the count is 0); a `x_sum`
    without a count is a total and becomes `x`; a `x_count` without a sum is kept as is;
    `*_max` and `*_min` are kept; `x_values` becomes `x_p50`, `x_p99`, ... (the `quantiles`,
    linear interpolation; left out when empty).
    """
    result: dict[str, float] = {}
    for name, value in combined.items():
        kind = _kind(name)
        base = name[: -len(kind)]
        if kind == "_sum":
            count = combined.get(f"{base}_count")
            if count is None:
                result[base] = float(value)
            elif float(count) > 0:
                result[base] = float(value) / float(count)
        elif kind == "_count":
            if f"{base}_sum" not in combined:
                result[name] = float(value)
        elif kind == "_values":
            if value.numel() > 0:
                for q, v in zip(quantiles, _quantiles(value, quantiles), strict=True):
                    result[f"{base}_{_quantile_name(q)}"] = v
        else:
            result[name] = float(value)
    return result


def reduce_metrics(
    metrics: Iterable[Mapping[str, torch.Tensor]], quantiles: Sequence[float] = DEFAULT_QUANTILES
) -> dict[str, float]:
    """The step's metrics from its micro-batches' (`combine_metrics`, then `finalize_metrics`)."""
    return finalize_metrics(combine_metrics(metrics), quantiles)
