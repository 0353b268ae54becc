"""What `bureau train` prints while it runs: a line per step and per evaluation, and what the
run is waiting for whenever it has been quiet for `logging.heartbeat_s`."""

from __future__ import annotations

import time
from typing import Any

from bureau.cli.rl import Progress
from bureau.loop.status import RunStatus


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, line: str, **_: Any) -> None:
        self.lines.append(line)


def test_a_quiet_run_says_what_it_waits_for_every_heartbeat() -> None:
    clock, out = Clock(), Lines()
    status = RunStatus(clock)
    progress = Progress(out, steps=10, status=status, heartbeat_s=30, clock=clock)
    status.set("starting 2 vllm engine(s)")
    clock.now += 29
    assert not progress.beat() and out.lines == []
    clock.now += 1
    assert progress.beat()
    assert out.lines == ["... starting 2 vllm engine(s) (30 s)"]
    clock.now += 10
    assert not progress.beat()  # 10 s after the last line
    progress.say("engines: 2 vllm ready in 41.0 s")
    status.set("waiting for rollouts for step 1")
    status.detail = lambda: "buffer 0/1 groups, 2 groups (12 trajectories) in flight"
    clock.now += 30
    assert progress.beat()
    assert out.lines[-1] == (
        "... waiting for rollouts for step 1 (30 s); buffer 0/1 groups, 2 groups "
        "(12 trajectories) in flight"
    )


def test_step_and_evaluation_lines_carry_drops_and_the_held_out_interval() -> None:
    clock, out = Clock(), Lines()
    progress = Progress(out, steps=4, clock=clock)
    clock.now += 20
    progress.step(
        {"step": 1, "rollout/reward": 0.5, "rollout/pass_at_1": 0.25, "staleness/group_max": 1,
         "buffer/dropped_stale": 3, "perf/trainer_wait_ratio": 0.4, "weights/sync_s": 0.5,
         "rollout/system_errors": 0}
    )  # fmt: skip
    assert out.lines[-1] == (
        "step 1/4  reward 0.500  pass@1 0.250  staleness max 1  dropped stale 3  "
        "trainer wait 40%  sync 0.50s  errors 0  ETA 60s"
    )
    progress.evaluated(
        {"label": "step 2", "version": 2, "pass_at_1": 0.5, "pass_at_1_low": 0.3,
         "pass_at_1_high": 0.7, "reward": 0.6, "graded": 16, "system_errors": 1,
         "time_s": 12.0, "held_out": True}
    )  # fmt: skip
    assert out.lines[-1] == (
        "held-out Pass@1 0.500 [0.300, 0.700] at step 2 (step 2): reward 0.600, 16 graded, "
        "1 system errors, 12 s"
    )
    progress.evaluated({"label": "start", "version": 0, "pass_at_1": None, "held_out": False})
    assert out.lines[-1].startswith("evaluation (not held out) Pass@1 n/a at step 0")


def test_the_heartbeat_thread_prints_while_nothing_else_does() -> None:
    out = Lines()
    status = RunStatus()
    status.set("starting Ray")
    with Progress(out, steps=1, status=status, heartbeat_s=0.2):
        deadline = time.monotonic() + 10
        while len(out.lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(out.lines) >= 2 and all(line.startswith("... starting Ray (") for line in out.lines)
    count = len(out.lines)
    time.sleep(0.5)
    assert len(out.lines) == count  # stopped with the context
