"""Per-attempt rows to a report, on hand-made rows with every figure worked out below."""

from __future__ import annotations

import json

import pytest

from bureau.evaluation.report import AttemptRow, summarize_attempts
from bureau.evaluation.stats import task_bootstrap_rate


def ok(task: str, domain: str, passed: bool, reward: float) -> AttemptRow:
    return AttemptRow(task, domain, passed, reward)


def broken(task: str, domain: str, kind: str) -> AttemptRow:
    return AttemptRow(task, domain, None, None, system_error=kind)


ROWS = [
    # law/a: pass, fail, one sandbox failure (excluded)
    ok("a", "law", True, 1.0),
    ok("a", "law", False, 0.5),
    broken("a", "law", "sandbox_start_failed"),
    # law/b: three graded failures
    ok("b", "law", False, 0.0),
    ok("b", "law", False, 0.25),
    ok("b", "law", False, 0.0),
    # banking/c: two passes and an agent timeout, graded as a failure with reward 0
    ok("c", "banking", True, 1.0),
    ok("c", "banking", True, 1.0),
    AttemptRow("c", "banking", False, 0.0, agent_failure="agent_timeout"),
    # consulting/d: the engine failed every time
    broken("d", "consulting", "engine_error"),
    broken("d", "consulting", "engine_error"),
    broken("d", "consulting", "engine_error"),
]


def test_overall_figures() -> None:
    report = summarize_attempts(ROWS, seed=0)
    overall = report.overall
    assert report.k == 3  # the most attempts of any task
    assert (overall.tasks, overall.attempts, overall.graded, overall.excluded) == (4, 12, 8, 4)
    # Pass@1 over the 8 graded attempts: a 1, b 0, c 2.
    assert (overall.pass_at_1.successes, overall.pass_at_1.n) == (3, 8)
    assert overall.pass_at_1.rate == 3 / 8
    # The interval resamples tasks (a 1 of 2, b 0 of 3, c 2 of 3; d has no graded attempt):
    # its bounds are rates of resampled task sets, from b b b (0) up to c c c (2/3).
    interval = (overall.pass_at_1.low, overall.pass_at_1.high)
    assert interval == task_bootstrap_rate([(1, 2), (0, 3), (2, 3)], seed=0)
    assert interval == (0.0, pytest.approx(2 / 3))
    assert report.interval == "task-bootstrap" and report.confidence == 0.95
    # Excluded attempts counted as failures: 3 of 12.
    assert overall.pass_at_1_excluded_as_failed.rate == 3 / 12
    # Rewards 1 + .5 + 0 + .25 + 0 + 1 + 1 + 0 = 3.75 over 8.
    assert overall.mean_reward.mean == pytest.approx(3.75 / 8)
    assert overall.mean_reward.n == 8
    assert overall.mean_reward.low is not None and overall.mean_reward.high is not None
    assert overall.mean_reward.low < 3.75 / 8 < overall.mean_reward.high
    assert overall.system_errors == {"engine_error": 3, "sandbox_start_failed": 1}
    assert overall.agent_failures == {"agent_timeout": 1}
    assert report.tasks_all_excluded == ["d"]


def test_pass_at_k_levels() -> None:
    pass_at = summarize_attempts(ROWS, seed=0).overall.pass_at_k
    assert list(pass_at) == ["1", "2", "3"]
    # pass@1 per task: a 1/2, b 0, c 2/3 (d has no graded attempt): mean 7/18.
    assert pass_at["1"].mean == pytest.approx((0.5 + 0 + 2 / 3) / 3)
    assert pass_at["1"].n == 3
    # pass@2: a (n=2, c=1) 1.0; b 0.0; c (n=3, c=2: n-c < 2) 1.0.
    assert pass_at["2"].mean == pytest.approx(2 / 3)
    # pass@3: only b and c have 3 graded attempts: (0 + 1) / 2.
    assert (pass_at["3"].n, pass_at["3"].mean) == (2, 0.5)


