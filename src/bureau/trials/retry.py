"""What to do with a trial that ended in a system error: retry it, or keep it as it is.

| kind | action |
|---|---|
| sandbox_start_timeout, sandbox_start_failed, sandbox_crashed, upload_failed | retry |
| engine_unavailable, engine_timeout, engine_error | retry |
| tool_server_failed before the agent ran | retry |
| tool_server_failed after, agent_timeout, agent_error | keep: the agent's, graded 0 |
| judge_unavailable (after the judge client's own retries), verifier_timeout, | keep: masked |
| verifier_error, reward_file_missing, internal_error | and reported |

A retry is a new trial from scratch: a fresh sandbox, a fresh agent and a trial directory of its
own, so turns of two attempts never mix. The failed attempts stay on disk and are listed in the
final result's `retried` (trial name and status each). Retries are bounded by `max_retries` and
spaced by an exponential backoff. A task whose oracle fails the verifier is a task defect for
the checks (`bureau tasks check`) to report; retrying cannot fix it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bureau.errors import SystemErrorKind
from bureau.trials.result import TrialResult

Kind = SystemErrorKind

RETRY_KINDS = frozenset(
    {
        Kind.sandbox_start_timeout,
        Kind.sandbox_start_failed,
        Kind.sandbox_crashed,
        Kind.upload_failed,
        Kind.engine_unavailable,
        Kind.engine_timeout,
        Kind.engine_error,
    }
)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    """Attempts after the first, at most."""
    backoff_s: float = 1.0
    """Wait before the first retry; doubled for each one after."""

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_s < 0:
            raise ValueError("max_retries and backoff_s must not be negative")

    def should_retry(self, result: TrialResult) -> bool:
        """Whether the machinery failed in a way a fresh attempt may not."""
        if not result.system_error:
            return False
        if result.status == Kind.tool_server_failed:
            return result.agent_execution.started_at is None  # before the agent: its start
        return result.status in RETRY_KINDS


NO_RETRIES = RetryPolicy(max_retries=0)


async def with_retries(
    attempt: Callable[[], Awaitable[TrialResult]],
    policy: RetryPolicy,
    trials_dir: Path | None = None,
) -> TrialResult:
    """Run `attempt` until it completes, fails in a way not to retry, or the retries run out;
    the last result, with the earlier attempts in `retried` (and its result.json rewritten)."""
    earlier: list[dict[str, str]] = []
    for number in range(policy.max_retries + 1):
        result = await attempt()
        if number == policy.max_retries or not policy.should_retry(result):
            break
        earlier.append({"trial_name": result.trial_name, "status": result.status})
        await asyncio.sleep(policy.backoff_s * 2**number)
    if earlier:
        result.retried = earlier
        if trials_dir is not None:
            result.write(trials_dir / result.trial_name)
    return result
