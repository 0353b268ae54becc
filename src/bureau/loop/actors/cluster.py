"""Placing a run's actors on a Ray cluster (local, or `ray start --head` elsewhere)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from bureau.loop.config import RunConfig
from bureau.loop.status import RunStatus

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


def _bundle(cpus: float, gpus: float, extra: dict[str, float] | None = None) -> dict[str, float]:
    bundle = {"CPU": cpus} if cpus > 0 else {}
    if gpus > 0:
        bundle["GPU"] = gpus
    bundle.update({k: v for k, v in (extra or {}).items() if v > 0})
    return bundle


class SharedPathsError(RuntimeError):
    """A node of the run cannot see a path the run needs there (no shared filesystem)."""


class RayRun:
    """The actors of one run; `start()` places them, `close()` releases them (idempotent)."""

    def __init__(self, config: RunConfig, say: Say, status: RunStatus | None = None) -> None:
        self.config = config
        self.say = say
        self.status = status or RunStatus()
        self.trainer_ranks: list[Any] = []
        self.engines: list[Any] = []
        self.workers: list[Any] = []
        self.group: Any = None
        self.bundles: list[dict[str, float]] = []
        self.placed: list[tuple[str, int, int | None]] = []
        """(role, index, bundle index) of every actor, in start order."""
        self.prefix = f"bureau-{uuid.uuid4().hex[:8]}"
        """Actors are named `<prefix>-<role>-<index>` (`ray.get_actor` from this driver)."""
        self.engine_urls: list[str] = []
        self._engines_launched = 0.0
        self.served_model = config.model.served_name or config.model.path.name

    def _specs(self) -> dict[str, dict[str, float]]:
        cfg = self.config
        return {
            "trainer": _bundle(
                cfg.ray.trainer_cpus, cfg.ray.trainer_gpus, cfg.ray.trainer_resources
            ),
            "engine": _bundle(cfg.engines.num_cpus, cfg.engines.num_gpus, cfg.engines.resources),
            "rollout": _bundle(cfg.rollout.worker_cpus, 0, cfg.rollout.worker_resources),
        }

    def start(self) -> None:
        cfg = self.config
        specs = self._specs()
        counts = {
            "trainer": cfg.ray.trainer_ranks,
            "engine": cfg.engines.count if cfg.engines.kind != "url" else 0,
            "rollout": cfg.rollout.workers,
        }
        self.bundles = [specs[role] for role in counts for _ in range(counts[role]) if specs[role]]
        self.group = placement(self.bundles) if self.bundles else None
        self._index = 0
        self.check_shared_paths()  # before any actor: one that cannot see the model fails opaquely
        # The trainer's and the engines' processes start side by side (each loads the model);
        # the rollout workers need the engines' addresses, so they come last.
        self._launch_trainer()
        self._launch_engines()
        self.status.set(f"starting the trainer ({cfg.ray.trainer_ranks} rank(s))")
        self._setup_trainer()
        if counts["engine"]:
            self.status.set(f"starting {counts['engine']} {cfg.engines.kind} engine(s)")
        self._await_engines()
        self.status.set(f"starting {cfg.rollout.workers} rollout worker(s)")
        self._start_workers()

    def _options(self, role: str, index: int) -> dict[str, Any]:
        """Ray options of one actor: its role's resources, in the next bundle (in the order
        `start` laid them out), named `<prefix>-<role>-<index>`."""
        spec = self._specs()[role]
        options: dict[str, Any] = {
            "num_cpus": spec.get("CPU", 0.0),
            "num_gpus": spec.get("GPU", 0.0),
            "name": f"{self.prefix}-{role}-{index}",
        }
        custom = {k: v for k, v in spec.items() if k not in ("CPU", "GPU")}
        if custom:
            options["resources"] = custom
        bundle = None
        if self.group is not None and spec:
            bundle = self._index
            options["scheduling_strategy"] = in_bundle(self.group, bundle)
            self._index += 1
        self.placed.append((role, index, bundle))
        return options

    def _port_in(self, options: dict[str, Any]) -> int:
        """A free port on the node the actor with `options` will run on (another node's free
        port may be taken there); Ray restarts the actor with the same one."""
        from bureau.loop.actors.probes import free_port

        strategy = options.get("scheduling_strategy")
        if strategy is None:
            return free_port()
        probe = ray.remote(free_port).options(num_cpus=0, scheduling_strategy=strategy)
        return int(ray.get(probe.remote()))

    def check_shared_paths(self) -> None:
        """Every alive node of the cluster (any may get this run's actors) must see the run
        folder, the model and the task folders under the same paths (one machine, or a
        filesystem the nodes share): a marker written here must be readable there. Runs
        before any actor starts. Raises `SharedPathsError` naming each node and path."""
        from bureau.loop.actors.probes import check_paths

        cfg = self.config
        cfg.out.mkdir(parents=True, exist_ok=True)
        marker = cfg.out / f".node-check-{self.prefix}"
        marker.write_text(self.prefix)
        try:
            nodes = {
                n["NodeID"]: (n["NodeManagerAddress"], n.get("Resources", {}))
                for n in ray.nodes()
                if n.get("Alive")
            }
            paths = [str(marker), str(cfg.model.path / "config.json"), str(cfg.data.train)]
            if cfg.data.eval is not None:
                paths.append(str(cfg.data.eval))
            probes = {
                node: ray.remote(check_paths)
                .options(
                    num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, False)
                )
                .remote(paths, self.prefix)
                for node in nodes
            }
            problems = {node: ray.get(ref) for node, ref in probes.items()}
        finally:
            marker.unlink(missing_ok=True)
        bad = {node: found for node, found in problems.items() if found}
        if bad:

            def resources(node: str) -> str:
                held = nodes[node][1]
                return ", ".join(f"{k} {held[k]:g}" for k in ("CPU", "GPU") if held.get(k))

            lines = [
                f"node {nodes[node][0]} ({resources(node)}): {'; '.join(found)}"
                for node, found in bad.items()
            ]
            raise SharedPathsError(
                "every node of the run must see these paths as the driver does (one machine, "
                f"or a filesystem the nodes share): the run folder {cfg.out} (trials, "
                f"checkpoints, weight folders), the model {cfg.model.path} and the tasks "
                f"{cfg.data.train}"
                + (f" and {cfg.data.eval}" if cfg.data.eval else "")
                + ". Not so on:\n"
                + "\n".join(lines)
            )

    def placement_report(self) -> dict[str, Any]:
        """Where every actor landed: its bundle, node, process and (logical) GPUs, and what
        the placement group asked for. `bureau train` writes it to `RUN/placement.json`."""
        handles = [*self.trainer_ranks, *self.engines, *self.workers]
        seen = ray.get([h.placement.remote() for h in handles])
        table = ray.util.placement_group_table(self.group) if self.group is not None else {}
        nodes = {int(k): v for k, v in table.get("bundles_to_node_id", {}).items()}
        actors = [
            {
                "role": role,
                "index": index,
                "name": f"{self.prefix}-{role}-{index}",
                "bundle": bundle,
                "bundle_node": nodes.get(bundle) if bundle is not None else None,
            }
            | where
            for (role, index, bundle), where in zip(self.placed, seen, strict=True)
        ]
        return {"strategy": table.get("strategy"), "bundles": self.bundles, "actors": actors}

    def _launch_trainer(self) -> None:
        from bureau.loop.actors.remote import TrainerActor, actor

        n = self.config.ray.trainer_ranks
        self.trainer_ranks = [
            actor(TrainerActor, **self._options("trainer", rank)).remote(rank, n)
            for rank in range(n)
        ]

    def _setup_trainer(self) -> None:
        cfg = self.config
        n = cfg.ray.trainer_ranks
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

    def _launch_engines(self) -> None:
        from bureau.inference.engine import EngineConfig
        from bureau.loop.actors.remote import EngineActor, VLLMEngineActor, actor

        cfg = self.config
        self._engines_launched = time.perf_counter()
        context = cfg.rollout.harness.context_length
        restarts = {"max_restarts": cfg.engines.max_restarts, "max_task_retries": 0}
        if cfg.engines.kind == "url":
            self.engine_urls = list(cfg.engines.urls)
            return
        logs = cfg.out / "engines"
        logs.mkdir(parents=True, exist_ok=True)
        for index in range(cfg.engines.count):
            options = self._options("engine", index) | restarts
            port = self._port_in(options)
            if cfg.engines.kind == "builtin":
                engine_config = EngineConfig(
                    served_model_name=self.served_model,
                    max_batch=cfg.engines.max_batch,
                    max_model_len=context,
                    cache_tokens=max(cfg.engines.cache_tokens, context),
                    seed=cfg.seed * 1000 + index,
                    device=cfg.engines.device,
                    dtype=cfg.engines.dtype,
                )
                handle = actor(EngineActor, **options).remote(
                    str(cfg.model.path), engine_config, port, cfg.engines.num_cpus
                )
            else:
                handle = actor(VLLMEngineActor, **options).remote(
                    str(cfg.model.path),
                    context,
                    str(logs / f"vllm-{index}.log"),
                    port,
                    dtype=cfg.engines.dtype,
                    extra_args=list(cfg.engines.vllm_args),
                    startup_timeout_s=cfg.engines.startup_timeout_s,
                )
            self.engines.append(handle)

    def _await_engines(self) -> None:
        cfg = self.config
        if cfg.engines.kind == "url":
            return
        self.engine_urls = ray.get([e.url.remote() for e in self.engines])
        if cfg.engines.kind == "vllm":
            self.served_model = ray.get(self.engines[0].served_model_name.remote())
        elapsed = time.perf_counter() - self._engines_launched
        where = ", ".join(self.engine_urls)
        if cfg.engines.kind == "vllm":  # each server's process group, to find it on the node
            groups = ray.get([e.server_pid.remote() for e in self.engines])
            where = ", ".join(
                f"{u} (group {g})" for u, g in zip(self.engine_urls, groups, strict=True)
            )
        self.say(
            f"engines: {cfg.engines.count} {cfg.engines.kind} ready in {elapsed:.1f} s at {where}"
        )

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
            options = self._options("rollout", index) | {
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
