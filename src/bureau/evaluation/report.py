"""From per-attempt results to an eval report: Pass@1, mean reward and pass@k, overall and per
domain, each with a 95% interval.

The input is a neutral row per attempt (`AttemptRow`: task, domain, passed, reward, system
error), so `bureau eval` and the RL loop's own rollouts are summarized by the same function. A
row with a system error is a failure of the machinery (sandbox, engine, verifier): it carries no
verdict, is counted by kind and left out of every rate. Everything the agent did, including
crashing its own tools or running out of time, is a graded failure by then (see
`bureau.evaluation.attempts`), so a policy cannot improve its score by breaking things.

Intervals: a Wilson score interval for Pass@1 (over graded attempts, which treats the attempts
at one task as independent), a seeded percentile bootstrap over attempts for the mean reward,
and one over tasks for pass@k (the per-task unbiased estimate, averaged over the tasks with at
least k graded attempts). `pass_at_1_excluded_as_failed` is the lower bound that counts every
excluded attempt as a failure: when it drifts away from Pass@1, the exclusions matter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from bureau.evaluation.stats import bootstrap_mean_interval, k_levels, pass_at_k, wilson_interval

REPORT_FORMAT: Literal["bureau-eval-report/1"] = "bureau-eval-report/1"


@dataclass(frozen=True)
class AttemptRow:
    """One attempt at one task. Exactly one of: a verdict (`passed` and `reward`), or a
    `system_error` (the machinery failed; no verdict)."""

    task: str
    domain: str
    passed: bool | None
    """Whether every rubric criterion passed (the verifier's own pass flag)."""
    reward: float | None
    """The verifier's scalar reward (the fraction of criteria passed, for bureau rubrics)."""
    system_error: str | None = None
    """The kind of machinery failure that left this attempt without a verdict."""
    agent_failure: str | None = None
    """Why a graded failure never reached the verifier (agent_timeout, ...), for diagnostics."""

    def __post_init__(self) -> None:
        if self.system_error is not None:
            if self.passed is not None or self.reward is not None:
                raise ValueError(f"{self.task}: a system error carries no verdict or reward")
            return
        if not isinstance(self.passed, bool) or self.reward is None:
            raise ValueError(f"{self.task}: a graded attempt needs passed (bool) and a reward")
        if not math.isfinite(self.reward):
            raise ValueError(f"{self.task}: reward {self.reward} is not finite")

    @property
    def excluded(self) -> bool:
        return self.system_error is not None


class RateEstimate(BaseModel):
    """A rate with its Wilson interval; `rate` is None when nothing was counted."""

    successes: int
    n: int
    rate: float | None
    low: float
    high: float


class MeanEstimate(BaseModel):
    """A mean with its percentile-bootstrap interval; all None when there are no values."""

    n: int
    mean: float | None
    low: float | None
    high: float | None


class GroupReport(BaseModel):
    """The summary of a set of tasks (all of them, or one domain)."""

    tasks: int
    attempts: int
    graded: int
    excluded: int
    pass_at_1: RateEstimate
    mean_reward: MeanEstimate
    pass_at_1_excluded_as_failed: RateEstimate
    pass_at_k: dict[str, MeanEstimate]
    """k' -> mean over tasks with at least k' graded attempts of the unbiased pass@k'."""
    system_errors: dict[str, int]
    agent_failures: dict[str, int]


class TaskReport(BaseModel):
    """One task's attempts, in the order they were given."""

    task: str
    domain: str
    attempts: int
    graded: int
    passes: int
    passed: list[bool | None]
    rewards: list[float | None]
    system_errors: list[str | None]
    agent_failures: list[str | None]


class EvalReport(BaseModel):
    """Overall, per-domain and per-task results; `model_dump(mode="json")` is JSON-ready."""

    format: Literal["bureau-eval-report/1"] = REPORT_FORMAT
    k: int
    """Attempts per task that pass@k is reported up to."""
    seed: int
    resamples: int
    z: float
    overall: GroupReport
    domains: dict[str, GroupReport]
    tasks: list[TaskReport]
    tasks_all_excluded: list[str]
    """Tasks that have attempts but no graded one: they count in no rate."""


def summarize_attempts(
    rows: Iterable[AttemptRow],
    *,
    seed: int,
    k: int | None = None,
    resamples: int = 2000,
    z: float = 1.96,
) -> EvalReport:
    """Summarize attempts into an `EvalReport`.

    `k` (default: the most attempts any task has) sets the pass@k' levels: 1, 2, 4, ... and k,
    reported only when k > 1. `seed` drives every bootstrap, so the report is reproducible.
    """
    by_task: dict[str, list[AttemptRow]] = {}
    for row in rows:
        by_task.setdefault(row.task, []).append(row)
    for task, attempts in by_task.items():
        domains = {row.domain for row in attempts}
        if len(domains) > 1:
            raise ValueError(f"task {task} has attempts in several domains: {sorted(domains)}")
    if k is None:
        k = max((len(attempts) for attempts in by_task.values()), default=1)
    levels = k_levels(k) if k > 1 else []
    domain_names = sorted({attempts[0].domain for attempts in by_task.values()})

    def group(tasks: dict[str, list[AttemptRow]]) -> GroupReport:
        return _summarize_group(tasks, seed=seed, levels=levels, resamples=resamples, z=z)

    return EvalReport(
        k=k,
        seed=seed,
        resamples=resamples,
        z=z,
        overall=group(by_task),
        domains={
            name: group({t: a for t, a in by_task.items() if a[0].domain == name})
            for name in domain_names
        },
        tasks=[_task_report(task, attempts) for task, attempts in by_task.items()],
        tasks_all_excluded=[t for t, a in by_task.items() if all(r.excluded for r in a)],
    )


def _summarize_group(
    tasks: dict[str, list[AttemptRow]],
    *,
    seed: int,
    levels: Sequence[int],
    resamples: int,
    z: float,
) -> GroupReport:
    rows = [row for attempts in tasks.values() for row in attempts]
    graded = [row for row in rows if not row.excluded]
    passes = sum(bool(row.passed) for row in graded)
    pass_at = {}
    for level in levels:
        per_task = [
            pass_at_k(len(g), sum(bool(r.passed) for r in g), level)
            for g in ([r for r in attempts if not r.excluded] for attempts in tasks.values())
            if len(g) >= level
        ]
        pass_at[str(level)] = _mean(per_task, seed, resamples)
    return GroupReport(
        tasks=len(tasks),
        attempts=len(rows),
        graded=len(graded),
        excluded=len(rows) - len(graded),
        pass_at_1=_rate(passes, len(graded), z),
        mean_reward=_mean([float(row.reward or 0.0) for row in graded], seed, resamples),
        pass_at_1_excluded_as_failed=_rate(passes, len(rows), z),
        pass_at_k=pass_at,
        system_errors=_count(row.system_error for row in rows),
        agent_failures=_count(row.agent_failure for row in graded),
    )


def _rate(successes: int, n: int, z: float) -> RateEstimate:
    low, high = wilson_interval(successes, n, z)
    return RateEstimate(
        successes=successes, n=n, rate=successes / n if n else None, low=low, high=high
    )


def _mean(values: Sequence[float], seed: int, resamples: int) -> MeanEstimate:
    interval = bootstrap_mean_interval(values, seed, resamples)
    if interval is None:
        return MeanEstimate(n=0, mean=None, low=None, high=None)
    return MeanEstimate(
        n=len(values), mean=math.fsum(values) / len(values), low=interval[0], high=interval[1]
    )


def _count(kinds: Iterable[str | None]) -> dict[str, int]:
    return dict(Counter(kind for kind in kinds if kind is not None).most_common())


def _task_report(task: str, attempts: list[AttemptRow]) -> TaskReport:
    graded = [row for row in attempts if not row.excluded]
    return TaskReport(
        task=task,
        domain=attempts[0].domain,
        attempts=len(attempts),
        graded=len(graded),
        passes=sum(bool(row.passed) for row in graded),
        passed=[row.passed for row in attempts],
        rewards=[row.reward for row in attempts],
        system_errors=[row.system_error for row in attempts],
        agent_failures=[row.agent_failure for row in attempts],
    )
