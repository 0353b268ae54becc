"""The object-store weight port with stand-in actors: an engine that Ray is restarting is
missed by a push, not a reason to stop training (repair brings it up to date later)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from ray.exceptions import ActorUnavailableError

from bureau.loop.actors.ports import RayWeights


class _Method:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


class _Rank:
    def __init__(self) -> None:
        # In Ray an object ref that the engines read; here the state dict itself.
        self.state_dict = _Method(lambda _dtype: {"w": 1})


class _Trainer:
    def __init__(self) -> None:
        self.ranks = [_Rank()]


class _Engine:
    def __init__(self, restarting: bool = False, broken: bool = False) -> None:
        self.version = 0
        self.restarting, self.broken = restarting, broken

        async def update_weights(_state: Any, version: int) -> tuple[float, int]:
            if self.restarting:
                raise ActorUnavailableError("The actor is restarting", None)
            if self.broken:
                raise ValueError("bad weights")
            before, self.version = self.version, version
            return 0.0, before

        async def weight_version() -> int:
            return self.version

        self.update_weights = _Method(update_weights)
        self.weight_version = _Method(weight_version)


def _port(engines: list[_Engine], tmp_path: Path) -> RayWeights:
    return RayWeights(
        _Trainer(),  # type: ignore[arg-type]
        engines,
        transport="object_store",
        dtype="float32",
        folder=tmp_path,
    )


def test_a_restarting_engine_is_missed_then_repaired(tmp_path: Path) -> None:
    healthy, restarting = _Engine(), _Engine(restarting=True)
    port = _port([healthy, restarting], tmp_path)
    metrics = asyncio.run(port.publish(3))
    assert metrics["weights/missed"] == 1 and healthy.version == 3 and restarting.version == 0
    restarting.restarting = False  # Ray brought it back, on the initial weights
    assert asyncio.run(port.repair(3)) == 1
    assert restarting.version == 3


def test_a_push_counts_an_engine_that_came_back_on_the_initial_weights(tmp_path: Path) -> None:
    """Ray restarted an engine between two pushes (none missed it): the next push finds it
    more than one version behind and brings it current, and says so."""
    steady, restarted = _Engine(), _Engine()
    port = _port([steady, restarted], tmp_path)
    assert asyncio.run(port.publish(1))["weights/caught_up"] == 0
    assert asyncio.run(port.publish(2))["weights/caught_up"] == 0
    restarted.version = 0  # killed and restarted by Ray on the initial weights
    metrics = asyncio.run(port.publish(3))
    assert metrics["weights/caught_up"] == 1 and metrics["weights/missed"] == 0
    assert steady.version == restarted.version == 3


def test_any_other_failure_of_a_push_is_raised(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bad weights"):
        asyncio.run(_port([_Engine(), _Engine(broken=True)], tmp_path).publish(1))


def test_an_engine_actor_runs_on_cuda_only_when_ray_gave_it_gpus() -> None:
    from bureau.loop.actors.remote import engine_device

    assert engine_device("auto", gpu_ids=[0]) == "cuda"
    assert engine_device("auto", gpu_ids=[]) == "cpu"
    assert engine_device("cpu", gpu_ids=[0]) == "cpu"  # logical GPUs on a CPU machine
    assert engine_device("cuda", gpu_ids=[]) == "cuda"  # the engine then refuses it clearly


class _GroupRank:
    """Trainer rank 0 as the broadcast port drives it; records each group's size and push."""

    def __init__(self) -> None:
        self.worlds: list[int] = []
        self.sent: list[int] = []

        async def address() -> tuple[str, int]:
            return "127.0.0.1", 1

        async def join(host: str, port: int, world: int, backend: str, timeout: float) -> None:
            self.worlds.append(world)

        async def send(version: int, dtype: str) -> tuple[float, float]:
            self.sent.append(version)
            return 0.0, 0.0

        async def leave() -> None:
            pass

        self.address = _Method(address)
        self.join_weight_group = _Method(join)
        self.send_weights = _Method(send)
        self.leave_weight_group = _Method(leave)


class _GroupEngine:
    def __init__(self, rank: _GroupRank, pid: int) -> None:
        self.process, self.version, self.restarting = pid, 0, False

        def gone() -> None:
            if self.restarting:
                raise ActorUnavailableError("The actor is restarting", None)

        async def pid_() -> int:
            gone()
            return self.process

        async def join(*_args: Any) -> None:
            gone()

        async def receive() -> float:
            gone()
            self.version = rank.sent[-1]
            return 0.0

        async def version() -> int:
            gone()
            return self.version

        async def leave() -> None:
            gone()

        self.pid = _Method(pid_)
        self.join_weight_group = _Method(join)
        self.receive_weights = _Method(receive)
        self.weight_version = _Method(version)
        self.leave_weight_group = _Method(leave)


def test_a_broadcast_misses_a_restarting_engine_then_repairs_it() -> None:
    """Under the gloo/nccl broadcast too, an engine that Ray is restarting is missed by a push
    (the group is formed again without it), not a reason to stop the run; once it is back
    (a new process, version 0), repair forms the group with it and sends the current version."""
    from bureau.loop.actors.ports import BroadcastWeights

    rank = _GroupRank()
    engines = [_GroupEngine(rank, 100), _GroupEngine(rank, 200)]
    trainer = type("T", (), {"ranks": [rank]})()
    port = BroadcastWeights(trainer, engines, backend="gloo", dtype="float32")  # type: ignore[arg-type]
    first = asyncio.run(port.publish(1))
    assert first["weights/engines_updated"] == 2 and rank.worlds == [3]
    engines[1].restarting = True
    second = asyncio.run(port.publish(2))
    assert (second["weights/engines_updated"], second["weights/missed"]) == (1, 1)
    assert rank.worlds == [3, 2]  # formed again without it
    assert [e.version for e in engines] == [2, 1]
    assert asyncio.run(port.repair(2)) == 0  # still away
    engines[1].restarting, engines[1].process, engines[1].version = False, 201, 0
    assert asyncio.run(port.repair(2)) == 1
    assert rank.worlds == [3, 2, 3] and [e.version for e in engines] == [2, 2]
    third = asyncio.run(port.publish(3))  # the group stands: no new one
    assert third["weights/engines_updated"] == 2 and rank.worlds == [3, 2, 3]
