"""The controller's ports over Ray actors (see `bureau.loop.ports`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from bureau.loop.rollout import Rollout, RolloutRequest, WorkerLost
from bureau.records import TrainBatch


class RayRollout:
    """`RolloutBackend` over rollout actors: least-loaded, `WorkerLost` when one dies."""

    def __init__(self, actors: list[Any]) -> None:
        self.actors = actors
        self.load = [0] * len(actors)
        self._turn = itertools.count()

    async def rollout(self, request: RolloutRequest) -> Rollout:
        n = len(self.actors)
        first = next(self._turn) % n  # ties rotate, so equal loads spread over the workers
        index = min(range(n), key=lambda i: (self.load[i], (i - first) % n))
        self.load[index] += 1
        try:
            result: Rollout = await self.actors[index].rollout.remote(request)
            return result
        except RayActorError as exc:
            raise WorkerLost(f"rollout worker {index}: {exc}") from exc
        finally:
            self.load[index] -= 1

    async def close(self) -> None:
        await asyncio.gather(*(a.close.remote() for a in self.actors), return_exceptions=True)


class RayTrainer:
    """`TrainerPort` over trainer ranks: every rank runs every call; rank 0 answers."""

    def __init__(self, ranks: list[Any]) -> None:
        self.ranks = ranks

    async def _all(self, method: str, *args: Any) -> Any:
        results = await asyncio.gather(*(getattr(r, method).remote(*args) for r in self.ranks))
        return results[0]

    async def step(self, batch: TrainBatch) -> dict[str, Any]:
        ref = ray.put(batch)
        result: dict[str, Any] = await self._all("step", ref)
        return result

    async def version(self) -> int:
        return int(await self.ranks[0].version.remote())

    async def save(self, path: Path, loop_state: dict[str, Any]) -> None:
        await self._all("save", str(path), loop_state)

    async def load(self, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = await self._all("load", str(path))
        return result

    async def export(self, out: Path) -> Path:
        return Path(await self._all("export", str(out)))

    async def close(self) -> None:
        await asyncio.gather(*(r.close.remote() for r in self.ranks), return_exceptions=True)


class RayWeights:
    """`WeightPort` from the trainer ranks to engine actors.

    object_store: rank 0's state dict goes into Ray's object store once and every engine reads
    it from there (no disk). disk: the trainer writes a safetensors folder that each engine
    reloads (vLLM's path).
    """

    def __init__(
        self,
        trainer: RayTrainer,
        engines: list[Any],
        *,
        transport: str,
        dtype: str,
        folder: Path,
    ) -> None:
        self.trainer = trainer
        self.engines = engines
        self.transport = transport
        self.dtype = dtype
        self.folder = folder

    async def _source(self, version: int) -> Any:
        if self.transport == "object_store":
            refs = [r.state_dict.remote(self.dtype) for r in self.trainer.ranks]
            await asyncio.gather(*refs[1:])  # the other ranks take part in the gather
            return refs[0]
        return str(await self.trainer.export(self.folder / f"step-{version}"))

    async def _push(self, engines: list[Any], version: int) -> tuple[float, float]:
        started = time.perf_counter()
        source = await self._source(version)
        exported = time.perf_counter() - started
        await asyncio.gather(*(e.update_weights.remote(source, version) for e in engines))
        return time.perf_counter() - started, exported

    async def publish(self, version: int) -> dict[str, float]:
        total, exported = await self._push(self.engines, version)
        return {"weights/sync_s": total, "weights/export_s": exported}

    async def repair(self, version: int) -> int:
        versions = await asyncio.gather(
            *(e.weight_version.remote() for e in self.engines), return_exceptions=True
        )
        behind = [
            e
            for e, v in zip(self.engines, versions, strict=True)
            if isinstance(v, int) and v < version
        ]
        if behind:
            await self._push(behind, version)
        return len(behind)
