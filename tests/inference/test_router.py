"""The router's choices, with fake engines: least-loaded, sticky sessions, failures surfaced."""

from __future__ import annotations

import asyncio

import pytest

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, SamplingParams
from bureau.inference.router import Router

PARAMS = SamplingParams(max_tokens=4)


class FakeEngine:
    """Answers when `gate` opens; fails with `fail` (once) if set; records what it served."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: SystemErrorKind | None = None
        self.served: list[str | None] = []
        self.alive = True

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        self.served.append(session_id)
        await self.gate.wait()
        if self.fail is not None:
            kind, self.fail = self.fail, None
            raise BureauSystemError(kind, f"{self.name} failed")
        return Completion([1, 2], [-0.1, -0.2], "length", [0, 0], engine=self.name)

    async def health(self) -> bool:
        return self.alive


def engines(n: int) -> list[FakeEngine]:
    return [FakeEngine(f"e{i}") for i in range(n)]


def test_requests_go_to_the_least_loaded_engine() -> None:
    async def go() -> None:
        fakes = engines(3)
        router = Router(fakes)
        for fake in fakes:
            fake.gate.clear()

        async def submit() -> asyncio.Task[Completion]:
            task = asyncio.create_task(router.complete([1], PARAMS))
            await asyncio.sleep(0)  # let it reach its engine
            return task

        tasks = [await submit() for _ in range(5)]
        assert [load.in_flight for load in router.loads()] == [2, 2, 1]
        fakes[2].gate.set()
        await tasks[2]
        assert [load.in_flight for load in router.loads()] == [2, 2, 0]
        tasks.append(await submit())
        assert len(fakes[2].served) == 2  # the idle engine got it
        fakes[0].gate.set()
        await asyncio.gather(tasks[0], tasks[3])
        tasks.append(await submit())
        assert len(fakes[0].served) == 3 and len(fakes[1].served) == 2
        fakes[1].gate.set()
        await asyncio.gather(*tasks)
        assert [load.in_flight for load in router.loads()] == [0, 0, 0]
        assert [load.routed for load in router.loads()] == [3, 2, 2]

    asyncio.run(go())


def test_ties_rotate() -> None:
    async def go() -> list[str]:
        router = Router(engines(3))
        return [(await router.complete([1], PARAMS)).engine for _ in range(6)]

    assert asyncio.run(go()) == ["e0", "e1", "e2", "e0", "e1", "e2"]


def test_sessions_stick_and_release_forgets_them() -> None:
    async def go() -> None:
        fakes = engines(2)
        router = Router(fakes)
        first = await router.complete([1], PARAMS, session_id="traj-1")
        await router.complete([1], PARAMS, session_id="traj-2")
        for _ in range(3):
            assert (
                await router.complete([1, 2], PARAMS, session_id="traj-1")
            ).engine == first.engine
        assert router.engine_of("traj-1") == int(first.engine[1])
        router.release("traj-1")
        assert router.engine_of("traj-1") is None and router.num_sessions == 1

    asyncio.run(go())


def test_the_session_map_is_bounded_lru() -> None:
    router = Router(engines(2), max_sessions=2)
    router.choose("a")
    router.choose("b")
    router.choose("a")  # b is now the least recently used
    router.choose("c")
    assert router.engine_of("b") is None
    assert router.engine_of("a") is not None and router.engine_of("c") is not None


def test_failures_are_raised_not_retried_elsewhere() -> None:
    async def go() -> None:
        fakes = engines(2)
        router = Router(fakes)
        fakes[0].fail = SystemErrorKind.engine_timeout
        with pytest.raises(BureauSystemError) as caught:
            await router.complete([1], PARAMS, session_id="s")
        assert caught.value.kind is SystemErrorKind.engine_timeout
        assert fakes[1].served == []  # never retried on the other engine
        # A timeout does not mark the engine unhealthy: the session still goes there.
        assert (await router.complete([1], PARAMS, session_id="s")).engine == "e0"

    asyncio.run(go())


def test_an_unreachable_engine_is_avoided_until_it_answers_again() -> None:
    async def go() -> None:
        fakes = engines(2)
        router = Router(fakes)
        await router.complete([1], PARAMS, session_id="s")  # sticks to e0
        fakes[0].fail = SystemErrorKind.engine_unavailable
        fakes[0].alive = False
        with pytest.raises(BureauSystemError):
            await router.complete([1], PARAMS, session_id="s")
        assert [load.healthy for load in router.loads()] == [False, True]
        for _ in range(3):  # new requests and the old session move to the healthy engine
            assert (await router.complete([1], PARAMS)).engine == "e1"
        assert (await router.complete([1], PARAMS, session_id="s")).engine == "e1"
        assert await router.refresh_health() == [False, True]
        fakes[0].alive = True
        assert await router.refresh_health() == [True, True]

    asyncio.run(go())


def test_no_healthy_engine_is_a_system_error() -> None:
    router = Router(engines(2))
    router.mark_unhealthy(0)
    router.mark_unhealthy(1)
    with pytest.raises(BureauSystemError) as caught:
        asyncio.run(router.complete([1], PARAMS))
    assert caught.value.kind is SystemErrorKind.engine_unavailable
    with pytest.raises(ValueError):
        Router([])
