"""The controller's ports over Ray actors (see `bureau.loop.ports`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from bureau.inference.transport.broadcast import WeightGroupError
from bureau.inference.transport.disk import DiskTransport
from bureau.loop.config import RunConfig
from bureau.loop.ports import WeightPort
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
            raise WorkerLost(f"rollout worker {index}: {exc}", f"worker-{index}") from exc
        finally:
            self.load[index] -= 1

    async def set_weight_version(self, version: int) -> None:
        """Tell every worker; a dead one is skipped (restarted, its `EngineWatch` reads the
        engines' versions within seconds, and until then it over-estimates staleness)."""
        await asyncio.gather(
            *(a.set_weight_version.remote(version) for a in self.actors), return_exceptions=True
        )

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

    async def export(self, out: Path, dtype: str = "float32") -> Path:
        return Path(await self._all("export", str(out), dtype))

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
        self.disk = DiskTransport(folder)

    async def _source(self, version: int) -> Any:
        if self.transport == "object_store":
            refs = [r.state_dict.remote(self.dtype) for r in self.trainer.ranks]
            await asyncio.gather(*refs[1:])  # the other ranks take part in the gather
            return refs[0]
        folder = self.disk.folder(version)
        if (folder / "config.json").is_file():  # a repair of the version just published
            return str(folder)
        return str(await self.trainer.export(folder, self.dtype))

    async def _push(self, engines: list[Any], version: int) -> tuple[float, float, int, int]:
        """Send `version` to `engines`: (seconds, export seconds, engines missed, engines that
        were more than one version behind, as one Ray restarted on the initial weights is). An
        engine that died or is restarting is missed, not an error: Ray restarts it on the
        initial weights, and `repair` (or the next push) brings it to the current version."""
        started = time.perf_counter()
        source = await self._source(version)
        exported = time.perf_counter() - started
        results = await asyncio.gather(
            *(e.update_weights.remote(source, version) for e in engines), return_exceptions=True
        )
        missed = behind = 0
        for result in results:
            if isinstance(result, RayActorError):  # ActorUnavailableError too: restarting
                missed += 1
            elif isinstance(result, BaseException):
                raise result
            elif result[1] < version - 1:
                behind += 1
        if self.transport == "disk" and not missed:
            self.disk.prune(version)
        return time.perf_counter() - started, exported, missed, behind

    async def publish(self, version: int) -> dict[str, float]:
        total, exported, missed, behind = await self._push(self.engines, version)
        return {
            "weights/sync_s": total,
            "weights/export_s": exported,
            "weights/missed": missed,
            "weights/engines_updated": len(self.engines) - missed,
            "weights/caught_up": behind,
        }

    async def repair(self, version: int) -> int:
        versions = await asyncio.gather(
            *(e.weight_version.remote() for e in self.engines), return_exceptions=True
        )
        behind = [
            e
            for e, v in zip(self.engines, versions, strict=True)
            if isinstance(v, int) and v < version
        ]
        if not behind:
            return 0
        _, _, missed, _ = await self._push(behind, version)
        return len(behind) - missed


class BroadcastWeights:
    """`WeightPort` by collective broadcast from trainer rank 0 to builtin engine actors: nccl
    on GPUs, gloo on CPU (see `bureau.inference.transport.broadcast`). Every trainer rank
    gathers the full state dict; rank 0 broadcasts it while every engine receives it and loads
    it in place.

    A group's membership is fixed, so an engine that Ray restarted is outside it: publish and
    repair notice it (the engine's process id changed, or it does not answer while it
    restarts), dissolve the group and form a new one on a fresh port with the engines that
    answer. An engine that is restarting is missed by a push (counted in `weights/missed`),
    not a reason to stop the run, as on the object-store path; repair brings it to the current
    version once it is back. A push that fails midway (an engine died in it) is tried once more
    with a group formed again; a second failure raises. Publish and repair never overlap (one
    lock), since the group's collectives must run in the same order on every member.
    """

    def __init__(
        self,
        trainer: RayTrainer,
        engines: list[Any],
        *,
        backend: str,
        dtype: str,
        timeout_s: float = 300.0,
    ) -> None:
        self.trainer = trainer
        self.engines = engines
        self.backend = backend
        self.dtype = dtype
        self.timeout_s = timeout_s
        """Bounds every wait of the group; it includes the trainer's gather of the weights,
        which the engines wait through."""
        self._formed = False
        self._pids: list[int | None] = []
        self._members: list[Any] = []
        self._lock = asyncio.Lock()

    def _joins(self, address: tuple[str, int], members: list[Any]) -> list[Any]:
        host, port = address
        world = len(members) + 1
        sender = self.trainer.ranks[0].join_weight_group.remote(
            host, port, world, self.backend, self.timeout_s
        )
        receivers = [
            engine.join_weight_group.remote(host, port, rank, world, self.backend, self.timeout_s)
            for rank, engine in enumerate(members, start=1)
        ]
        return [sender, *receivers]

    def join(self) -> None:
        """Form the group now with every engine (blocking: at set-up, once the actors are up)."""
        ray.get(self._joins(ray.get(self.trainer.ranks[0].address.remote()), self.engines))
        self._pids = ray.get([e.pid.remote() for e in self.engines])
        self._members = list(self.engines)
        self._formed = True

    async def _engine_pids(self) -> list[int | None]:
        """Each engine's process id; None for one that does not answer (dead, restarting)."""
        found = await asyncio.gather(
            *(e.pid.remote() for e in self.engines), return_exceptions=True
        )
        return [p if isinstance(p, int) else None for p in found]

    async def _form(self, pids: list[int | None]) -> None:
        self._formed = False
        await asyncio.gather(
            *(m.leave_weight_group.remote() for m in [self.trainer.ranks[0], *self.engines]),
            return_exceptions=True,
        )
        members = [e for e, pid in zip(self.engines, pids, strict=True) if pid is not None]
        if members:
            await asyncio.gather(
                *self._joins(await self.trainer.ranks[0].address.remote(), members)
            )
        self._members, self._pids = members, pids
        self._formed = True

    async def _push(self, version: int) -> dict[str, float]:
        started = time.perf_counter()
        missed = len(self.engines) - len(self._members)
        if not self._members:
            return {"weights/sync_s": 0.0, "weights/engines_updated": 0.0, "weights/missed": missed}
        try:
            results = await asyncio.gather(
                *(r.send_weights.remote(version, self.dtype) for r in self.trainer.ranks),
                *(e.receive_weights.remote() for e in self._members),
            )
        except BaseException:
            self._formed = False
            raise
        gathered_s, sent_s = results[0]
        return {
            "weights/sync_s": time.perf_counter() - started,
            "weights/export_s": gathered_s,
            "weights/broadcast_s": sent_s,
            "weights/engines_updated": float(len(self._members)),
            "weights/missed": float(missed),
        }

    async def _push_to_live(self, version: int) -> dict[str, float]:
        """Push to the engines that answer, forming the group again where it changed; once
        more after a push that failed midway."""
        for attempt in (1, 2):
            pids = await self._engine_pids()
            if not self._formed or pids != self._pids:
                await self._form(pids)
            try:
                return await self._push(version)
            except (RayActorError, WeightGroupError):
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def publish(self, version: int) -> dict[str, float]:
        async with self._lock:
            return await self._push_to_live(version)

    async def repair(self, version: int) -> int:
        async with self._lock:
            versions = await asyncio.gather(
                *(e.weight_version.remote() for e in self.engines), return_exceptions=True
            )
            behind = sum(isinstance(v, int) and v < version for v in versions)
            if behind:
                self._formed = False  # the engines behind are new processes: a new group
                await self._push_to_live(version)
            return behind


def weight_port(
    config: RunConfig, trainer: RayTrainer, engines: list[Any], urls: list[str], folder: Path
) -> WeightPort:
    """The configured transport; a broadcast group is formed here, so call it once the actors
    are up (a group that cannot form fails the run now, not after the first step).

    vLLM engines and `url` engines with weight routes are updated over HTTP from a folder
    (`bureau.loop.weights.HTTPWeights`), `url` engines without them not at all."""
    from bureau.loop.weights import HTTPWeights, NoWeights, control_factory

    if config.engines.kind == "url" and config.engines.url_control == "none":
        return NoWeights()
    if config.engines.kind in ("vllm", "url"):
        kind = "vllm" if config.engines.kind == "vllm" else config.engines.url_control
        assert kind != "none"
        return HTTPWeights(
            trainer, urls, control_factory(kind), DiskTransport(folder), dtype=config.weights.dtype
        )
    if config.transport in ("nccl", "gloo"):
        weights = BroadcastWeights(
            trainer, engines, backend=config.transport, dtype=config.weights.dtype
        )
        weights.join()
        return weights
    return RayWeights(
        trainer, engines, transport=config.transport, dtype=config.weights.dtype, folder=folder
    )