def test_per_domain_and_per_task() -> None:
    report = summarize_attempts(ROWS, seed=0)
    assert list(report.domains) == ["banking", "consulting", "law"]
    law = report.domains["law"]
    assert (law.tasks, law.graded, law.pass_at_1.successes) == (2, 5, 1)
    assert law.mean_reward.mean == pytest.approx(1.75 / 5)
    assert report.domains["banking"].pass_at_1.rate == pytest.approx(2 / 3)
    consulting = report.domains["consulting"]
    assert consulting.graded == 0 and consulting.pass_at_1.rate is None
    assert (consulting.pass_at_1.low, consulting.pass_at_1.high) == (0.0, 1.0)
    assert consulting.mean_reward.mean is None
    a = report.tasks[0]
    assert (a.task, a.attempts, a.graded, a.passes) == ("a", 3, 2, 1)
    assert a.passed == [True, False, None]
    assert a.system_errors == [None, None, "sandbox_start_failed"]
    # JSON-ready, and the same seed gives the same report.
    assert json.dumps(report.model_dump(mode="json"))
    assert summarize_attempts(ROWS, seed=0) == report


def test_single_attempt_has_no_pass_at_k_table() -> None:
    report = summarize_attempts([ok("a", "law", True, 1.0), ok("b", "law", False, 0.0)], seed=1)
    assert report.k == 1 and report.overall.pass_at_k == {}
    assert report.overall.pass_at_1.rate == 0.5


def test_all_pass_all_fail_and_empty() -> None:
    every = summarize_attempts([ok(t, "law", True, 1.0) for t in "abcd"], seed=0).overall
    assert every.pass_at_1.rate == 1.0 and every.pass_at_1.high == 1.0
    assert (every.mean_reward.low, every.mean_reward.high) == (1.0, 1.0)
    none = summarize_attempts([ok(t, "law", False, 0.0) for t in "abcd"], seed=0).overall
    assert none.pass_at_1.rate == 0.0 and none.pass_at_1.low == 0.0
    empty = summarize_attempts([], seed=0)
    assert empty.overall.graded == 0 and empty.overall.pass_at_1.rate is None
    assert empty.domains == {} and empty.tasks == []


def test_rows_must_be_consistent() -> None:
    with pytest.raises(ValueError, match="no verdict"):
        AttemptRow("a", "law", False, 0.0, system_error="engine_error")
    with pytest.raises(ValueError, match="needs passed"):
        AttemptRow("a", "law", None, 0.5)
    with pytest.raises(ValueError, match="not finite"):
        AttemptRow("a", "law", False, float("nan"))
    with pytest.raises(ValueError, match="several domains"):
        summarize_attempts([ok("a", "law", True, 1.0), ok("a", "banking", True, 1.0)], seed=0)


def test_per_template_groups() -> None:
    rows = [
        AttemptRow("a", "law", True, 1.0, template="law.x"),
        AttemptRow("b", "law", False, 0.0, template="law.y"),
        AttemptRow("b", "law", True, 1.0, template="law.y"),
        AttemptRow("c", "law", True, 1.0),  # no template recorded: overall and domain only
    ]
    report = summarize_attempts(rows, seed=0)
    assert list(report.templates) == ["law.x", "law.y"]
    assert report.templates["law.y"].pass_at_1.rate == 0.5
    assert report.templates["law.x"].tasks == 1 and report.overall.tasks == 3
    assert report.tasks[1].template == "law.y"
    with pytest.raises(ValueError, match="several templates"):
        summarize_attempts([rows[1], AttemptRow("b", "law", True, 1.0, template="z")], seed=0)


