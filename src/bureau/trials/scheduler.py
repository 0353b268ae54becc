"""Many trials at once: a concurrency limit, a cap on sandboxes starting at the same moment,
and a token bucket on the rate of starts.

Starts are the expensive, bursty part (copying workspaces, spawning namespaces, tool servers),
so they are limited separately from the number of trials in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bureau.sandbox.base import Runtime
from bureau.tasks.taskdir import TaskDir
from bureau.trials.agents import Agent
from bureau.trials.attempt import AttemptOutcome, run_attempt
from bureau.trials.result import TrialResult
from bureau.trials.retry import NO_RETRIES, RetryPolicy
from bureau.trials.trial import TrialConfig

if TYPE_CHECKING:
    from bureau.judge import JudgeClient
    from bureau.trials.defects import TaskDefects
    from bureau.trials.faults import FaultInjector
    from bureau.trials.pool import WarmPool


@dataclass(frozen=True)
class SchedulerConfig:
    concurrency: int = 8
    """Trials in flight at once."""
    max_starting: int = 4
    """Sandboxes starting at the same moment."""
    starts_per_s: float = 50.0
    """Sustained rate of sandbox starts (token bucket refill rate)."""
    burst: int = 8
    """Starts allowed back to back before the rate applies (bucket size)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.max_starting < 1 or self.burst < 1:
            raise ValueError("concurrency, max_starting and burst must be at least 1")
        if self.starts_per_s <= 0:
            raise ValueError("starts_per_s must be positive")


class TokenBucket:
    """`rate` tokens a second, at most `burst` banked. `delay()` is pure for testing."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.updated = clock()

    def delay(self) -> float:
        """Take a token if one is there (0.0); else the seconds until one will be."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    async def acquire(self) -> None:
        while (wait := self.delay()) > 0:
            await asyncio.sleep(wait)


class StartGate:
    """Admission for sandbox starts: the token bucket, then the concurrent-start cap."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.bucket = TokenBucket(config.starts_per_s, config.burst)
        self.starting = asyncio.Semaphore(config.max_starting)
        self.peak = 0
        self._now = 0

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[None]:
        await self.bucket.acquire()
        async with self.starting:
            self._now += 1
            self.peak = max(self.peak, self._now)
            try:
                yield
            finally:
                self._now -= 1


async def run_attempts(
    tasks: Sequence[TaskDir],
    make_agent: Callable[[], Agent],
    runtime: Runtime,
    trials_dir: Path,
    *,
    trial_config: TrialConfig | None = None,
    config: SchedulerConfig | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    pool: WarmPool | None = None,
    judge: JudgeClient | None = None,
    retry: RetryPolicy = NO_RETRIES,
    faults: FaultInjector | None = None,
    defects: TaskDefects | None = None,
) -> list[AttemptOutcome]:
    """One attempt per task (`trials.attempt.run_attempt`: retries as `retry` says, the oracle
    checked after a verifier failure with `defects`, the trial joined to the agent's record);
    outcomes come back in task order."""
    config = config or SchedulerConfig()
    loop = asyncio.get_running_loop()
    # Sandbox calls block in threads; the default pool (cpu + 4) would serialize them.
    executor = ThreadPoolExecutor(max_workers=config.concurrency * 2 + 4)
    loop.set_default_executor(executor)
    gate = StartGate(config)
    in_flight = asyncio.Semaphore(config.concurrency)

    async def one(task: TaskDir) -> AttemptOutcome:
        async with in_flight:
            outcome = await run_attempt(
                task,
                make_agent,
                runtime,
                trials_dir,
                config=trial_config,
                retry=retry,
                pool=pool,
                judge=judge,
                faults=faults,
                defects=defects,
                start_gate=gate,
            )
        if on_result is not None:
            on_result(outcome.result)
        return outcome

    # The executor stays the loop's default: code after this call may still use to_thread,
    # and asyncio.run shuts the default executor down when the loop closes.
    return list(await asyncio.gather(*(one(t) for t in tasks)))


async def run_trials(
    tasks: Sequence[TaskDir],
    make_agent: Callable[[], Agent],
    runtime: Runtime,
    trials_dir: Path,
    **kwargs: Any,
) -> list[TrialResult]:
    """`run_attempts` for callers that want only the trials (oracle and nop checks)."""
    outcomes = await run_attempts(tasks, make_agent, runtime, trials_dir, **kwargs)
    return [o.result for o in outcomes]
