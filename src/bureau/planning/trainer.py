"""Trainer memory per GPU and step time for a parallelism layout, and the ranked sweep.

The estimate follows how Megatron-style trainers shard state (FSDP2 is the case TP = PP = CP =
EP = 1 with every state sharded over DP):

- Weights in bf16, sharded: the dense part (attention, norms, embeddings, shared experts) over
  TP x PP, the routed experts over EP x ETP x PP.
- Gradients in fp32 (Megatron's main_grad; FSDP2's reduce-scattered gradients), the same
  sharding as the weights, and in addition spread over the data-parallel ranks where the
  gradient buffer is distributed (`grad_sharded`; ZeRO-2/FSDP).
- Optimizer: fp32 master weights and Adam's two moments (12 bytes a parameter) sharded over the
  data-parallel ranks of each part (the distributed optimizer); `offload` moves them to host
  memory.
- Activations for one micro-batch of `micro_tokens` tokens (per GPU, before CP splits the
  sequence): with full recompute, each layer's input (2 bytes x hidden) plus one layer's working
  set; without, every layer's working set (attention projections and the MLP's widest
  intermediate, flash attention so nothing quadratic). Sequence parallelism divides by TP.
  Under 1F1B pipelining the first stage holds as many micro-batches as stages, each over its
  own layers: the model's layers' worth in all.
- The logits buffer of the last stage: fp32 logits and their gradient over the vocabulary
  shard (`fused_logits` drops it for a chunked cross-entropy like bureau's fused head).

Step time is the model's 6 x active-parameter FLOPs per token (8 with full recompute) over the
GPUs' sustained throughput (`peak_tflops` x `mfu`), with the pipeline bubble. Both rates are
assumptions unless the user measured them; the plan prints where each came from.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import Field

from bureau.config import StrictModel
from bureau.planning.model import ModelSpec

GIB = 2**30


class Layout(StrictModel):
    """One parallelism layout of the trainer."""

    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    cp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    etp: int = Field(1, ge=1)
    """Tensor parallelism inside each expert (Megatron's expert_tensor_parallel_size)."""
    recompute: bool = True
    """Full activation recompute (every layer's input kept, the rest recomputed)."""
    offload_optimizer: bool = False
    """Master weights and Adam moments in host memory."""
    fsdp: bool = False
    """FSDP (ZeRO-3): the weights too are sharded over data parallelism, two layers gathered
    at a time (the one computing and the one prefetched)."""

    def label(self) -> str:
        if self.fsdp:
            return (
                "FSDP2"
                + (" recompute" if self.recompute else "")
                + (" optimizer offload" if self.offload_optimizer else "")
            )
        parts = [f"TP{self.tp}", f"PP{self.pp}", f"CP{self.cp}", f"EP{self.ep}"]
        if self.etp > 1:
            parts.append(f"ETP{self.etp}")
        parts.append("recompute" if self.recompute else "no-recompute")
        if self.offload_optimizer:
            parts.append("optimizer offload")
        return " ".join(parts)


class TrainerAssumptions(StrictModel):
    gpu_memory_gib: float = Field(80.0, gt=0)
    """Per GPU (H100 80 GB by default)."""
    usable_fraction: float = Field(0.92, gt=0, le=1)
    """What the allocator can hand out (CUDA context, NCCL buffers, fragmentation take the
    rest)."""
    peak_tflops: float = Field(989.0, gt=0)
    """Dense bf16 peak per GPU (H100 SXM: 989)."""
    mfu: float = Field(0.3, gt=0, le=1)
    """Sustained share of the peak (dense models reach 0.35-0.5, MoE 0.15-0.3; an assumption
    until measured)."""
    grad_sharded: bool = True
    """Gradients reduce-scattered over data parallelism (Megatron's distributed optimizer with
    overlapped grad reduce, FSDP); False keeps a full fp32 gradient per rank."""
    fused_logits: bool = False
    """The loss never holds [tokens, vocabulary] logits (bureau's fused output layer)."""
    micro_batches: int = Field(8, ge=1)
    """Micro-batches per step, for the pipeline bubble."""
    host_gbps: float = Field(25.0, gt=0)
    """Host-device bandwidth per GPU (PCIe 5 x16 sustains about 25 GB/s each way): an
    offloaded optimizer moves its gradients out and its weights back every step."""
    cross_node_penalty: float = Field(0.25, ge=0)
    """Step time added when expert all-to-all or context-parallel exchanges leave the node
    (a share of the compute time; an assumption)."""


@dataclass(frozen=True)
class TrainerFit:
    layout: Layout
    gpus: int
    dp: int
    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float
    logits_gib: float
    total_gib: float
    capacity_gib: float
    host_optimizer_gib: float
    step_s: float
    """For `tokens_per_step` tokens."""

    @property
    def fits(self) -> bool:
        return self.total_gib <= self.capacity_gib

    @property
    def has_headroom(self) -> bool:
        """A tenth of the capacity left: a run whose longest packed micro-batch or a
        fragmented allocator needs more does not stop hours in."""
        return self.total_gib <= 0.9 * self.capacity_gib

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["layout"] = self.layout.label()
        out["fits"] = self.fits
        return out


def valid(model: ModelSpec, layout: Layout, gpus: int) -> str | None:
    """Why `layout` cannot run `model` on `gpus` GPUs, or None."""
    if layout.fsdp and (layout.tp, layout.pp, layout.cp, layout.ep, layout.etp) != (1,) * 5:
        return "FSDP here shards over data parallelism alone (TP = PP = CP = EP = 1)"
    grid = layout.tp * layout.pp * layout.cp
    if gpus % grid:
        return f"{gpus} GPUs are not a multiple of TP x PP x CP = {grid}"
    if model.num_layers % layout.pp:
        return f"{model.num_layers} layers do not split into {layout.pp} stages"
    if model.attention.num_kv_heads % layout.tp and layout.tp % model.attention.num_kv_heads:
        return f"{model.attention.num_kv_heads} KV heads do not split over TP{layout.tp}"
    expert_grid = layout.ep * layout.etp * layout.pp
    if model.moe is None:
        if layout.ep > 1 or layout.etp > 1:
            return "expert parallelism needs a MoE model"
    else:
        if model.moe.num_experts % layout.ep:
            return f"{model.moe.num_experts} experts do not split over EP{layout.ep}"
        if gpus % expert_grid:
            return f"{gpus} GPUs are not a multiple of EP x ETP x PP = {expert_grid}"
    return None


def estimate(
    model: ModelSpec,
    layout: Layout,
    gpus: int,
    micro_tokens: int,
    tokens_per_step: int,
    assume: TrainerAssumptions | None = None,
    gpus_per_node: int = 8,
) -> TrainerFit:
    """Memory of the most loaded GPU (a first pipeline stage that also holds the output layer
    when PP = 1, else the last stage's logits are counted with the first stage's activations,
    which over-counts slightly) and the step time."""
    a = assume or TrainerAssumptions()
    dp = gpus // (layout.tp * layout.pp * layout.cp)
    expert_dp = gpus // (layout.ep * layout.etp * layout.pp) if model.moe else dp
    experts = model.expert_params() * (model.num_layers + model.mtp_layers)
    dense = model.total_params() - experts
    dense_per_gpu = dense / (layout.tp * layout.pp)
    experts_per_gpu = experts / (layout.ep * layout.etp * layout.pp)
    params_per_gpu = dense_per_gpu + experts_per_gpu

    weights = 2 * params_per_gpu
    if layout.fsdp:
        largest = max(model.layer_params(i) for i in range(model.num_layers))
        weights = 2 * params_per_gpu / dp + 2 * 2 * largest
    if a.grad_sharded:
        grads = 4 * (dense_per_gpu / dp + experts_per_gpu / expert_dp)
    else:
        grads = 4 * params_per_gpu
    optimizer = 12 * (dense_per_gpu / dp + experts_per_gpu / expert_dp)
    host_optimizer = optimizer if layout.offload_optimizer else 0.0
    if layout.offload_optimizer:
        optimizer = 0.0

    tokens = micro_tokens / layout.cp
    h = model.hidden_size
    layer_set = _layer_activation_bytes(model) * tokens / layout.tp
    if layout.recompute:
        activations = model.num_layers * 2 * h * tokens / layout.tp + layer_set
    else:
        activations = model.num_layers * layer_set
    vocab_shard = model.vocab_size / layout.tp
    logits = 0.0 if a.fused_logits else 2 * 4 * tokens * vocab_shard

    total = weights + grads + optimizer + activations + logits
    flops_per_token = (8 if layout.recompute else 6) * model.active_params()
    sustained = gpus * a.peak_tflops * 1e12 * a.mfu
    bubble = 1 + (layout.pp - 1) / a.micro_batches
    compute = tokens_per_step * flops_per_token / sustained * bubble
    spans = layout.ep * layout.etp > gpus_per_node or layout.tp * layout.cp > gpus_per_node
    step = compute * (1 + (a.cross_node_penalty if spans else 0.0))
    if layout.offload_optimizer:
        step += (host_optimizer / 12) * (4 + 2) / (a.host_gbps * 1e9)  # grads out, weights in
    return TrainerFit(
        layout=layout,
        gpus=gpus,
        dp=dp,
        weights_gib=weights / GIB,
        grads_gib=grads / GIB,
        optimizer_gib=optimizer / GIB,
        activations_gib=activations / GIB,
        logits_gib=logits / GIB,
        total_gib=total / GIB,
        capacity_gib=a.gpu_memory_gib * a.usable_fraction,
        host_optimizer_gib=host_optimizer / GIB,
        step_s=step,
    )


def _layer_activation_bytes(model: ModelSpec) -> float:
    """bf16 bytes a token keeps for one layer's backward without recompute: the attention's
    inputs and outputs (about 10 hidden-widths with q, k, v, the output and the norms) and the
    MLP's gate, up and product at the width a token uses."""
    h = model.hidden_size
    if model.moe is not None:
        m = model.moe
        width = m.experts_per_token * m.expert_intermediate_size + m.shared_expert_intermediate_size
        mlp = 3 * width + m.experts_per_token * h  # expert outputs before the weighted sum
    else:
        assert model.mlp is not None
        mlp = 3 * model.mlp.intermediate_size
    return 2 * (10 * h + mlp)


def sweep(
    model: ModelSpec,
    gpus: int,
    micro_tokens: int,
    tokens_per_step: int,
    assume: TrainerAssumptions | None = None,
    gpus_per_node: int = 8,
) -> list[TrainerFit]:
    """Every layout that fits, those with a tenth of the memory to spare first, fastest first
    within each (then least memory). TP stays within a node."""
    fits = [
        fit
        for layout in layouts(model, gpus, gpus_per_node)
        if (
            fit := estimate(
                model, layout, gpus, micro_tokens, tokens_per_step, assume, gpus_per_node
            )
        ).fits
    ]
    return sorted(fits, key=lambda f: (not f.has_headroom, round(f.step_s, 6), f.total_gib))


def layouts(model: ModelSpec, gpus: int, gpus_per_node: int = 8) -> Iterator[Layout]:
    powers = [2**k for k in range(int(math.log2(max(gpus, 1))) + 1)]
    eps = [p for p in powers if model.moe is not None and model.moe.num_experts % p == 0] or [1]
    for recompute, offload in itertools.product((True, False), (False, True)):
        yield Layout(fsdp=True, recompute=recompute, offload_optimizer=offload)
    for tp, pp, cp, ep in itertools.product(powers, powers, powers, eps):
        if tp > gpus_per_node:
            continue
        for recompute, offload in itertools.product((True, False), (False, True)):
            layout = Layout(
                tp=tp, pp=pp, cp=cp, ep=ep, recompute=recompute, offload_optimizer=offload
            )
            if valid(model, layout, gpus) is None:
                yield layout
