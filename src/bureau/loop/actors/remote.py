"""The Ray actors of a run: engines, trainer ranks, rollout workers (see `bureau.loop.actors`)."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from bureau.inference.transport.broadcast import BACKENDS, Backend, WeightGroup, WeightGroupError
from bureau.loop.actors.probes import free_port, where_am_i
from bureau.loop.rollout import Rollout, RolloutRequest
from bureau.loop.sides import EngineHost, TrainerHost
from bureau.loop.worker import RolloutWorker, WorkerSpec
from bureau.records import TrainBatch

if TYPE_CHECKING:
    import torch

    from bureau.algo.losses import PolicyLossConfig
    from bureau.inference.engine import EngineConfig
    from bureau.trainer.config import TrainerConfig


@functools.cache
def _remote(cls: type) -> Any:
    return ray.remote(cls)


def actor(cls: type, **options: Any) -> Any:
    """`cls` as a Ray actor class with `options` (handles are dynamic: typed Any)."""
    return _remote(cls).options(**options)


def _threads(cpus: float) -> int:
    return max(1, int(cpus))


def _backend(name: str) -> Backend:
    for backend in BACKENDS:
        if name == backend:
            return backend
    raise ValueError(f"weight group backend must be one of {BACKENDS}, not {name!r}")


def engine_device(configured: str, gpu_ids: list[Any] | None = None) -> str:
    """An engine actor's device: `auto` is cuda when Ray gave the actor GPUs (they are the
    only ones `CUDA_VISIBLE_DEVICES` shows it, so `cuda` is the first of them), else cpu."""
    if configured != "auto":
        return configured
    ids = ray.get_gpu_ids() if gpu_ids is None else gpu_ids
    return "cuda" if ids else "cpu"


class EngineActor:
    """A built-in engine and its HTTP server; Ray restarts it on the same port."""

    def __init__(self, model_dir: str, config: EngineConfig, port: int, cpus: float) -> None:
        host = ray.util.get_node_ip_address()
        config = config.model_copy(update={"device": engine_device(config.device)})
        self.host = EngineHost(model_dir, config, host=host, port=port, threads=_threads(cpus))
        self.weight_group: WeightGroup | None = None

    def url(self) -> str:
        return self.host.url

    def pid(self) -> int:
        return os.getpid()

    def device(self) -> str:
        return str(self.host.engine.model.device)

    def placement(self) -> dict[str, Any]:
        return where_am_i() | {"device": self.device()}

    def weights_digest(self) -> str:
        """A digest of the weights the engine serves (`bureau.inference.weights.digest`)."""
        from bureau.inference.weights import digest

        return digest(self.host.engine.model.state_dict())

    def gpu_ids(self) -> list[Any]:
        """The GPUs Ray gave this actor (logical ones on a machine without GPUs)."""
        return list(ray.get_gpu_ids())

    def update_weights(
        self, state: dict[str, torch.Tensor] | str, version: int
    ) -> tuple[float, int]:
        """Load `version`; (seconds taken, the version held before: 0 after a restart)."""
        before = self.host.weight_version()
        return self.host.update_weights(state, version), before

    def weight_version(self) -> int:
        return self.host.weight_version()

    def join_weight_group(
        self, host: str, port: int, rank: int, world_size: int, backend: str, timeout_s: float
    ) -> None:
        """Leave any earlier weight group and join this one as receiver `rank`."""
        self.leave_weight_group()
        self.weight_group = WeightGroup.create(
            host, port, rank, world_size, _backend(backend), timeout_s
        )

    def receive_weights(self) -> float:
        """The next broadcast, loaded in place (pause keep, update, resume); seconds taken."""
        if self.weight_group is None:
            raise WeightGroupError("this engine is in no weight group (restarted?)")
        started = time.perf_counter()
        state, version = self.weight_group.receive()
        self.host.update_weights(state, version)
        return time.perf_counter() - started

    def leave_weight_group(self) -> None:
        if self.weight_group is not None:
            self.weight_group.close()
            self.weight_group = None

    def stop(self) -> None:
        self.leave_weight_group()
        self.host.stop()


class VLLMEngineActor:
    """A vLLM server process (from `.venv-vllm` on CPU) on Ray's resources.

    The driver updates its weights over HTTP (`bureau.loop.weights.HTTPWeights`). The server
    starts labelled version 0, so one that Ray restarted on the initial weights reports that
    it is behind (`/weight_info`) until the loop's repair has pushed the current version.
    """

    def __init__(
        self,
        model_dir: str,
        max_model_len: int,
        log_path: str,
        port: int,
        *,
        dtype: str = "float32",
        extra_args: list[str] | None = None,
        startup_timeout_s: float = 600.0,
    ) -> None:
        import httpx

        from bureau.inference.vllm import VLLMServer, VLLMServerConfig

        config = VLLMServerConfig(
            model=Path(model_dir),
            max_model_len=max_model_len,
            log_path=Path(log_path),
            host=ray.util.get_node_ip_address(),
            port=port,
            dtype=dtype,
            extra_args=list(extra_args or []),
            startup_timeout_s=startup_timeout_s,
            # Ray gave this engine a share of the node's CPUs (OMP_NUM_THREADS), not cores by
            # number: vLLM's own binding would pin every engine of a node to the same cores
            # (seen: two engines both on core 0 while the other core ran the rest).
            cpu_threads_bind="nobind",
        )
        self.server = VLLMServer(config).start()
        try:
            httpx.post(
                f"{self.server.base_url}/update_weight_version",
                json={"new_version": "0"},
                timeout=30,
            ).raise_for_status()
        except BaseException:
            self.server.stop()
            raise

    def url(self) -> str:
        return self.server.base_url

    def served_model_name(self) -> str:
        return self.server.served_model_name

    def pid(self) -> int:
        return os.getpid()

    def server_pid(self) -> int | None:
        """The server's process group (its keeper's pid)."""
        return self.server.pid

    def placement(self) -> dict[str, Any]:
        return where_am_i() | {"server_pid": self.server.pid}

    def stop(self) -> None:
        self.server.stop()


class TrainerActor:
    """One trainer rank. Ranks of one trainer join a gloo/nccl group through `setup`."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.host: TrainerHost | None = None
        self.weight_group: WeightGroup | None = None

    def address(self) -> tuple[str, int]:
        return ray.util.get_node_ip_address(), free_port()

    def placement(self) -> dict[str, Any]:
        device = str(self.host.trainer.parallel.device) if self.host is not None else None
        return where_am_i() | {"device": device, "rank": self.rank}

    def setup(
        self,
        master: tuple[str, int],
        model_dir: str,
        trainer: TrainerConfig,
        loss: PolicyLossConfig,
        seed: int,
        cpus: float,
    ) -> None:
        distributed = self.world_size > 1
        if distributed:
            os.environ.update(
                MASTER_ADDR=master[0],
                MASTER_PORT=str(master[1]),
                RANK=str(self.rank),
                WORLD_SIZE=str(self.world_size),
                LOCAL_RANK=str(self.rank % max(1, len(ray.get_gpu_ids()) or 1)),
            )
        self.host = TrainerHost(
            model_dir, trainer, loss, seed=seed, distributed=distributed, threads=_threads(cpus)
        )

    def _host(self) -> TrainerHost:
        assert self.host is not None, "setup() first"
        return self.host

    def step(self, batch: TrainBatch) -> dict[str, Any]:
        return self._host().step(batch)

    def version(self) -> int:
        return self._host().version()

    def state_dict(self, dtype: str) -> dict[str, torch.Tensor]:
        return self._host().state_dict(dtype)

    def save(self, path: str, loop_state: dict[str, Any]) -> None:
        self._host().save(path, loop_state)

    def load(self, path: str) -> dict[str, Any]:
        return self._host().load(path)

    def export(self, out: str, dtype: str = "float32") -> str:
        return self._host().export(out, dtype)

    def join_weight_group(
        self, host: str, port: int, world_size: int, backend: str, timeout_s: float
    ) -> None:
        """Rank 0 only: host a weight group at `host:port` as its sender (rank 0 there too)."""
        assert self.rank == 0, "only trainer rank 0 sends weights"
        self.leave_weight_group()
        self.weight_group = WeightGroup.create(
            host, port, 0, world_size, _backend(backend), timeout_s
        )

    def send_weights(self, version: int, dtype: str) -> tuple[float, float]:
        """Every rank gathers the full state dict (a collective); rank 0 broadcasts it.
        Returns (seconds gathering, seconds sending)."""
        started = time.perf_counter()
        state = self._host().state_dict(dtype)
        gathered = time.perf_counter()
        if self.rank != 0:
            return gathered - started, 0.0
        if self.weight_group is None:
            raise WeightGroupError("trainer rank 0 is in no weight group")
        self.weight_group.send(state, version)
        return gathered - started, time.perf_counter() - gathered

    def leave_weight_group(self) -> None:
        if self.weight_group is not None:
            self.weight_group.close()
            self.weight_group = None

    def close(self) -> None:
        self.leave_weight_group()
        if self.host is not None:
            self.host.close()


class RolloutActor:
    """A rollout worker process: trials run concurrently on its event loop."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.worker: RolloutWorker | None = None
        self._starting: asyncio.Lock | None = None

    async def _ready(self) -> RolloutWorker:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.worker is None:
                self.worker = await RolloutWorker(self.spec).start()
        return self.worker

    async def ping(self) -> int:
        await self._ready()
        return os.getpid()

    def placement(self) -> dict[str, Any]:
        return where_am_i()

    async def rollout(self, request: RolloutRequest) -> Rollout:
        return await (await self._ready()).rollout(request)

    async def set_weight_version(self, version: int) -> None:
        (await self._ready()).set_weight_version(version)

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.close()
