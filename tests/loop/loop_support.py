"""Helpers of the tests that run `bureau train` as a user does: a subprocess on Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
# Ray 2.60 turns on token authentication and keeps one token in ~/.ray/auth_token, which every
# `ray start --head` on the machine rewrites: clusters started side by side (other tests, a
# user's own) would lock each other's drivers out. These tests' clusters run without it.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s")
        time.sleep(0.5)


def steps_of(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by the kill
    return [r for r in rows if "data/group_ids" in r]


def train_process(config: Path, *extra: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(BIN / "bureau"), "train", "--config", str(config), *extra],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ | RAY_ENV,
        )  # fmt: skip


# Fault tests need a run that lives a few steps, not long generations: short turns keep each
# step to a few seconds on this CPU.
QUICK = {
    "rollout.attempts": 2,
    "rollout.harness.max_turns": 2,
    "rollout.harness.max_tokens_per_turn": 48,
}
