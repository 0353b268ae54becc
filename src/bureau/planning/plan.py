"""`bureau plan`: from a model, a cluster and a workload to a trainer layout, an engine count
and the `bureau train` settings that run them.

The decision the reference pipeline made by hand: fix the trainer pool, sweep the trainer's
parallelism for the fastest layout that fits, then add inference engines until the trainer no
longer waits for data. Every rate is an input with a default and a note of where it came from;
measured rates (`decode_tokens_per_s`, `trainer_tokens_per_s`) replace the estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from bureau.config import StrictModel
from bureau.planning.engines import EngineAssumptions, EngineFit, Split, Workload, engine_fit, split
from bureau.planning.model import ModelSpec
from bureau.planning.trainer import Layout, TrainerAssumptions, TrainerFit, estimate, sweep

INTERCONNECT_PENALTY = {"nvlink-ib": 0.25, "ethernet": 0.6}
"""Step time added when expert or context exchanges leave a node, by the network between
nodes (an assumption: InfiniBand/RoCE at 400 Gb/s per GPU, or a slower Ethernet)."""


class Cluster(StrictModel):
    gpus_per_node: int = Field(8, gt=0)
    gpu_memory_gib: float = Field(80.0, gt=0)
    """80 for H100, 141 for H200."""
    hbm_tbps: float = Field(3.35, gt=0)
    peak_tflops: float = Field(989.0, gt=0)
    interconnect: str = "nvlink-ib"
    """`nvlink-ib` or `ethernet`: how dear traffic between nodes is."""
    trainer_nodes: int = Field(4, gt=0)
    engine_tp: int = Field(8, gt=0)


class Rates(StrictModel):
    mfu: float = Field(0.3, gt=0, le=1)
    """Trainer's sustained share of peak (assumed: MoE trainers reach 0.15-0.3)."""
    trainer_tokens_per_s: float | None = Field(None, gt=0)
    """Measured trainer throughput for the chosen layout: replaces the FLOPs estimate."""
    decode_tokens_per_s: float | None = Field(None, gt=0)
    """Measured decode throughput of one engine at its concurrency: replaces the roofline."""
    micro_tokens: int = Field(32768, gt=0)
    """The trainer's micro-batch token budget per GPU."""
    target_wait: float = Field(0.05, ge=0, lt=1)


@dataclass(frozen=True)
class Plan:
    model: ModelSpec
    cluster: Cluster
    workload: Workload
    rates: Rates
    trainer: TrainerFit
    ranked: list[TrainerFit]
    engine: EngineFit
    split: Split
    notes: list[str]

    @property
    def engine_nodes(self) -> float:
        return self.split.engine_gpus / self.cluster.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.name,
            "params_b": {
                "total": round(self.model.total_params(mtp=False) / 1e9, 2),
                "active": round(self.model.active_params() / 1e9, 2),
            },
            "cluster": self.cluster.model_dump(),
            "workload": self.workload.model_dump(),
            "rates": self.rates.model_dump(),
            "trainer": self.trainer.to_dict(),
            "trainer_alternatives": [f.to_dict() for f in self.ranked[1:6]],
            "engine": self.engine.to_dict(),
            "split": self.split.to_dict()
            | {"engine_nodes": self.engine_nodes, "trainer_nodes": self.cluster.trainer_nodes},
            "notes": self.notes,
        }

    def train_config(self) -> dict[str, Any]:
        """The `bureau train` settings this plan sets (merge into a run config). bureau's
        trainer is FSDP2: a layout with TP, PP, CP or EP above 1 needs a Megatron trainer,
        which bureau does not have, and the plan says so."""
        gpus = self.cluster.trainer_nodes * self.cluster.gpus_per_node
        w = self.workload
        return {
            "engines": {
                "kind": "vllm",
                "count": self.split.engines,
                "num_gpus": float(self.cluster.engine_tp),
                "vllm_args": ["--tensor-parallel-size", str(self.cluster.engine_tp)],
                "max_batch": self.engine.concurrency,
                "dtype": "bfloat16",
            },
            "ray": {"trainer_ranks": gpus, "trainer_gpus": 1.0},
            "rollout": {
                "attempts": w.group_size,
                "max_in_flight": max(1, round(self.split.in_flight)),
                "harness": {"context_length": w.context_length},
            },
            "async": {"max_staleness": w.max_staleness, "groups_per_step": w.groups_per_step},
            "trainer": {
                "dtype": "bfloat16",
                "activation_checkpointing": self.trainer.layout.recompute,
                "packing": {"token_budget": self.rates.micro_tokens},
            },
        }


