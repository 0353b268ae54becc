"""A model's shape, as the planner needs it: parameters (total, active, per part), and what one
sequence costs an inference engine in KV cache and recurrent state.

Four architectures ship as files beside this module (`NAMED`: Qwen3-8B, Qwen3-30B-A3B,
Qwen3.6-35B-A3B, Qwen3.5-397B-A17B, each with the public source of its numbers); any local
Hugging Face `config.json` of the Qwen3, Qwen3-MoE, Qwen3-Next or Qwen3.5 families reads too
(`from_hf_config`).

Hybrid models alternate linear-attention layers (Gated DeltaNet) with full-attention layers:
only the full-attention layers keep a cache that grows with the sequence; a linear layer keeps
a fixed recurrent state (one matrix per value head) and a short convolution window per
sequence, whatever its length. Multi-token-prediction layers are counted as parameters the
trainer holds; inference without speculative decoding does not run them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from bureau.config import StrictModel

MODELS_DIR = Path(__file__).with_name("models")


class Attention(StrictModel):
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    gated: bool = False
    """An output gate computed by the query projection (Qwen3-Next/3.5): q_proj is twice as
    wide."""
    qk_norm: bool = True
    """RMSNorm on queries and keys (Qwen3 on); Qwen2.5 has none."""
    qkv_bias: bool = False
    """Biases on the q, k and v projections (Qwen2.5)."""


class LinearAttention(StrictModel):
    """Gated DeltaNet: its recurrent state is [value heads, key dim, value dim] per sequence."""

    num_key_heads: int = Field(gt=0)
    num_value_heads: int = Field(gt=0)
    key_head_dim: int = Field(gt=0)
    value_head_dim: int = Field(gt=0)
    conv_kernel: int = Field(4, gt=0)

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution over q, k and v."""
        return 2 * self.num_key_heads * self.key_head_dim + self.value_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim


class Mlp(StrictModel):
    intermediate_size: int = Field(gt=0)


class Moe(StrictModel):
    num_experts: int = Field(gt=0)
    experts_per_token: int = Field(gt=0)
    expert_intermediate_size: int = Field(gt=0)
    shared_expert_intermediate_size: int = Field(0, ge=0)
    """0: no shared expert."""


class ModelSpec(StrictModel):
    name: str
    source: str = ""
    """Where the numbers come from (a model card, a config file)."""
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_embeddings: bool = False
    attention: Attention
    full_attention_every: int = Field(1, gt=0)
    """Every n-th layer has full attention, the others linear attention (1: all full)."""
    linear_attention: LinearAttention | None = None
    mlp: Mlp | None = None
    moe: Moe | None = None
    mtp_layers: int = Field(0, ge=0)
    """Multi-token-prediction layers (a decoder layer each, plus a projection)."""
    published_total_b: float | None = None
    published_active_b: float | None = None
    """The parameter counts the source states (billions), to check the count against."""

    def model_post_init(self, context: Any, /) -> None:
        if (self.mlp is None) == (self.moe is None):
            raise ValueError(f"{self.name}: give exactly one of mlp and moe")
        if self.full_attention_every > 1 and self.linear_attention is None:
            raise ValueError(f"{self.name}: linear layers need linear_attention")

    # -- layers ---------------------------------------------------------------------------
    @property
    def full_layers(self) -> int:
        return sum(1 for i in range(self.num_layers) if self.is_full(i))

    @property
    def linear_layers(self) -> int:
        return self.num_layers - self.full_layers

    def is_full(self, layer: int) -> bool:
        """Layer `layer` (0-based) has full attention: the last of each group of n."""
        return (layer + 1) % self.full_attention_every == 0

    # -- parameters -----------------------------------------------------------------------
    def full_attention_params(self) -> int:
        a, h = self.attention, self.hidden_size
        q = h * a.num_heads * a.head_dim * (2 if a.gated else 1)
        kv = 2 * h * a.num_kv_heads * a.head_dim
        out = a.num_heads * a.head_dim * h
        norms = 2 * a.head_dim if a.qk_norm else 0
        bias = (a.num_heads + 2 * a.num_kv_heads) * a.head_dim if a.qkv_bias else 0
        return q + kv + out + norms + bias

    def linear_attention_params(self) -> int:
        la = self.linear_attention
        if la is None:
            return 0
        h = self.hidden_size
        qkvz = h * (2 * la.num_key_heads * la.key_head_dim + 2 * la.value_dim)
        ba = h * 2 * la.num_value_heads
        conv = la.conv_dim * la.conv_kernel
        out = la.value_dim * h
        return qkvz + ba + conv + out + 2 * la.num_value_heads + la.value_head_dim

    def mlp_params(self, *, active: bool = False) -> int:
        """One layer's MLP or MoE block: every expert, or (`active`) those a token uses."""
        h = self.hidden_size
        if self.mlp is not None:
            return 3 * h * self.mlp.intermediate_size
        assert self.moe is not None
        m = self.moe
        experts = m.experts_per_token if active else m.num_experts
        routed = experts * 3 * h * m.expert_intermediate_size
        shared = 3 * h * m.shared_expert_intermediate_size + (
            h if m.shared_expert_intermediate_size else 0
        )
        return routed + shared + h * m.num_experts  # the router

    def expert_params(self) -> int:
        """One layer's routed experts (what expert parallelism shards)."""
        if self.moe is None:
            return 0
        return self.moe.num_experts * 3 * self.hidden_size * self.moe.expert_intermediate_size

    def layer_params(self, layer: int, *, active: bool = False) -> int:
        attention = (
            self.full_attention_params() if self.is_full(layer) else self.linear_attention_params()
        )
        return attention + self.mlp_params(active=active) + 2 * self.hidden_size

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    def mtp_params(self, *, active: bool = False) -> int:
        """A full-attention decoder layer and a 2h -> h projection per MTP layer."""
        h = self.hidden_size
        one = self.full_attention_params() + self.mlp_params(active=active) + 2 * h
        return self.mtp_layers * (one + 2 * h * h + 3 * h)

    def total_params(self, *, mtp: bool = True) -> int:
        layers = sum(self.layer_params(i) for i in range(self.num_layers))
        return (
            layers + self.embedding_params() + self.hidden_size + (self.mtp_params() if mtp else 0)
        )

    def active_params(self) -> int:
        """Parameters one token uses in the main model (embeddings included, MTP not)."""
        layers = sum(self.layer_params(i, active=True) for i in range(self.num_layers))
        return layers + self.embedding_params() + self.hidden_size

    def dense_params(self, *, mtp: bool = True) -> int:
        """Everything but the routed experts (what tensor and pipeline parallelism shard)."""
        experts = self.expert_params() * (self.num_layers + (self.mtp_layers if mtp else 0))
        return self.total_params(mtp=mtp) - experts

    # -- inference memory per sequence ----------------------------------------------------
    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """The growing cache: K and V of every full-attention layer."""
        a = self.attention
        return self.full_layers * 2 * a.num_kv_heads * a.head_dim * dtype_bytes

    def state_bytes_per_sequence(self, state_bytes: int = 4, conv_bytes: int = 2) -> int:
        """The fixed per-sequence state of the linear layers: the recurrent matrix of each
        value head (kept in fp32 by default) and the convolution window."""
        la = self.linear_attention
        if la is None:
            return 0
        recurrent = la.num_value_heads * la.key_head_dim * la.value_head_dim * state_bytes
        conv = (la.conv_kernel - 1) * la.conv_dim * conv_bytes
        return self.linear_layers * (recurrent + conv)


