"""Placing a run's actors on a Ray cluster (local, or `ray start --head` elsewhere)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from bureau.loop.config import RunConfig

Say = Callable[[str], None]
STOP_TIMEOUT_S = 60.0
"""How long engines get to stop their servers at the end of a run before they are killed
(a killed vLLM actor's server is still ended by its keeper, `bureau.inference.keeper`)."""


def placement(bundles: list[dict[str, float]], timeout_s: float = 120.0) -> PlacementGroup:
    """One placement group for the run's actors; fails clearly if the cluster cannot hold it."""
    group = placement_group(bundles, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(group)
        need: dict[str, float] = {}
        for bundle in bundles:
            for key, value in bundle.items():
                need[key] = need.get(key, 0.0) + value
        raise RuntimeError(
            f"the Ray cluster cannot place the run's actors within {timeout_s:.0f} s: they need "
            f"{need}, the cluster has {ray.cluster_resources()}"
        )
    return group


def in_bundle(group: PlacementGroup, index: int) -> PlacementGroupSchedulingStrategy:
    return PlacementGroupSchedulingStrategy(
        placement_group=group, placement_group_bundle_index=index
    )


def _bundle(cpus: float, gpus: float) -> dict[str, float]:
    bundle = {"CPU": cpus} if cpus > 0 else {}
    if gpus > 0:
        bundle["GPU"] = gpus
    return bundle


class RayRun:
    """The actors of one run; `start()` places them, `close()` releases them (idempotent)."""

    def __init__(self, config: RunConfig, say: Say) -> None:
        self.config = config
        self.say = say
        self.trainer_ranks: list[Any] = []
        self.engines: list[Any] = []
        self.workers: list[Any] = []
        self.group: Any = None
        self.engine_urls: list[str] = []
        self.served_model = config.model.served_name or config.model.path.name

    def start(self) -> None:
        cfg = self.config
        bundles: list[dict[str, float]] = []
        trainer = [_bundle(cfg.ray.trainer_cpus, cfg.ray.trainer_gpus)] * cfg.ray.trainer_ranks
        engines = [_bundle(cfg.engines.num_cpus, cfg.engines.num_gpus)] * (
            cfg.engines.count if cfg.engines.kind != "url" else 0
        )
        workers = [_bundle(cfg.rollout.worker_cpus, 0)] * cfg.rollout.workers
        for part in (trainer, engines, workers):
            bundles.extend(b for b in part if b)
        self.group = placement(bundles) if bundles else None
        self._index = 0
        self._start_trainer()
        self._start_engines()
        self._start_workers()

    def _options(self, cpus: float, gpus: float) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": gpus}
        if self.group is not None and (cpus > 0 or gpus > 0):
            options["scheduling_strategy"] = in_bundle(self.group, self._index)
            self._index += 1
        return options

    def _start_trainer(self) -> None:
        from bureau.loop.actors.remote import TrainerActor, actor

        cfg = self.config
        n = cfg.ray.trainer_ranks
        self.trainer_ranks = [
            actor(TrainerActor, **self._options(cfg.ray.trainer_cpus, cfg.ray.trainer_gpus)).remote(
                rank, n
            )
            for rank in range(n)
        ]
        master = ray.get(self.trainer_ranks[0].address.remote())
        ray.get(
            [
                r.setup.remote(
                    master,
                    str(cfg.model.path),
                    cfg.trainer,
                    cfg.algorithm.loss,
                    cfg.seed,
                    cfg.ray.trainer_cpus,
                )
                for r in self.trainer_ranks
            ]
        )
        self.say(f"trainer: {n} rank(s) on {cfg.model.path}")

    def _start_engines(self) -> None:
        from bureau.inference.engine import EngineConfig
        from bureau.loop.actors.remote import EngineActor, VLLMEngineActor, actor, free_port

        cfg = self.config
        started = time.perf_counter()
        context = cfg.rollout.harness.context_length
        restarts = {"max_restarts": cfg.engines.max_restarts, "max_task_retries": 0}
        if cfg.engines.kind == "url":
            self.engine_urls = list(cfg.engines.urls)
            return
        logs = cfg.out / "engines"
        logs.mkdir(parents=True, exist_ok=True)
        for index in range(cfg.engines.count):
            options = self._options(cfg.engines.num_cpus, cfg.engines.num_gpus) | restarts
            if cfg.engines.kind == "builtin":
                engine_config = EngineConfig(
                    served_model_name=self.served_model,
                    max_batch=cfg.engines.max_batch,
                    max_model_len=context,
                    cache_tokens=max(cfg.engines.cache_tokens, context),
                    seed=cfg.seed * 1000 + index,
                    device=cfg.engines.device,
                )
                handle = actor(EngineActor, **options).remote(
                    str(cfg.model.path), engine_config, free_port(), cfg.engines.num_cpus
                )
            else:
                handle = actor(VLLMEngineActor, **options).remote(
                    str(cfg.model.path), context, str(logs / f"vllm-{index}.log"), free_port()
                )
            self.engines.append(handle)
        self.engine_urls = ray.get([e.url.remote() for e in self.engines])
        if cfg.engines.kind == "vllm":
            self.served_model = ray.get(self.engines[0].served_model_name.remote())
        elapsed = time.perf_counter() - started
        self.say(f"engines: {cfg.engines.count} {cfg.engines.kind} ready in {elapsed:.1f} s")

    def _start_workers(self) -> None:
        from bureau.loop.actors.remote import RolloutActor, actor
        from bureau.loop.worker import WorkerSpec

        cfg = self.config
        for index in range(cfg.rollout.workers):
            spec = WorkerSpec(
                name=f"worker-{index}",
                model_dir=str(cfg.model.path),
                served_model=self.served_model,
                engine_urls=tuple(self.engine_urls),
                harness=cfg.rollout.harness,
                trials_dir=str(cfg.out / "trials"),
                isolation=cfg.rollout.isolation,
                agent_timeout_s=cfg.rollout.agent_timeout_s,
                warm_sandboxes=cfg.rollout.warm_sandboxes,
                tool_latency=cfg.rollout.tool_latency,
                keep_trials=cfg.rollout.keep_trials,
                judge=cfg.judge.share(cfg.rollout.workers) if cfg.judge is not None else None,
                missing_judge=cfg.rollout.missing_judge,
                faults=cfg.rollout.faults,
            )
            options = self._options(cfg.rollout.worker_cpus, 0) | {
                "max_restarts": cfg.rollout.max_worker_restarts,
                "max_task_retries": 0,
                "max_concurrency": 1000,
            }
            self.workers.append(actor(RolloutActor, **options).remote(spec))
        ray.get([w.ping.remote() for w in self.workers])

    def close(self) -> None:
        """Stop the engines (their servers' process groups), then kill every actor."""
        if self.engines:
            stops = [e.stop.remote() for e in self.engines]
            ray.wait(stops, num_returns=len(stops), timeout=STOP_TIMEOUT_S)
        for actor in [*self.workers, *self.engines, *self.trainer_ranks]:
            ray.kill(actor, no_restart=True)
        self.workers, self.engines, self.trainer_ranks = [], [], []
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None


def connect_ray(config: RunConfig) -> bool:
    """Join `ray.address`, or start Ray here; True when this call started it."""
    if ray.is_initialized():
        return False
    if config.ray.address:
        ray.init(address=config.ray.address, log_to_driver=False)
        return True
    ray.init(
        address="local",  # a new local cluster, even when another one runs on this machine
        num_cpus=config.ray.num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    return True


def disconnect_ray() -> None:
    ray.shutdown()