def test_compare_reports_pairs_tasks() -> None:
    from bureau.evaluation.report import compare_reports

    def rows(passes: dict[str, list[bool]]) -> list[AttemptRow]:
        return [
            AttemptRow(t, "law", p, float(p), template=f"law.{t[0]}")
            for t, ps in passes.items()
            for p in ps
        ]

    before = summarize_attempts(
        [*rows({"x1": [False, False], "x2": [True, False], "y1": [True, True], "gone": [True]}),
         AttemptRow("x1", "law", None, None, system_error="engine_error", template="law.x")],
        seed=0,
    )  # fmt: skip
    after = summarize_attempts(
        rows({"x1": [True, False], "x2": [True, True], "y1": [True, True], "new": [False]}),
        seed=0,
    )
    compared = compare_reports(after, before, seed=0)
    # Shared tasks x1, x2, y1: per task after - before = 0.5, 0.5, 0 (the excluded attempt
    # of x1 counts in neither), a mean of 1/3; Pass@1 over those tasks 1/2 -> 5/6.
    overall = compared.overall.pass_at_1
    assert overall is not None
    assert overall.tasks == 3
    assert (overall.before, overall.after) == (pytest.approx(0.5), pytest.approx(5 / 6))
    assert overall.difference == pytest.approx(1 / 3)
    # Resampled task sets range from y1 y1 y1 (0) to only x tasks (0.5).
    assert (overall.low, overall.high) == (0.0, 0.5)
    assert not overall.excludes_zero
    x = compared.templates["law.x"].pass_at_1
    assert x is not None and (x.difference, x.low, x.high) == (0.5, 0.5, 0.5) and x.excludes_zero
    assert compared.templates["law.y"].pass_at_1 is not None
    assert (compared.tasks_only_before, compared.tasks_only_after) == (1, 1)
    assert compared.domains["law"].mean_reward is not None


def test_a_report_without_some_templates_is_recomputed() -> None:
    from bureau.evaluation.report import without_templates

    rows = [
        AttemptRow("a", "law", True, 1.0, template="law.x"),
        AttemptRow("b", "law", False, 0.0, template="law.y"),
        AttemptRow("b", "law", None, None, system_error="engine_error", template="law.y"),
        AttemptRow("c", "law", False, 0.5, agent_failure="agent_timeout", template="law.z"),
    ]
    full = summarize_attempts(rows, seed=0)
    kept = without_templates(full, ["law.y"])
    assert [t.task for t in kept.tasks] == ["a", "c"] and list(kept.templates) == ["law.x", "law.z"]
    assert kept.overall.pass_at_1.rate == 0.5 and kept.overall.agent_failures == {
        "agent_timeout": 1
    }
    assert without_templates(full, ["law.x", "law.z"]).overall.system_errors == {"engine_error": 1}
    assert without_templates(full, []) is full


def test_seen_and_unseen_kinds_are_reported_apart() -> None:
    """Tasks whose template no training split has (`held_out_kind`) are a group of their own,
    in a report and in a comparison; a dataset that does not say gets no such groups."""
    from bureau.evaluation.report import compare_reports

    def rows(passes: dict[str, list[bool]]) -> list[AttemptRow]:
        return [
            AttemptRow(t, "law", p, float(p), template=f"law.{t[0]}", unseen_kind=t[0] == "u")
            for t, ps in passes.items()
            for p in ps
        ]

    before = summarize_attempts(
        rows({"s1": [True, True], "s2": [False, False], "u1": [False]}), seed=0
    )
    after = summarize_attempts(
        rows({"s1": [True, True], "s2": [True, False], "u1": [True]}), seed=0
    )
    assert list(after.kinds) == ["seen kinds", "unseen kinds"]
    # Seen: s1 1.0 and s2 0.5, a Pass@1 of 0.75 over 2 tasks; unseen: u1 alone, 1.0.
    assert after.kinds["seen kinds"].pass_at_1.rate == 0.75
    assert after.kinds["seen kinds"].tasks == 2 and after.kinds["unseen kinds"].tasks == 1
    assert after.tasks[2].unseen_kind is True
    compared = compare_reports(after, before, seed=0)
    unseen = compared.kinds["unseen kinds"].pass_at_1
    assert unseen is not None and (unseen.before, unseen.after, unseen.difference) == (0, 1, 1)
    seen = compared.kinds["seen kinds"].pass_at_1
    assert seen is not None and seen.difference == pytest.approx(0.25)  # (0 + 0.5) / 2
    assert summarize_attempts([ok("a", "law", True, 1.0)], seed=0).kinds == {}
    with pytest.raises(ValueError, match="several kinds"):
        summarize_attempts(
            [AttemptRow("a", "law", True, 1.0, unseen_kind=True), ok("a", "law", True, 1.0)],
            seed=0,
        )
