"""Fault injection: switches that make the machinery fail on purpose, for drills and tests.

Each switch is a rate; a fault is drawn at the point where the real failure would happen and
goes through the same recovery as a real one. Every fault injected is recorded in the trial's
result (`TrialResult.injected_faults`): the truth that `bureau analyze` is checked against
(the analysis itself never reads it).

- `tool_hang` (per tool call): the call never answers. It times out, the tool server
  restarts, and the model reads an error for that call.
- `tool_server_kill` (per tool call): the tool server is killed as the call goes out. The
  server restarts and the model reads an error.
- `sandbox_kill` (per trial, at one of its first two tool calls): the sandbox is stopped
  under the agent: `sandbox_crashed`, and the trial is retried from scratch.
- `engine_error` (per engine request): the engine answers HTTP 500. The request is sent again
  (`HarnessConfig.engine_retries`).
- `engine_stall` (per engine request): the engine is silent for `engine_stall_s`, then the
  request times out. It is sent again.
- `judge_error` (per judge call): the judge answers HTTP 500; the judge client retries.
- `verifier_crash` (per verifier run): test.sh is killed before it writes a reward. The
  verifier runs again (`TrialConfig.verifier_reruns`).
- `disk_full` (per trial): the trial folder is full when the verifier phase begins (ENOSPC):
  `storage_full`, and the trial is retried.

Rates are set in a config table (`[faults]`) or on the command line (`--faults
tool_hang=0.05,engine_error=0.05`); all are 0 by default, and a run with faults says so in its
resolved config.
"""

from __future__ import annotations

import asyncio
import errno
import random
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from bureau.config import StrictModel
from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, EngineHTTPError, Sampler, SamplingParams

FAULT_CAUSES: Mapping[str, str] = {
    "tool_hang": "tool_defect",
    "tool_server_kill": "tool_defect",
    "sandbox_kill": "infrastructure",
    "engine_error": "infrastructure",
    "engine_stall": "infrastructure",
    "judge_error": "infrastructure",
    "verifier_crash": "verifier",
    "disk_full": "infrastructure",
}
"""The root cause `bureau analyze` must find for each kind of fault."""

_RATE = Field(0.0, ge=0, le=1)


class FaultConfig(StrictModel):
    """Rates of injected faults (all 0: none); see the module docstring for each switch."""

    tool_hang: float = _RATE
    tool_server_kill: float = _RATE
    sandbox_kill: float = _RATE
    engine_error: float = _RATE
    engine_stall: float = _RATE
    judge_error: float = _RATE
    verifier_crash: float = _RATE
    disk_full: float = _RATE
    engine_stall_s: float = Field(2.0, ge=0, description="How long a stalled engine is silent.")
    seed: int = Field(0, description="Seeds the draws (with the task and the attempt).")

    @property
    def active(self) -> bool:
        return any(getattr(self, kind) > 0 for kind in FAULT_CAUSES)

    @classmethod
    def parse(cls, spec: str) -> FaultConfig:
        """`kind=rate,kind=rate,...` (the CLI's form); a bad entry names itself."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"--faults: expected kind=rate, got {part!r}")
            name = name.strip()
            if name not in cls.model_fields:
                known = ", ".join([*FAULT_CAUSES, "engine_stall_s", "seed"])
                raise ValueError(f"--faults: unknown switch {name!r} (known: {known})")
            values[name] = value.strip()
        return cls.model_validate(values)


class TrialFaults:
    """The faults of one trial: draws seeded by `key` (the run's seed, the task and the
    attempt's number), and the record of every fault injected."""

    def __init__(self, config: FaultConfig, key: str) -> None:
        self.config = config
        self.events: list[dict[str, Any]] = []
        self._rng = random.Random(key)
        # The sandbox is killed before one of the first tool calls (0-based index), if at all.
        self.kill_sandbox_at: int | None = (
            self._rng.randrange(2) if self._rng.random() < config.sandbox_kill else None
        )
        self._disk_full = self._rng.random() < config.disk_full

    def draw(self, kind: str) -> bool:
        rate = getattr(self.config, kind)
        return rate > 0 and self._rng.random() < rate

    def record(self, kind: str, phase: str, **where: Any) -> None:
        self.events.append(
            {"fault": kind, "phase": phase, "cause": FAULT_CAUSES[kind], "at": time.time(), **where}
        )

    def injected(self, kind: str, phase: str, **where: Any) -> bool:
        """Draw `kind`; when it comes up, record it and say so."""
        if not self.draw(kind):
            return False
        self.record(kind, phase, **where)
        return True

    def check_disk(self, path: Path) -> None:
        """Raise ENOSPC for the trial's one disk-full fault (at the first check)."""
        if self._disk_full:
            self._disk_full = False
            self.record("disk_full", "verifier", path=str(path))
            raise OSError(errno.ENOSPC, "No space left on device (injected)", str(path))


class FaultInjector:
    """Run-wide: hands each trial its `TrialFaults` (None when every rate is 0), seeded by the
    run's seed, the task and how many attempts at it came before (retries included), so one
    seed draws the same faults whatever order concurrent trials start in."""

    def __init__(self, config: FaultConfig | None) -> None:
        self.config = config if config is not None and config.active else None
        self._attempts: Counter[str] = Counter()

    def for_trial(self, task_name: str) -> TrialFaults | None:
        if self.config is None:
            return None
        number = self._attempts[task_name]
        self._attempts[task_name] += 1
        return TrialFaults(self.config, f"{self.config.seed}/{task_name}/{number}")


class FaultySampler:
    """A `Sampler` whose requests fail as `faults` draws: HTTP 500, or a stall that ends in
    a timeout. It sits under the harness's `RetryingSampler`, where a real engine would."""

    def __init__(self, sampler: Sampler, faults: TrialFaults) -> None:
        self.sampler, self.faults = sampler, faults
        self.sends = 0

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        number = self.sends
        self.sends += 1
        if self.faults.injected("engine_error", "agent", send=number):
            raise EngineHTTPError(500, "HTTP 500: internal server error (injected)")
        if self.faults.injected("engine_stall", "agent", send=number):
            await asyncio.sleep(self.faults.config.engine_stall_s)
            raise BureauSystemError(
                SystemErrorKind.engine_timeout,
                f"no answer in {self.faults.config.engine_stall_s} s (injected stall)",
            )
        return await self.sampler.complete(prompt_ids, params, session_id=session_id)
