"""What to do with a trial that ended in a system error: retry it, or keep it as it is.

| kind | action |
|---|---|
| before the agent ran: sandbox start, tool server start, uploads, engine | retry |
| engine_unavailable at any time (no engine answered: nothing the agent did) | retry |
| sandbox_crashed, storage_full at any time (the sandbox or the host's disk went away) | retry |
| any other machinery kind once the agent has run | keep: masked and reported |
| agent_timeout, agent_error, tool_server_failed once the agent ran | keep: the agent's, 0 |

A retry draws a new sample, so it must never be something the agent can bring about: an agent
that could trigger a retried failure when its attempt was going badly would swap its 0 for
another try. Once the agent has run, only what the agent cannot reach is retried (an engine
nobody could reach, a sandbox that died, a full host disk: `RETRY_ANY_TIME`); an upload that
failed or a verifier that crashed after that point stays a masked trial (its kind says whose it
is). A verifier that crashes is first run again on the same output (`TrialConfig.
verifier_reruns`): that grades the same work, so it is no second sample.

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

RETRY_BEFORE_AGENT = frozenset(
    {
        Kind.sandbox_start_timeout,
        Kind.sandbox_start_failed,
        Kind.sandbox_crashed,
        Kind.tool_server_failed,
        Kind.upload_failed,
        Kind.engine_unavailable,
        Kind.engine_timeout,
        Kind.engine_error,
    }
)
RETRY_ANY_TIME = frozenset({Kind.engine_unavailable, Kind.sandbox_crashed, Kind.storage_full})
"""Kinds the agent cannot bring about at any point: no engine answered; the sandbox itself died
(the agent's processes are confined by rlimits, a pid limit, the memory watch and storage
quotas, which fail its own calls instead: `tests/sandbox/test_sandbox_attacks.py`); the host's
trial folder is full (what reaches it from the agent is bounded)."""


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
        """Whether the machinery failed in a way the agent cannot have caused."""
        if not result.system_error:
            return False
        if result.agent_execution.started_at is None:
            return result.status in RETRY_BEFORE_AGENT
        return result.status in RETRY_ANY_TIME


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