@dataclass(frozen=True)
class ParamCheck:
    total_b: float
    active_b: float
    published_total_b: float | None
    published_active_b: float | None


NAMED = {path.stem: path for path in sorted(MODELS_DIR.glob("*.json"))}


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A named architecture (`NAMED`), a spec file of this format, or a Hugging Face
    config.json (or a checkpoint folder holding one)."""
    key = str(name_or_path).lower()
    if key in NAMED:
        return ModelSpec.model_validate(json.loads(NAMED[key].read_text()))
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        known = ", ".join(NAMED)
        raise ValueError(f"{name_or_path}: not a named model ({known}) nor a config.json file")
    data = json.loads(path.read_text())
    if "attention" in data and "hidden_size" in data:
        return ModelSpec.model_validate(data)
    return from_hf_config(data, name=path.parent.name or path.stem)


def from_hf_config(config: dict[str, Any], name: str) -> ModelSpec:
    """The spec of a Hugging Face config (Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5 families; a
    multimodal config's `text_config`)."""
    c = config.get("text_config", config)
    hidden = c["hidden_size"]
    heads = c["num_attention_heads"]
    head_dim = c.get("head_dim") or hidden // heads
    layer_types = c.get("layer_types")
    every = int(c.get("full_attention_interval", 1))
    if layer_types and "linear_attention" in layer_types:
        full = [i for i, t in enumerate(layer_types) if t == "full_attention"]
        every = full[0] + 1 if full else len(layer_types)
    linear = None
    if every > 1:
        linear = LinearAttention(
            num_key_heads=c["linear_num_key_heads"],
            num_value_heads=c["linear_num_value_heads"],
            key_head_dim=c["linear_key_head_dim"],
            value_head_dim=c["linear_value_head_dim"],
            conv_kernel=c.get("linear_conv_kernel_dim", 4),
        )
    experts = c.get("num_experts") or c.get("n_routed_experts")
    moe = mlp = None
    if experts:
        moe = Moe(
            num_experts=experts,
            experts_per_token=c["num_experts_per_tok"],
            expert_intermediate_size=c["moe_intermediate_size"],
            shared_expert_intermediate_size=c.get("shared_expert_intermediate_size") or 0,
        )
    else:
        mlp = Mlp(intermediate_size=c["intermediate_size"])
    model_type = str(c.get("model_type", ""))
    return ModelSpec(
        name=name,
        source="config.json",
        hidden_size=hidden,
        num_layers=c["num_hidden_layers"],
        vocab_size=c["vocab_size"],
        tie_embeddings=bool(config.get("tie_word_embeddings", c.get("tie_word_embeddings", False))),
        attention=Attention(
            num_heads=heads,
            num_kv_heads=c.get("num_key_value_heads", heads),
            head_dim=head_dim,
            gated=bool(c.get("attn_output_gate", every > 1 or "next" in model_type)),
        ),
        full_attention_every=every,
        linear_attention=linear,
        mlp=mlp,
        moe=moe,
        mtp_layers=int(c.get("mtp_num_hidden_layers", c.get("num_nextn_predict_layers", 0)) or 0),
    )
