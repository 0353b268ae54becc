"""What one inference engine holds and how fast it decodes, and how many engines keep the
trainer fed (Little's law over the trajectories in flight).

Capacity: an engine of `tp` GPUs has `tp x (memory x utilization - reserve)` for weights and
cache. Weights take 2 bytes a parameter (1 with FP8), MTP layers left out (they run only for
speculative decoding). A sequence then costs its full-attention KV cache per token plus the
fixed state of the linear-attention layers, so an engine holds
`free / (tokens x kv_per_token + state)` sequences of `tokens` tokens.

Throughput, unless measured: a decode step is memory-bound, so its time is the bytes it reads
over the HBM bandwidth it sustains: the dense weights, the routed experts the batch touches (for
B sequences routing k of E experts each, E x (1 - (1 - k/E)^B) per layer on average) and every
sequence's cache and state. Prefill is compute-bound at 2 x active parameters FLOPs a token.
Both are assumptions until a user gives measured rates (`decode_tokens_per_s`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import Field

from bureau.config import StrictModel
from bureau.planning.model import ModelSpec

GIB = 2**30


class EngineAssumptions(StrictModel):
    gpu_memory_gib: float = Field(80.0, gt=0)
    memory_utilization: float = Field(0.9, gt=0, le=1)
    """vLLM's `gpu_memory_utilization`."""
    reserve_gib: float = Field(4.0, ge=0)
    """Per GPU, for activations of the largest batch and CUDA graphs."""
    weight_bytes: float = Field(2.0, gt=0)
    """2 for bf16, 1 for FP8 weights."""
    kv_bytes: int = Field(2, gt=0)
    hbm_tbps: float = Field(3.35, gt=0)
    """HBM bandwidth per GPU (H100 SXM 3.35 TB/s, H200 4.8)."""
    bandwidth_efficiency: float = Field(0.6, gt=0, le=1)
    """Share of the bandwidth a decode step sustains (an assumption)."""
    peak_tflops: float = Field(989.0, gt=0)
    prefill_mfu: float = Field(0.4, gt=0, le=1)
    max_num_seqs: int = Field(256, gt=0)
    """vLLM's cap on sequences in one batch."""
    decode_tokens_per_s: float | None = Field(None, gt=0)
    """Measured decode throughput of one engine at its concurrency: replaces the estimate."""


@dataclass(frozen=True)
class EngineFit:
    tp: int
    weights_gib_per_gpu: float
    free_gib: float
    """For cache and state, over the engine's GPUs."""
    kv_bytes_per_token: int
    state_bytes_per_sequence: int
    sequences_at_context: int
    """Sequences held at the full context length."""
    sequences_at_mean: int
    concurrency: int
    """Sequences decoded together: the mean-length capacity, capped by max_num_seqs."""
    decode_tokens_per_s: float
    prefill_tokens_per_s: float
    measured: bool

    @property
    def fits(self) -> bool:
        return self.free_gib > 0 and self.sequences_at_context >= 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"fits": self.fits}


def engine_fit(
    model: ModelSpec,
    tp: int,
    context_tokens: int,
    mean_tokens: int,
    assume: EngineAssumptions | None = None,
) -> EngineFit:
    a = assume or EngineAssumptions()
    weights = model.total_params(mtp=False) * a.weight_bytes
    usable = tp * (a.gpu_memory_gib * a.memory_utilization - a.reserve_gib) * GIB
    free = usable - weights
    kv = model.kv_bytes_per_token(a.kv_bytes)
    state = model.state_bytes_per_sequence()
    at_context = max(0, math.floor(free / (context_tokens * kv + state))) if free > 0 else 0
    at_mean = max(0, math.floor(free / (mean_tokens * kv + state))) if free > 0 else 0
    concurrency = min(at_mean, a.max_num_seqs)
    prefill = tp * a.peak_tflops * 1e12 * a.prefill_mfu / (2 * model.active_params())
    if a.decode_tokens_per_s is not None:
        decode = a.decode_tokens_per_s
    else:
        decode = _decode_estimate(model, tp, concurrency, mean_tokens, a)
    return EngineFit(
        tp=tp,
        weights_gib_per_gpu=weights / tp / GIB,
        free_gib=free / GIB,
        kv_bytes_per_token=kv,
        state_bytes_per_sequence=state,
        sequences_at_context=at_context,
        sequences_at_mean=at_mean,
        concurrency=concurrency,
        decode_tokens_per_s=decode,
        prefill_tokens_per_s=prefill,
        measured=a.decode_tokens_per_s is not None,
    )


