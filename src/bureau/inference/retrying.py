"""Resending an engine request that failed without an answer.

A request that got no answer (the engine could not be reached, gave no answer in time, or
answered with a server error, HTTP 5xx) produced no sample: nothing of it reaches the
trajectory, so sending it again draws the one sample the turn needs from the same policy, as if
the first try had never happened. The failures are independent of what would have been sampled
(generation is bounded by the harness's token limits, so a timeout is a stall, not a long
answer). A client error (HTTP 4xx: a prompt past the context, say) is the request's own and is
raised at once, like a malformed answer.

The retries are bounded (`retries`), spaced by an exponential backoff, and listed in `events`
(the request's number, the number of the send that failed, counting every send, the kind and
the message), which the harness puts in the trial's metadata.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, EngineHTTPError, Sampler, SamplingParams

Kind = SystemErrorKind
NO_ANSWER = frozenset({Kind.engine_unavailable, Kind.engine_timeout})


def worth_resending(exc: BureauSystemError) -> bool:
    """Whether a failed request got no answer at all (see the module docstring)."""
    if exc.kind in NO_ANSWER:
        return True
    return isinstance(exc, EngineHTTPError) and exc.status >= 500


class RetryingSampler:
    """A `Sampler` that resends requests that got no answer; see the module docstring."""

    def __init__(self, sampler: Sampler, retries: int = 2, backoff_s: float = 0.5) -> None:
        if retries < 0 or backoff_s < 0:
            raise ValueError("retries and backoff_s must not be negative")
        self.sampler, self.retries, self.backoff_s = sampler, retries, backoff_s
        self.events: list[dict[str, Any]] = []
        self.requests = 0
        self.sends = 0

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        number = self.requests
        self.requests += 1
        for attempt in range(self.retries + 1):
            send = self.sends
            self.sends += 1
            try:
                return await self.sampler.complete(prompt_ids, params, session_id=session_id)
            except BureauSystemError as exc:
                if attempt == self.retries or not worth_resending(exc):
                    raise
                self.events.append(
                    {
                        "request": number,
                        "send": send,
                        "kind": exc.kind.value,
                        "message": exc.message[:300],
                    }
                )
            await asyncio.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")
