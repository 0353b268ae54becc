"""Spreading samples over several engines: least-loaded, with sticky sessions.

`Router` is a `Sampler` over a list of engine clients (`EngineClient`, an in-process
`InferenceEngine`, or fakes). A request goes to the healthy engine with the fewest requests in
flight through this router (ties rotate). A request with a `session_id` goes back to the engine
that session first went to, as long as that engine is healthy, so a multi-turn trajectory hits
the same prefix cache; the session map is bounded (least recently used sessions are forgotten)
and `release(session_id)` drops a finished session.

An engine failure is raised as the `BureauSystemError` it was: it is never retried on another
engine, because that would be a different sample and the trajectory must record the failure.
A failure of a kind in `unhealthy_on` (by default `engine_unavailable`: the engine cannot be
reached) also marks that engine unhealthy, so new requests avoid it; `refresh_health()` asks
each unhealthy engine again and brings back the ones that answer.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, SamplingParams

Kind = SystemErrorKind


class RoutedEngine(Protocol):
    """What the router needs from an engine client."""

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion: ...

    async def health(self) -> bool: ...


@dataclass
class EngineLoad:
    """One engine as the router sees it."""

    index: int
    in_flight: int
    routed: int
    healthy: bool


class Router:
    """A `Sampler` that routes each request to one of `clients`; see the module docstring."""

    def __init__(
        self,
        clients: Sequence[RoutedEngine],
        *,
        max_sessions: int = 4096,
        unhealthy_on: Iterable[SystemErrorKind] = (Kind.engine_unavailable,),
    ) -> None:
        if not clients:
            raise ValueError("a router needs at least one engine client")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        self.clients = list(clients)
        self.max_sessions = max_sessions
        self.unhealthy_on = frozenset(unhealthy_on)
        self._in_flight = [0] * len(self.clients)
        self._routed = [0] * len(self.clients)
        self._healthy = [True] * len(self.clients)
        self._sessions: OrderedDict[str, int] = OrderedDict()
        self._next = 0  # where the tie-break rotation starts

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        index = self.choose(session_id)
        self._in_flight[index] += 1
        self._routed[index] += 1
        try:
            return await self.clients[index].complete(prompt_ids, params, session_id=session_id)
        except BureauSystemError as exc:
            if exc.kind in self.unhealthy_on:
                self._healthy[index] = False
            raise
        finally:
            self._in_flight[index] -= 1

    def choose(self, session_id: str | None = None) -> int:
        """The index of the engine the next request (of `session_id`) goes to; records stickiness.

        Raises `engine_unavailable` when no engine is healthy.
        """
        if session_id is not None:
            index = self._sessions.get(session_id)
            if index is not None and self._healthy[index]:
                self._sessions.move_to_end(session_id)
                return index
        n = len(self.clients)
        order = [(self._next + k) % n for k in range(n)]
        candidates = [i for i in order if self._healthy[i]]
        if not candidates:
            raise BureauSystemError(Kind.engine_unavailable, f"none of the {n} engines is healthy")
        index = min(candidates, key=lambda i: self._in_flight[i])
        self._next = (index + 1) % n
        if session_id is not None:
            self._sessions[session_id] = index
            self._sessions.move_to_end(session_id)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return index

    def release(self, session_id: str) -> None:
        """Forget a session (its next request, if any, is routed afresh)."""
        self._sessions.pop(session_id, None)

    def engine_of(self, session_id: str) -> int | None:
        """The engine a session sticks to, if it is remembered."""
        return self._sessions.get(session_id)

    def mark_unhealthy(self, index: int) -> None:
        self._healthy[index] = False

    def mark_healthy(self, index: int) -> None:
        self._healthy[index] = True

    async def refresh_health(self) -> list[bool]:
        """Ask each unhealthy engine's `health()` and bring back those that answer."""
        for index, client in enumerate(self.clients):
            if not self._healthy[index]:
                with contextlib.suppress(Exception):
                    self._healthy[index] = bool(await client.health())
        return list(self._healthy)

    def loads(self) -> list[EngineLoad]:
        return [
            EngineLoad(i, self._in_flight[i], self._routed[i], self._healthy[i])
            for i in range(len(self.clients))
        ]

    @property
    def num_sessions(self) -> int:
        return len(self._sessions)

    async def aclose(self) -> None:
        """Close every client that has an `aclose()`."""
        for client in self.clients:
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()
