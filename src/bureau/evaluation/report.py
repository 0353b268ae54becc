"""From per-attempt results to an eval report: Pass@1, mean reward and pass@k, overall, per
domain and per template, each with a 95% interval; and the paired comparison of two reports.

The input is a neutral row per attempt (`AttemptRow`: task, domain, passed, reward, system
error), so `bureau eval` and the RL loop's own rollouts are summarized by the same function. A
row with a system error is a failure of the machinery (sandbox, engine, verifier): it carries no
verdict, is counted by kind and left out of every rate. Everything the agent did, including
crashing its own tools or running out of time, is a graded failure by then (see
`bureau.evaluation.attempts`), so a policy cannot improve its score by breaking things.

Intervals resample tasks, the independent unit (the attempts at one task share its difficulty):
a seeded cluster bootstrap for Pass@1 and the mean reward (pooled over graded attempts, each
resample drawing whole tasks), and a bootstrap over tasks for pass@k (the per-task unbiased
estimate, averaged over the tasks with at least k graded attempts).
`pass_at_1_excluded_as_failed` is the lower bound that counts every excluded attempt as a
failure: when it drifts away from Pass@1, the exclusions matter.

`compare_reports(after, before)` pairs two reports on the tasks both graded: per task the
difference in Pass@1 (and mean reward), averaged over tasks, with an interval that resamples
tasks. Comparing the same tasks keeps the spread between easy and hard tasks out of the
difference, so a real change shows with fewer tasks than two separate intervals need.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from bureau.evaluation.stats import (
    PairedDifference,
    bootstrap_mean_interval,
    k_levels,
    paired_difference,
    pass_at_k,
    percentile,
    task_bootstrap_rate,
)

REPORT_FORMAT: Literal["bureau-eval-report/2"] = "bureau-eval-report/2"
CONFIDENCE = 0.95


KIND_GROUPS = {False: "seen kinds", True: "unseen kinds"}
"""The names of the report's `kinds` groups: templates a training split has, and not."""


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
    template: str | None = None
    """The task's template (`law.starter_register_value`), when the dataset records one."""
    unseen_kind: bool | None = None
    """Whether the template is a kind no training split has, when the dataset says."""

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
    """A rate with its task-resampled interval; `rate` is None when nothing was counted."""

    successes: int
    n: int
    rate: float | None
    low: float
    high: float


class MeanEstimate(BaseModel):
    """A mean with its task-resampled percentile-bootstrap interval; all None without values."""

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
    template: str | None = None
    unseen_kind: bool | None = None
    attempts: int
    graded: int
    passes: int
    passed: list[bool | None]
    rewards: list[float | None]
    system_errors: list[str | None]
    agent_failures: list[str | None]


class EvalReport(BaseModel):
    """Overall, per-domain and per-task results; `model_dump(mode="json")` is JSON-ready."""

    format: Literal["bureau-eval-report/2"] = REPORT_FORMAT
    k: int
    """Attempts per task that pass@k is reported up to."""
    seed: int
    resamples: int
    confidence: float = CONFIDENCE
    interval: Literal["task-bootstrap"] = "task-bootstrap"
    """How every interval is made: a percentile bootstrap that resamples tasks."""
    overall: GroupReport
    domains: dict[str, GroupReport]
    templates: dict[str, GroupReport] = {}
    """Per template, for the tasks whose template is known."""
    kinds: dict[str, GroupReport] = {}
    """`seen kinds` and `unseen kinds` (templates no training split has), when tasks say."""
    tasks: list[TaskReport]
    tasks_all_excluded: list[str]
    """Tasks that have attempts but no graded one: they count in no rate."""