def make_plan(
    model: ModelSpec, cluster: Cluster, workload: Workload, rates: Rates | None = None
) -> Plan:
    rates = rates or Rates()
    notes: list[str] = []
    gpus = cluster.trainer_nodes * cluster.gpus_per_node
    penalty = INTERCONNECT_PENALTY.get(cluster.interconnect)
    if penalty is None:
        raise ValueError(
            f"interconnect: {cluster.interconnect!r}, not one of {list(INTERCONNECT_PENALTY)}"
        )
    assume = TrainerAssumptions(
        gpu_memory_gib=cluster.gpu_memory_gib,
        peak_tflops=cluster.peak_tflops,
        mfu=rates.mfu,
        cross_node_penalty=penalty,
    )
    tokens_per_step = workload.group_size * workload.groups_per_step * workload.mean_tokens
    ranked = sweep(model, gpus, rates.micro_tokens, tokens_per_step, assume, cluster.gpus_per_node)
    if not ranked:
        raise ValueError(
            f"no trainer layout of {model.name} fits {gpus} GPUs of {cluster.gpu_memory_gib:g} GiB "
            f"at {rates.micro_tokens} tokens a micro-batch: add trainer nodes or lower the budget"
        )
    chosen = ranked[0]
    step_s = chosen.step_s
    if rates.trainer_tokens_per_s is not None:
        step_s = tokens_per_step / rates.trainer_tokens_per_s
        notes.append(f"trainer step from the measured {rates.trainer_tokens_per_s:,.0f} tokens/s")
    else:
        flops = 8 if chosen.layout.recompute else 6
        notes.append(
            f"trainer step from {flops} x active parameters FLOPs a token at MFU {rates.mfu:g} "
            "(assumed; pass trainer_tokens_per_s once measured)"
        )
    grid = (chosen.layout.tp, chosen.layout.pp, chosen.layout.cp, chosen.layout.ep)
    if not chosen.layout.fsdp and grid != (1, 1, 1, 1):
        notes.append(
            f"the chosen layout ({chosen.layout.label()}) needs a Megatron-style trainer; "
            "bureau's trainer is FSDP2 (ray.trainer_ranks in the config below)"
        )
    engine = engine_fit(
        model,
        cluster.engine_tp,
        workload.context_length,
        workload.mean_tokens,
        EngineAssumptions(
            gpu_memory_gib=cluster.gpu_memory_gib,
            hbm_tbps=cluster.hbm_tbps,
            peak_tflops=cluster.peak_tflops,
            decode_tokens_per_s=rates.decode_tokens_per_s,
        ),
    )
    if not engine.fits:
        raise ValueError(
            f"{model.name} does not fit an engine of {cluster.engine_tp} GPUs of "
            f"{cluster.gpu_memory_gib:g} GiB with a {workload.context_length}-token sequence "
            f"(weights {engine.weights_gib_per_gpu:.0f} GiB a GPU): raise engine_tp or use FP8"
        )
    notes.append(
        "decode rate measured"
        if engine.measured
        else "decode rate from a memory-bandwidth roofline (assumed; measure it with vLLM's "
        "benchmark and pass decode_tokens_per_s)"
    )
    planned = split(engine, step_s, workload, rates.target_wait)
    if planned.staleness_p99 > workload.max_staleness:
        notes.append(
            f"a p99 trajectory spans {planned.staleness_p99} trainer steps, past max_staleness "
            f"{workload.max_staleness}: the long tail is dropped or corrected as the loop is set"
        )
    return Plan(model, cluster, workload, rates, chosen, ranked, engine, planned, notes)


def evaluate_published(
    model: ModelSpec,
    layout: Layout,
    gpus: int,
    micro_tokens: int,
    cluster: Cluster,
) -> TrainerFit:
    """A published trainer allocation, judged with the same estimate as the sweep."""
    assume = TrainerAssumptions(
        gpu_memory_gib=cluster.gpu_memory_gib, peak_tflops=cluster.peak_tflops
    )
    return estimate(
        model, layout, gpus, micro_tokens, micro_tokens * gpus, assume, cluster.gpus_per_node
    )