def _decode_estimate(
    model: ModelSpec, tp: int, batch: int, mean_tokens: int, a: EngineAssumptions
) -> float:
    """Tokens a second of one engine decoding `batch` sequences of `mean_tokens` on average
    (half of them generated so far: the cache a step reads is at mean_tokens / 2)."""
    if batch < 1:
        return 0.0
    layers = model.num_layers
    dense = (model.total_params(mtp=False) - model.expert_params() * layers) * a.weight_bytes
    touched = 0.0
    if model.moe is not None:
        e, k = model.moe.num_experts, model.moe.experts_per_token
        distinct = e * (1 - (1 - k / e) ** batch)
        touched = layers * distinct * model.expert_params() / e * a.weight_bytes
    cache = batch * (mean_tokens / 2 * model.kv_bytes_per_token(a.kv_bytes))
    cache += batch * model.state_bytes_per_sequence()
    step = (dense + touched + cache) / (tp * a.hbm_tbps * 1e12 * a.bandwidth_efficiency)
    return batch / step


class Workload(StrictModel):
    context_length: int = Field(131072, gt=0)
    mean_tokens: int = Field(32768, gt=0)
    """A trajectory's tokens in the end (prompt, tool output and sampled)."""
    p99_tokens: int = Field(110000, gt=0)
    sampled_share: float = Field(0.25, gt=0, le=1)
    """Of a trajectory's tokens, the share the engine samples (the rest it prefills: the
    prompt and tool outputs). Agentic tasks sample a quarter or less."""
    group_size: int = Field(8, gt=0)
    groups_per_step: int = Field(64, gt=0)
    max_staleness: int = Field(2, ge=0)
    tool_s_per_trajectory: float = Field(60.0, ge=0)
    """Time a trajectory spends waiting on tools and sandboxes (no engine work)."""


@dataclass(frozen=True)
class Split:
    engines: int
    engine_gpus: int
    trajectories_per_step: int
    trajectories_per_s_needed: float
    trajectories_per_s_per_engine: float
    in_flight: float
    """Little's law: arrival rate x time in system."""
    mean_latency_s: float
    p99_latency_s: float
    staleness_p99: int
    """Versions a p99-length trajectory spans (past `max_staleness` it is dropped or
    corrected, as the loop is configured)."""
    trainer_wait_share: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split(
    engine: EngineFit, trainer_step_s: float, work: Workload, target_wait: float = 0.05
) -> Split:
    """The engines that keep the trainer's wait for data at or under `target_wait` of its step.

    An engine runs `concurrency` trajectories at once; each takes its decode time at the
    per-sequence speed, its prefill and its tool time. Little's law then gives an engine's
    trajectories a second, and the trainer needs `group_size x groups_per_step` every step."""
    per_step = work.group_size * work.groups_per_step
    needed = per_step / trainer_step_s
    latency = _latency(engine, work.mean_tokens, work)
    p99 = _latency(engine, work.p99_tokens, work)
    per_engine = engine.concurrency / latency if latency > 0 else 0.0
    if per_engine <= 0:
        raise ValueError("the engine holds no sequence of the mean length: it cannot serve")
    engines = max(1, math.ceil(needed * (1 - target_wait) / per_engine))
    supplied = engines * per_engine
    wait = max(0.0, 1 - supplied / needed) if needed > supplied else 0.0
    return Split(
        engines=engines,
        engine_gpus=engines * engine.tp,
        trajectories_per_step=per_step,
        trajectories_per_s_needed=needed,
        trajectories_per_s_per_engine=per_engine,
        in_flight=needed * latency,
        mean_latency_s=latency,
        p99_latency_s=p99,
        staleness_p99=math.ceil(p99 / trainer_step_s),
        trainer_wait_share=wait,
    )


def _latency(engine: EngineFit, tokens: int, work: Workload) -> float:
    per_sequence = engine.decode_tokens_per_s / max(engine.concurrency, 1)
    sampled = tokens * work.sampled_share
    prefilled = tokens - sampled
    # Prefill is shared with the batch's other sequences as decode is.
    prefill = prefilled / (engine.prefill_tokens_per_s / max(engine.concurrency, 1))
    return sampled / per_sequence + prefill + work.tool_s_per_trajectory
