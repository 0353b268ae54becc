"""The start-rate token bucket, with a fake clock and hand-computed waits."""

from __future__ import annotations

import pytest

from bureau.trials.scheduler import SchedulerConfig, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_burst_then_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.delay() == pytest.approx(0.5)  # empty: one token every 1/2 s
    clock.t += 0.25
    assert bucket.delay() == pytest.approx(0.25)  # half a token banked
    clock.t += 0.25
    assert bucket.delay() == 0.0
    clock.t += 10.0  # long idle: the bank never exceeds the burst
    assert [bucket.delay() for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.5)]


def test_scheduler_config_is_validated() -> None:
    with pytest.raises(ValueError):
        SchedulerConfig(concurrency=0)
    with pytest.raises(ValueError):
        SchedulerConfig(starts_per_s=0)
