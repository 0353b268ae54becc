"""Interval estimates for an eval: seeded percentile bootstrap intervals that resample tasks
(the independent unit: the attempts at one task share its difficulty), paired per-task
differences between two evals of the same tasks, Wilson score intervals, and the unbiased pass@k
estimator.

All functions are pure and deterministic (the bootstrap takes its seed), so the same attempts
always give the same report, whether they come from `bureau eval` or from the RL loop.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a binomial rate `successes / n`.

        center = (p + z²/2n) / (1 + z²/n)
        half   = z · sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)

    (Wilson 1927; Brown, Cai & DasGupta 2001 recommend it over the normal interval, which
    collapses to a point at 0/n and n/n.) With no trials there is no information: (0.0, 1.0).
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denominator
    # Rounding can push the bounds a hair outside [0, 1] at p = 0 or 1.
    return max(0.0, center - half), min(1.0, center + half)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The `q`-quantile (0 <= q <= 1) of sorted values, interpolating linearly between ranks
    (numpy's default "linear" method)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def bootstrap_mean_interval(
    values: Sequence[float], seed: int, resamples: int = 2000, confidence: float = 0.95
) -> tuple[float, float] | None:
    """A percentile bootstrap interval for the mean of `values` (Efron 1979).

    Draws `resamples` samples of len(values) with replacement using `random.Random(seed)`, takes
    each sample's mean, and returns the (1-c)/2 and (1+c)/2 quantiles of those means. None when
    there are no values; a single value (or constant values) gives a point interval.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n = len(values)
    if n == 0:
        return None
    rng = random.Random(seed)
    data = list(values)
    means = sorted(math.fsum(rng.choices(data, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - confidence) / 2
    return percentile(means, alpha), percentile(means, 1.0 - alpha)


def task_bootstrap_rate(
    per_task: Sequence[tuple[int, int]], seed: int, resamples: int = 2000, confidence: float = 0.95
) -> tuple[float, float] | None:
    """A cluster bootstrap interval for a pooled rate over tasks.

    `per_task` holds (successes, attempts) per task. The rate is sum(successes)/sum(attempts);
    each resample draws len(tasks) tasks with replacement (all of a task's attempts go together)
    and takes that ratio, and the interval is the (1-c)/2 and (1+c)/2 quantiles. Treating the
    attempts at one task as independent (a Wilson interval over attempts) would understate the
    spread whenever tasks differ in difficulty. None when no task has an attempt.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    tasks = [(s, n) for s, n in per_task if n > 0]
    if any(not 0 <= s <= n for s, n in tasks):
        raise ValueError(f"need 0 <= successes <= attempts per task, got {per_task}")
    if not tasks:
        return None
    rng = random.Random(seed)
    rates = []
    for _ in range(resamples):
        sample = rng.choices(tasks, k=len(tasks))
        rates.append(sum(s for s, _ in sample) / sum(n for _, n in sample))
    rates.sort()
    alpha = (1.0 - confidence) / 2
    return percentile(rates, alpha), percentile(rates, 1.0 - alpha)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from `n` attempts of which `c` passed (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code"):

        pass@k = 1 - C(n-c, k) / C(n, k)

    the probability that at least one of k attempts drawn without replacement from the n passes.
    Exact integer binomials, so no overflow or cancellation for any n.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:  # every draw of k contains a pass
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def k_levels(k: int) -> list[int]:
    """The k' at which pass@k' is reported for k attempts: powers of two below k, and k."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    levels = []
    power = 1
    while power < k:
        levels.append(power)
        power *= 2
    levels.append(k)
    return levels


def paired_task_differences(
    run: Sequence[tuple[str, float]], against: Sequence[tuple[str, float]]
) -> list[float]:
    """Per task, the mean of `run`'s values minus the mean of `against`'s, for the tasks both
    have ((task, value) pairs; several attempts per task allowed), in task order. Comparing
    the same tasks keeps the spread between easy and hard tasks out of the difference."""

    def means(pairs: Sequence[tuple[str, float]]) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        for task, value in pairs:
            values.setdefault(task, []).append(value)
        return {task: math.fsum(v) / len(v) for task, v in values.items()}

    mine, theirs = means(run), means(against)
    return [mine[task] - theirs[task] for task in sorted(mine.keys() & theirs.keys())]


@dataclass(frozen=True)
class PairedDifference:
    """`after` minus `before` on the tasks both evaluated: the mean over tasks of each task's
    difference in mean value, with a percentile bootstrap interval that resamples tasks."""

    tasks: int
    mean: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def paired_difference(
    after: Sequence[tuple[str, float]],
    before: Sequence[tuple[str, float]],
    seed: int,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> PairedDifference | None:
    """The paired per-task difference of two evals ((task, value) pairs, several attempts per
    task allowed; see `paired_task_differences`) and its task-resampled interval; None when
    no task is in both."""
    differences = paired_task_differences(after, before)
    interval = bootstrap_mean_interval(differences, seed, resamples, confidence)
    if interval is None:
        return None
    mean = math.fsum(differences) / len(differences)
    return PairedDifference(len(differences), mean, interval[0], interval[1])
