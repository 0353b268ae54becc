"""The eval's estimators on literal numbers, computed by hand in the comments."""

from __future__ import annotations

import math

import pytest

from bureau.evaluation.stats import (
    bootstrap_mean_interval,
    k_levels,
    pass_at_k,
    percentile,
    wilson_interval,
)


def test_wilson_interval_hand_computed() -> None:
    # 8/10, z = 1.96: z²/n = 0.38416, center = (0.8 + 0.19208) / 1.38416 = 0.71674,
    # half = 1.96 · sqrt(0.016 + 0.009604) / 1.38416 = 0.22658.
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    # 5/10 is symmetric about 0.5: half = 1.96 · sqrt(0.025 + 0.009604) / 1.38416 = 0.26340.
    low, high = wilson_interval(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)


def test_wilson_interval_edges() -> None:
    # 0/n: the lower bound is 0 and the upper is z² / (n + z²) = 3.8416 / 13.8416.
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(3.8416 / 13.8416, abs=1e-12)
    # n/n: the mirror image, lower = n / (n + z²).
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(10 / 13.8416, abs=1e-12)
    assert high == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)  # no attempts, no information
    # A wider z gives a wider interval.
    assert wilson_interval(8, 10, z=2.576)[0] < wilson_interval(8, 10)[0]
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(-1, 2)


def test_percentile_interpolates_linearly() -> None:
    values = [0.0, 1.0, 2.0, 10.0]
    assert percentile(values, 0.0) == 0.0
    assert percentile(values, 1.0) == 10.0
    assert percentile(values, 0.5) == 1.5  # position 1.5, between 1 and 2
    assert percentile(values, 0.9) == pytest.approx(2.0 + 8.0 * 0.7)  # position 2.7


def test_bootstrap_mean_interval() -> None:
    assert bootstrap_mean_interval([], seed=0) is None
    assert bootstrap_mean_interval([0.4], seed=0) == (0.4, 0.4)
    assert bootstrap_mean_interval([0.25] * 7, seed=3) == (0.25, 0.25)
    # Two values: a resample's mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so the 2.5%
    # and 97.5% quantiles of many resampled means are 0 and 1.
    assert bootstrap_mean_interval([0.0, 1.0], seed=0, resamples=4000) == (0.0, 1.0)
    values = [0.0, 0.1, 0.3, 0.5, 0.5, 0.9, 1.0, 1.0, 0.2, 0.0]
    low, high = bootstrap_mean_interval(values, seed=7) or (math.nan, math.nan)
    assert low < sum(values) / len(values) < high
    assert bootstrap_mean_interval(values, seed=7) == (low, high)  # the seed fixes it
    # With few resamples the quantiles depend on the draws, so on the seed.
    assert bootstrap_mean_interval(values, 7, 25) != bootstrap_mean_interval(values, 8, 25)
    # The normal approximation gives a similar width: 2 · 1.96 · sd / sqrt(n).
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    assert high - low == pytest.approx(2 * 1.96 * sd / math.sqrt(len(values)), rel=0.25)
    with pytest.raises(ValueError):
        bootstrap_mean_interval(values, seed=0, resamples=0)


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is c/n
    assert pass_at_k(4, 0, 4) == 0.0  # all fail
    assert pass_at_k(4, 4, 1) == 1.0  # all pass
    assert pass_at_k(4, 1, 4) == 1.0  # n - c < k: every draw of 4 holds the pass
    assert pass_at_k(3, 2, 2) == 1.0
    # Large n stays exact (integer binomials): 1 - C(199,100)/C(200,100) = 1 - 100/200.
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)
    for bad in [(0, 0, 1), (3, 4, 1), (3, 1, 4), (3, 1, 0)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_k_levels() -> None:
    assert k_levels(1) == [1]
    assert k_levels(2) == [1, 2]
    assert k_levels(5) == [1, 2, 4, 5]
    assert k_levels(8) == [1, 2, 4, 8]
    with pytest.raises(ValueError):
        k_levels(0)


def test_paired_differences_compare_task_means_on_shared_tasks() -> None:
    from bureau.evaluation.stats import paired_task_differences

    run = [("a", 1.0), ("a", 0.0), ("b", 1.0), ("c", 0.5)]
    base = [("a", 1.0), ("b", 0.25), ("b", 0.75), ("d", 1.0)]
    # a: 0.5 - 1.0; b: 1.0 - 0.5; c and d are in one run only.
    assert paired_task_differences(run, base) == [-0.5, 0.5]
    assert paired_task_differences([], base) == []


def test_task_bootstrap_resamples_tasks_not_attempts() -> None:
    from bureau.evaluation.stats import task_bootstrap_rate

    # Two tasks, one always passed and one never, three attempts each. Over attempts (3 of 6)
    # Wilson says [0.188, 0.812]; but a resample of the two tasks is both passed (rate 1, p 1/4),
    # one of each (0.5, p 1/2) or both failed (0, p 1/4): the 95% interval is [0, 1].
    assert task_bootstrap_rate([(3, 3), (0, 3)], seed=0, resamples=4000) == (0.0, 1.0)
    low, high = wilson_interval(3, 6)
    assert (round(low, 3), round(high, 3)) == (0.188, 0.812)
    # The rate is pooled over attempts: tasks (2 of 2) and (0 of 1) resample to 4/4, 0/2 or
    # 2/3 (one of each, p 1/2), so the median of the resampled rates is 2/3.
    assert task_bootstrap_rate([(2, 2), (0, 1)], seed=1, confidence=0.0) == (2 / 3, 2 / 3)
    assert task_bootstrap_rate([(2, 4)] * 5, seed=2) == (0.5, 0.5)  # alike tasks: a point
    assert task_bootstrap_rate([(1, 1), (0, 0)], seed=0) == (1.0, 1.0)  # no attempts: no weight
    assert task_bootstrap_rate([], seed=0) is None
    with pytest.raises(ValueError):
        task_bootstrap_rate([(3, 2)], seed=0)


def test_paired_difference_interval_over_tasks() -> None:
    from bureau.evaluation.stats import paired_difference

    after = [("a", 1.0), ("a", 1.0), ("b", 0.0), ("b", 1.0), ("c", 1.0)]
    before = [("a", 0.0), ("a", 1.0), ("b", 0.0), ("b", 0.0)]
    # a: 1 - 0.5, b: 0.5 - 0; c was not evaluated before. Every resample's mean is 0.5.
    paired = paired_difference(after, before, seed=0)
    assert paired is not None
    assert (paired.tasks, paired.mean, paired.low, paired.high) == (2, 0.5, 0.5, 0.5)
    assert paired.excludes_zero
    # One task gained a pass and one lost it: a mean of 0, resampled to -1, 0 or 1.
    even = paired_difference([("a", 1.0), ("b", 0.0)], [("a", 0.0), ("b", 1.0)], seed=0)
    assert even is not None and (even.mean, even.low, even.high) == (0.0, -1.0, 1.0)
    assert not even.excludes_zero
    assert paired_difference([("a", 1.0)], [("b", 1.0)], seed=0) is None
