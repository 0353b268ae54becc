"""EngineWatch: a worker's weight-version labels and router health, with stand-in engines."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import EngineClient, EngineHTTPError
from bureau.inference.router import Router
from bureau.inference.watch import EngineWatch


class _Engine:
    """What the watch uses of an `EngineClient`: a version label, /weight_info, /health."""

    def __init__(self, name: str, reported: int | Exception | None = None) -> None:
        self.base_url = name
        self.known_version = 0
        self.reported = reported
        self.up = True
        self.asked = 0

    async def weight_version(self) -> int | None:
        self.asked += 1
        if isinstance(self.reported, Exception):
            raise self.reported
        return self.reported

    async def health(self) -> bool:
        return self.up

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not sampled here")


def _watch(*engines: _Engine) -> tuple[EngineWatch, Router]:
    clients = cast("list[EngineClient]", list(engines))
    router = Router(clients)
    return EngineWatch(clients, router, every_s=0.01), router


def test_a_push_labels_every_engine_and_a_reported_version_is_taken_up() -> None:
    vllm, silent = (
        _Engine("vllm", reported=None),
        _Engine("silent", reported=EngineHTTPError(404, "x")),
    )
    watch, _router = _watch(vllm, silent)
    watch.set_version(3)
    assert (vllm.known_version, silent.known_version) == (3, 3)
    # A version published while this worker was away (restarted) is read from the engine.
    vllm.reported = 5
    assert asyncio.run(watch.check()) == [True, True]
    assert (vllm.known_version, silent.known_version) == (5, 3)
    # An engine without /weight_info is asked once, then only its health.
    asyncio.run(watch.check())
    assert silent.asked == 1 and vllm.asked == 2


def test_an_engine_behind_the_label_gets_no_traffic_until_it_catches_up() -> None:
    a, b = _Engine("a", reported=4), _Engine("b", reported=4)
    watch, router = _watch(a, b)
    watch.set_version(4)
    b.reported = 0  # restarted by Ray on the initial weights
    assert asyncio.run(watch.check()) == [True, False]
    assert [load.healthy for load in router.loads()] == [True, False]
    assert b.known_version == 4  # the label is not lowered: the engine is avoided instead
    b.reported = 4  # repaired
    asyncio.run(watch.check())
    assert [load.healthy for load in router.loads()] == [True, True]


def test_an_engine_marked_unreachable_comes_back_when_it_answers() -> None:
    a, b = _Engine("a"), _Engine("b")
    watch, router = _watch(a, b)
    router.mark_unhealthy(1)  # what a request that could not reach it does
    b.up = False
    asyncio.run(watch.check())
    assert [load.healthy for load in router.loads()] == [True, False]
    b.up = True
    b.reported = BureauSystemError(SystemErrorKind.engine_timeout, "slow")
    asyncio.run(watch.check())
    assert [load.healthy for load in router.loads()] == [True, True]


def test_a_push_during_a_round_wins_over_what_the_round_read() -> None:
    engine = _Engine("a", reported=2)
    watch = EngineWatch(cast("list[EngineClient]", [engine]))

    async def run() -> None:
        original = engine.weight_version

        async def slow() -> int | None:
            value = await original()
            watch.set_version(7)  # lands while the round is reading
            return value

        engine.weight_version = slow  # type: ignore[method-assign]
        await watch.check()

    asyncio.run(run())
    assert engine.known_version == 7


def test_the_watch_runs_until_cancelled() -> None:
    a, b = _Engine("a"), _Engine("b")
    watch, router = _watch(a, b)
    router.mark_unhealthy(0)

    async def run() -> None:
        task = asyncio.create_task(watch.run())
        for _ in range(500):
            await asyncio.sleep(0.01)
            if router.loads()[0].healthy:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert router.loads()[0].healthy