def summarize_attempts(
    rows: Iterable[AttemptRow],
    *,
    seed: int,
    k: int | None = None,
    resamples: int = 2000,
    confidence: float = CONFIDENCE,
) -> EvalReport:
    """Summarize attempts into an `EvalReport`.

    `k` (default: the most attempts any task has) sets the pass@k' levels: 1, 2, 4, ... and k,
    reported only when k > 1. `seed` drives every bootstrap, so the report is reproducible.
    """
    by_task: dict[str, list[AttemptRow]] = {}
    for row in rows:
        by_task.setdefault(row.task, []).append(row)
    for task, attempts in by_task.items():
        for what, values in (
            ("domains", {row.domain for row in attempts}),
            ("templates", {row.template for row in attempts}),
            ("kinds", {row.unseen_kind for row in attempts}),
        ):
            if len(values) > 1:
                found = sorted(map(str, values))
                raise ValueError(f"task {task} has attempts in several {what}: {found}")
    if k is None:
        k = max((len(attempts) for attempts in by_task.values()), default=1)
    levels = k_levels(k) if k > 1 else []
    domain_names = sorted({attempts[0].domain for attempts in by_task.values()})
    template_names = sorted({a[0].template for a in by_task.values() if a[0].template})

    def group(tasks: dict[str, list[AttemptRow]]) -> GroupReport:
        return _summarize_group(
            tasks, seed=seed, levels=levels, resamples=resamples, confidence=confidence
        )

    return EvalReport(
        k=k,
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        overall=group(by_task),
        domains={
            name: group({t: a for t, a in by_task.items() if a[0].domain == name})
            for name in domain_names
        },
        templates={
            name: group({t: a for t, a in by_task.items() if a[0].template == name})
            for name in template_names
        },
        kinds={
            KIND_GROUPS[unseen]: group(
                {t: a for t, a in by_task.items() if a[0].unseen_kind is unseen}
            )
            for unseen in (False, True)
            if any(a[0].unseen_kind is unseen for a in by_task.values())
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
    confidence: float,
) -> GroupReport:
    rows = [row for attempts in tasks.values() for row in attempts]
    graded = [row for row in rows if not row.excluded]
    graded_by_task = [[r for r in attempts if not r.excluded] for attempts in tasks.values()]

    def rate(per_task: list[tuple[int, int]]) -> RateEstimate:
        return _rate(per_task, seed, resamples, confidence)

    pass_at = {}
    for level in levels:
        per_task = [
            pass_at_k(len(g), sum(bool(r.passed) for r in g), level)
            for g in ([r for r in attempts if not r.excluded] for attempts in tasks.values())
            if len(g) >= level
        ]
        pass_at[str(level)] = _mean(per_task, seed, resamples, confidence)
    rewards = [[float(r.reward or 0.0) for r in g] for g in graded_by_task if g]
    return GroupReport(
        tasks=len(tasks),
        attempts=len(rows),
        graded=len(graded),
        excluded=len(rows) - len(graded),
        pass_at_1=rate([(sum(bool(r.passed) for r in g), len(g)) for g in graded_by_task]),
        mean_reward=_pooled_mean(rewards, seed, resamples, confidence),
        pass_at_1_excluded_as_failed=rate(
            [
                (sum(bool(r.passed) for r in attempts if not r.excluded), len(attempts))
                for attempts in tasks.values()
            ]
        ),
        pass_at_k=pass_at,
        system_errors=_count(row.system_error for row in rows),
        agent_failures=_count(row.agent_failure for row in graded),
    )


def _rate(
    per_task: list[tuple[int, int]], seed: int, resamples: int, confidence: float
) -> RateEstimate:
    successes, n = sum(s for s, _ in per_task), sum(m for _, m in per_task)
    interval = task_bootstrap_rate(per_task, seed, resamples, confidence) or (0.0, 1.0)
    return RateEstimate(
        successes=successes,
        n=n,
        rate=successes / n if n else None,
        low=interval[0],
        high=interval[1],
    )


def _mean(values: Sequence[float], seed: int, resamples: int, confidence: float) -> MeanEstimate:
    """One value per task: a bootstrap over those values."""
    interval = bootstrap_mean_interval(values, seed, resamples, confidence)
    if interval is None:
        return MeanEstimate(n=0, mean=None, low=None, high=None)
    return MeanEstimate(
        n=len(values), mean=math.fsum(values) / len(values), low=interval[0], high=interval[1]
    )


def _pooled_mean(
    per_task: list[list[float]], seed: int, resamples: int, confidence: float
) -> MeanEstimate:
    """The mean over every value, with an interval that resamples whole tasks."""
    values = [v for task in per_task for v in task]
    if not values:
        return MeanEstimate(n=0, mean=None, low=None, high=None)
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        sample = rng.choices(per_task, k=len(per_task))
        means.append(math.fsum(v for task in sample for v in task) / sum(map(len, sample)))
    means.sort()
    alpha = (1.0 - confidence) / 2
    return MeanEstimate(
        n=len(values),
        mean=math.fsum(values) / len(values),
        low=percentile(means, alpha),
        high=percentile(means, 1.0 - alpha),
    )


def _count(kinds: Iterable[str | None]) -> dict[str, int]:
    return dict(Counter(kind for kind in kinds if kind is not None).most_common())


def _task_report(task: str, attempts: list[AttemptRow]) -> TaskReport:
    graded = [row for row in attempts if not row.excluded]
    return TaskReport(
        task=task,
        domain=attempts[0].domain,
        template=attempts[0].template,
        unseen_kind=attempts[0].unseen_kind,
        attempts=len(attempts),
        graded=len(graded),
        passes=sum(bool(row.passed) for row in graded),
        passed=[row.passed for row in attempts],
        rewards=[row.reward for row in attempts],
        system_errors=[row.system_error for row in attempts],
        agent_failures=[row.agent_failure for row in attempts],
    )


def without_templates(report: EvalReport, templates: Iterable[str]) -> EvalReport:
    """The report of the tasks of other templates than `templates`, every figure recomputed
    from their attempts with the report's seed, k and resamples."""
    leave = set(templates)
    if not leave:
        return report
    rows = [
        AttemptRow(
            t.task,
            t.domain,
            None if error else passed,
            None if error else (reward or 0.0),
            system_error=error,
            agent_failure=failure,
            template=t.template,
            unseen_kind=t.unseen_kind,
        )
        for t in report.tasks
        if t.template not in leave
        for passed, reward, error, failure in zip(
            t.passed, t.rewards, t.system_errors, t.agent_failures, strict=True
        )
    ]
    return summarize_attempts(
        rows, seed=report.seed, k=report.k, resamples=report.resamples, confidence=report.confidence
    )


class PairedEstimate(BaseModel):
    """`after` minus `before` over the tasks both graded, with its task-resampled interval."""

    tasks: int
    before: float
    after: float
    difference: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


class PairedGroup(BaseModel):
    pass_at_1: PairedEstimate | None
    mean_reward: PairedEstimate | None


class ReportComparison(BaseModel):
    """Two reports of the same tasks compared task by task, overall, per domain and template."""

    seed: int
    resamples: int
    confidence: float
    overall: PairedGroup
    domains: dict[str, PairedGroup]
    templates: dict[str, PairedGroup]
    kinds: dict[str, PairedGroup] = {}
    """`seen kinds` and `unseen kinds`, when the tasks say."""
    tasks_only_before: int
    tasks_only_after: int


def compare_reports(
    after: EvalReport, before: EvalReport, *, seed: int, resamples: int = 2000
) -> ReportComparison:
    """The paired per-task difference of `after` over `before` (see the module docstring)."""
    confidence = after.confidence
    mine = {t.task: t for t in after.tasks}
    theirs = {t.task: t for t in before.tasks}

    def pairs(task: TaskReport, field: Literal["passed", "reward"]) -> list[tuple[str, float]]:
        out = []
        outcomes = zip(task.passed, task.rewards, task.system_errors, strict=True)
        for passed, reward, error in outcomes:
            if error is None:
                out.append((task.task, float(bool(passed)) if field == "passed" else reward or 0.0))
        return out

    def paired(names: list[str], field: Literal["passed", "reward"]) -> PairedEstimate | None:
        a = [p for name in names for p in pairs(mine[name], field)]
        b = [p for name in names for p in pairs(theirs[name], field)]
        found: PairedDifference | None = paired_difference(a, b, seed, resamples, confidence)
        if found is None:
            return None
        shared = {t for t, _ in a} & {t for t, _ in b}
        return PairedEstimate(
            tasks=found.tasks,
            before=_task_mean([p for p in b if p[0] in shared]),
            after=_task_mean([p for p in a if p[0] in shared]),
            difference=found.mean,
            low=found.low,
            high=found.high,
        )

    def group(names: list[str]) -> PairedGroup:
        return PairedGroup(pass_at_1=paired(names, "passed"), mean_reward=paired(names, "reward"))

    both = sorted(mine.keys() & theirs.keys())
    domains = sorted({mine[t].domain for t in both})
    templates = sorted({name for t in both if (name := mine[t].template)})
    return ReportComparison(
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        overall=group(both),
        domains={d: group([t for t in both if mine[t].domain == d]) for d in domains},
        templates={n: group([t for t in both if mine[t].template == n]) for n in templates},
        kinds={
            KIND_GROUPS[unseen]: group([t for t in both if mine[t].unseen_kind is unseen])
            for unseen in (False, True)
            if any(mine[t].unseen_kind is unseen for t in both)
        },
        tasks_only_before=len(theirs.keys() - mine.keys()),
        tasks_only_after=len(mine.keys() - theirs.keys()),
    )


def _task_mean(pairs: list[tuple[str, float]]) -> float:
    """The mean over tasks of each task's mean value (each task weighs the same)."""
    values: dict[str, list[float]] = {}
    for task, value in pairs:
        values.setdefault(task, []).append(value)
    return math.fsum(math.fsum(v) / len(v) for v in values.values()) / len(values)
