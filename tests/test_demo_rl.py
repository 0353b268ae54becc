"""The demo's before/after table and its verdict (the stages themselves are the commands,
tested apart)."""

from __future__ import annotations

from typing import Any

import pytest

from bureau.cli.demo_rl import DemoSizes, summarize
from bureau.evaluation.report import AttemptRow, summarize_attempts


def _report(passes: dict[str, list[bool]]) -> dict[str, Any]:
    rows = [
        AttemptRow(task, "law", p, float(p), template=f"law.{task[0]}")
        for task, attempts in passes.items()
        for p in attempts
    ]
    return summarize_attempts(rows, seed=0).model_dump(mode="json")


def test_the_verdict_needs_a_paired_difference_above_zero(capsys) -> None:  # type: ignore[no-untyped-def]
    tasks = [f"{t}{i}" for t in "ab" for i in range(6)]
    before = _report({t: [False, False] for t in tasks})
    # Every task gained a pass: the paired difference is +0.5 on every resample.
    verdict = summarize(before, _report({t: [True, False] for t in tasks}), seed=0)
    assert verdict.improved and verdict.line.startswith("RL improved held-out Pass@1")
    assert "+0.500 [+0.500, +0.500] over 12 tasks" in verdict.line
    assert verdict.goal_met and verdict.line.endswith("(+10 points, interval above 0) was reached")
    # Above 0 but short of +10 points: improved, and the line says the goal was not reached.
    one = {t: [False, False] for t in tasks} | {"a0": [True, False], "b1": [True, False]}
    small = summarize(before, _report(one), seed=0)
    assert small.comparison["overall"]["pass_at_1"]["difference"] == pytest.approx(1 / 12)
    assert not small.goal_met and small.line.endswith("was not reached")
    # a0 lost both its passes and b0 gained two: a mean of 0, an interval about it.
    mixed = {t: [False, False] for t in tasks} | {"a0": [True, True]}
    worse = summarize(
        _report(mixed), _report({t: [False, False] for t in tasks} | {"b0": [True, True]}), seed=0
    )
    assert not worse.improved and "did not show an improvement" in worse.line
    down = summarize(_report({t: [True, True] for t in tasks}), before, seed=0)
    assert not down.improved and down.line.startswith("RL made held-out Pass@1 worse")
    printed = capsys.readouterr().out
    assert "law.a" in printed and "law.b" in printed and "paired difference" in printed
    assert set(verdict.comparison["templates"]) == {"law.a", "law.b"}


def test_an_untrained_template_is_a_figure_apart_from_the_verdict(capsys) -> None:  # type: ignore[no-untyped-def]
    tasks = [f"{t}{i}" for t in "ab" for i in range(6)]
    before = _report({t: [False, False] for t in tasks})
    # Only the b tasks (never trained on) improved: the verdict, over a, says no.
    after = _report({t: [t[0] == "b", False] for t in tasks})
    verdict = summarize(before, after, seed=0, untrained=("law.b",))
    assert not verdict.improved and "over 6 tasks" in verdict.line
    assert set(verdict.comparison["templates"]) == {"law.a"}
    assert verdict.comparison["untrained"]["law.b"]["pass_at_1"]["difference"] == 0.5
    printed = capsys.readouterr().out
    assert "transfer, never trained on: law.b Pass@1 0.000 -> 0.500" in printed


def test_templates_whose_prompts_need_nothing_new_are_marked_and_pooled_apart(capsys) -> None:  # type: ignore[no-untyped-def]
    tasks = [f"{t}{i}" for t in "ab" for i in range(6)]
    before = _report({t: [False, False] for t in tasks})
    # Only law.a (whose held-out prompts hold nothing new) improved.
    after = _report({t: [t[0] == "a", t[0] == "a"] for t in tasks})
    verdict = summarize(before, after, seed=0, nothing_new=("law.a",))
    assert verdict.improved  # the overall verdict counts every trained template
    assert verdict.comparison["nothing_new"] == ["law.a"]
    pooled = verdict.comparison["needs_new_span"]["pass_at_1"]
    assert (pooled["tasks"], pooled["difference"]) == (6, 0.0)
    printed = capsys.readouterr().out
    assert "law.a (copies nothing new)" in printed
    assert "need a span never seen in training (law.b): Pass@1 0.000 -> 0.000" in printed


def test_demo_sizes_take_key_value_settings() -> None:
    """`bureau demo-tune --size`: each field from its text, or an error naming the key."""
    sizes = DemoSizes().replaced(
        ["sft_steps=200", "templates=law.a, banking.b", "rl_steps=none", "vocab=qwen3"]
    )
    assert (sizes.sft_steps, sizes.templates, sizes.rl_steps, sizes.vocab) == (
        200,
        ("law.a", "banking.b"),
        None,
        "qwen3",
    )
    assert DemoSizes().replaced(["rl_steps=4"]).rl_steps == 4
    assert sizes.layers == DemoSizes().layers
    with pytest.raises(ValueError, match="'sft=2': expected KEY=VALUE"):
        DemoSizes().replaced(["sft=2"])
    with pytest.raises(ValueError, match="sft_steps: 'x' is not a whole number"):
        DemoSizes().replaced(["sft_steps=x"])
