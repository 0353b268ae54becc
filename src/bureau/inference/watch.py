"""A sampler's view of its engines, kept true while it samples: weight versions and health.

**Versions.** The built-in engine labels every sampled token with the version that drew it;
vLLM and most `url` engines label none, so `EngineClient` labels their tokens with its
`known_version`. `set_version(v)` is how whoever pushed the weights (the loop's controller,
after every engine resumed on version v) tells the clients; `check()` also reads each engine's
own `/weight_info`, which catches what no push tells: a version published while this process
was restarting is taken up (a reported version above the known one becomes the label), and an
engine that reports less than the clients know (restarted by Ray on the initial weights, not yet
repaired) is taken out of the router until it has caught up. Labels err one way only: a token
drawn just after an update may carry the older version (staleness over-estimated), never a
newer one.

**Health.** A `Router` stops sending to an engine once a request to it could not reach it.
`check()` asks every engine's `/health` and brings back the ones that answer (and are not
behind), so a restarted engine gets traffic again; `run()` checks every `every_s` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from bureau.errors import BureauSystemError
from bureau.inference.client import EngineClient, EngineHTTPError
from bureau.inference.router import Router

log = logging.getLogger(__name__)


class EngineWatch:
    """Versions and health of `clients` (the engines of `router`, when there are several)."""

    def __init__(
        self, clients: Sequence[EngineClient], router: Router | None = None, *, every_s: float = 2.0
    ) -> None:
        if router is not None and list(router.clients) != list(clients):
            raise ValueError("the router must route over exactly the watched clients")
        self.clients = list(clients)
        self.router = router
        self.every_s = every_s
        self._pushes = 0
        self._reports = [True] * len(self.clients)
        """Whether each engine has a `/weight_info` route (a 404 turns it off)."""

    def set_version(self, version: int) -> None:
        """Every engine serves `version` from now on (its update finished)."""
        self._pushes += 1
        for client in self.clients:
            client.known_version = version

    async def _reported(self, index: int) -> int | None:
        if not self._reports[index]:
            return None
        try:
            return await self.clients[index].weight_version()
        except EngineHTTPError as exc:
            if exc.status == 404:
                self._reports[index] = False
            return None
        except BureauSystemError:
            return None

    async def check(self) -> list[bool]:
        """One round: read versions and health, update labels and the router; the health."""
        pushes = self._pushes
        versions, health = await asyncio.gather(
            asyncio.gather(*(self._reported(i) for i in range(len(self.clients)))),
            asyncio.gather(*(c.health() for c in self.clients)),
        )
        usable = []
        for index, client in enumerate(self.clients):
            version = versions[index]
            # A push during the round is newer than what the round read.
            if version is not None and pushes == self._pushes and version > client.known_version:
                log.info("%s serves version %d: labelling with it", client.base_url, version)
                client.known_version = version
            behind = version is not None and version < client.known_version
            usable.append(bool(health[index]) and not behind)
        if self.router is not None:
            for index, ok in enumerate(usable):
                if ok:
                    self.router.mark_healthy(index)
                else:
                    self.router.mark_unhealthy(index)
        return usable

    async def run(self) -> None:
        """`check()` every `every_s` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.every_s)
            with contextlib.suppress(Exception):
                await self.check()
