"""Step and evaluation figures from rollouts.

Reward and Pass@1 (every rubric criterion passed) are taken over rollouts that have a reward;
system errors are counted apart by kind and never enter a rate. Stop reasons are counted over
every trajectory that ran.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from bureau.loop.rollout import Rollout


def rollout_metrics(rollouts: Sequence[Rollout], prefix: str) -> dict[str, Any]:
    """`{prefix}/reward`, `{prefix}/pass_at_1` overall and per domain, stop reasons, errors."""
    metrics: dict[str, Any] = {}
    graded = [r for r in rollouts if r.reward is not None]
    by_domain: dict[str, list[Rollout]] = defaultdict(list)
    for r in graded:
        by_domain[r.request.task.domain].append(r)
    for name, subset in [("", graded), *((f"/{d}", s) for d, s in sorted(by_domain.items()))]:
        if subset:
            metrics[f"{prefix}/reward{name}"] = statistics.fmean(
                float(r.reward or 0) for r in subset
            )
            metrics[f"{prefix}/pass_at_1{name}"] = statistics.fmean(
                float(bool(r.passed)) for r in subset
            )
    metrics[f"{prefix}/trajectories"] = len(rollouts)
    metrics[f"{prefix}/graded"] = len(graded)
    errors = Counter(r.error_kind for r in rollouts if r.error_kind is not None)
    metrics[f"{prefix}/system_errors"] = sum(errors.values())
    for kind, n in errors.items():
        metrics[f"{prefix}/system_errors/{kind}"] = n
    for reason, n in Counter(r.record.stop_reason for r in rollouts).items():
        metrics[f"{prefix}/stop_reason/{reason}"] = n
    turns = [r.record.num_turns for r in rollouts if r.record.token_ids]
    if turns:
        metrics[f"{prefix}/turns_mean"] = statistics.fmean(turns)
    metrics[f"{prefix}/sampled_tokens"] = sum(r.record.num_sampled_tokens for r in rollouts)
    walls = [r.wall_s for r in rollouts]
    if walls:
        metrics[f"{prefix}/wall_s_mean"] = statistics.fmean(walls)
        metrics[f"{prefix}/wall_s_max"] = max(walls)
    return metrics


def eval_metrics(rollouts: Sequence[Rollout], *, seed: int = 0) -> dict[str, Any]:
    """The held-out report (`bureau.evaluation`): Pass@1 and reward with 95% intervals that
    resample tasks, overall, per domain and per template, system errors apart."""
    from bureau.evaluation.report import AttemptRow, summarize_attempts

    rows = [
        AttemptRow(
            task=r.request.task.name,
            domain=r.request.task.domain,
            passed=r.passed if r.reward is not None else None,
            reward=r.reward,
            system_error=r.error_kind,
            template=r.request.task.template or None,
            unseen_kind=r.request.task.unseen_kind,
        )
        for r in rollouts
    ]
    report = summarize_attempts(rows, seed=seed)
    result: dict[str, Any] = {"report": report.model_dump(mode="json")}
    groups = [
        ("", report.overall),
        *((f"/{d}", g) for d, g in sorted(report.domains.items())),
        *((f"/{t}", g) for t, g in sorted(report.templates.items())),
        *((f"/{k.replace(' ', '_')}", g) for k, g in sorted(report.kinds.items())),
    ]
    for suffix, group in groups:
        rate, mean = group.pass_at_1, group.mean_reward
        result[f"pass_at_1{suffix}"] = rate.rate
        result[f"pass_at_1_low{suffix}"] = rate.low
        result[f"pass_at_1_high{suffix}"] = rate.high
        result[f"reward{suffix}"] = mean.mean
        result[f"graded{suffix}"] = group.graded
    result["system_errors"] = report.overall.excluded
    return result
