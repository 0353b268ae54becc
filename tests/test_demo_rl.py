"""The demo's before/after table (the stages themselves are the commands, tested apart)."""

from __future__ import annotations

from typing import Any

from bureau.cli.demo_rl import summarize


def _eval(label: str, rate: float, low: float, high: float) -> dict[str, Any]:
    return {
        "label": label,
        "pass_at_1": rate,
        "pass_at_1_low": low,
        "pass_at_1_high": high,
        "reward": rate,
        "graded": 60,
    }


def test_a_rise_counts_only_with_disjoint_intervals(capsys) -> None:  # type: ignore[no-untyped-def]
    walls = {"pretrain": 240.0, "rl": 900.0}
    before = _eval("start", 0.20, 0.12, 0.32)
    assert summarize(before, _eval("end", 0.50, 0.38, 0.62), 12, walls, 1500.0)
    assert not summarize(before, _eval("end", 0.30, 0.20, 0.43), 12, walls, 1500.0)
    assert not summarize(before, _eval("end", 0.10, 0.05, 0.20), 12, walls, 1500.0)
    printed = capsys.readouterr().out
    assert "+0.300" in printed and "disjoint" in printed and "overlapping" in printed
    assert "12 RL steps; wall time 25.0 min (pretrain 4.0 min, rl 15.0 min)" in printed
