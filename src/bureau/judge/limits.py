"""Per-key request and token limits, cooldowns, and the round-robin choice among keys.

A judge endpoint is usually reached with several API keys, each with its own requests-per-minute
(RPM) and tokens-per-minute (TPM) quota. `KeyPool.acquire` hands out the next key in turn that
is not cooling down (after a 429) and has room in both windows; when none has, it says how long
to wait. The windows are sliding logs, not leaky buckets: a leaky bucket lets a full burst
through and then keeps refilling, so a 60-second window can see nearly twice the quota, and the
provider counts by window.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_S = 60.0


@dataclass
class SlidingWindow:
    """Amounts spent in the last `window_s` seconds, against a `limit` (None: unlimited)."""

    limit: int | None
    window_s: float = WINDOW_S
    _spent: deque[tuple[float, int]] = field(default_factory=deque)

    def _trim(self, now: float) -> None:
        while self._spent and self._spent[0][0] <= now - self.window_s:
            self._spent.popleft()

    def used(self, now: float) -> int:
        self._trim(now)
        return sum(amount for _, amount in self._spent)

    def wait_s(self, amount: int, now: float) -> float:
        """Seconds until `amount` fits (0 now; inf if it never can)."""
        if self.limit is None:
            return 0.0
        if amount > self.limit:
            return float("inf")
        self._trim(now)
        room = self.limit - sum(spent for _, spent in self._spent)
        if room >= amount:
            return 0.0
        for stamp, spent in self._spent:  # oldest first: the first to leave the window
            room += spent
            if room >= amount:
                return max(0.0, stamp + self.window_s - now)
        return float("inf")

    def spend(self, amount: int, now: float) -> None:
        self._spent.append((now, amount))


@dataclass
class KeyState:
    index: int
    key: str
    requests: SlidingWindow
    tokens: SlidingWindow
    cooldown_until: float = 0.0
    refused: bool = False  # 401/403: the key is wrong; never used again


class NoKeyLeft(Exception):
    """Every key was refused by the endpoint (401/403)."""


class KeyPool:
    """Round-robin over keys, each with its own RPM/TPM windows and 429 cooldown."""

    def __init__(
        self,
        keys: list[str],
        rpm: int | None,
        tpm: int | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not keys:
            raise ValueError("the judge needs at least one API key")
        self.keys = [
            KeyState(i, key, SlidingWindow(rpm), SlidingWindow(tpm)) for i, key in enumerate(keys)
        ]
        self.clock = clock
        self._next = 0

    def acquire(self, tokens: int) -> tuple[KeyState | None, float]:
        """(the key to use now, 0) with the request and its tokens spent against it, or
        (None, seconds to wait before asking again). Raises NoKeyLeft when every key was
        refused, and ValueError when `tokens` exceeds a key's whole TPM quota."""
        now = self.clock()
        usable = [state for state in self.keys if not state.refused]
        if not usable:
            raise NoKeyLeft("the judge endpoint refused every API key (401/403)")
        waits: list[float] = []
        for offset in range(len(self.keys)):
            state = self.keys[(self._next + offset) % len(self.keys)]
            if state.refused:
                continue
            wait = max(
                state.cooldown_until - now,
                state.requests.wait_s(1, now),
                state.tokens.wait_s(tokens, now),
            )
            if wait <= 0:
                state.requests.spend(1, now)
                state.tokens.spend(tokens, now)
                self._next = (state.index + 1) % len(self.keys)
                return state, 0.0
            waits.append(wait)
        soonest = min(waits)
        if soonest == float("inf"):
            raise ValueError(f"a request of {tokens} tokens exceeds every key's TPM limit")
        return None, soonest

    def cool_down(self, state: KeyState, seconds: float) -> None:
        state.cooldown_until = max(state.cooldown_until, self.clock() + seconds)

    def refuse(self, state: KeyState) -> None:
        state.refused = True
