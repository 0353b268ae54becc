"""The planner's model shapes: parameter counts against the published ones, and the per-token
and per-sequence inference memory against hand computation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bureau.planning.model import NAMED, load_model


@pytest.mark.parametrize("name", sorted(NAMED))
def test_parameter_counts_match_the_published_ones(name: str) -> None:
    model = load_model(name)
    assert model.published_total_b and model.published_active_b
    # Published totals leave out the multi-token-prediction layers.
    total = model.total_params(mtp=False) / 1e9
    active = model.active_params() / 1e9
    assert total == pytest.approx(model.published_total_b, rel=0.02), total
    assert active == pytest.approx(model.published_active_b, rel=0.16), active


def test_hybrid_layers_alternate_three_linear_then_one_full() -> None:
    model = load_model("qwen3.6-35b-a3b")
    kinds = ["full" if model.is_full(i) else "linear" for i in range(8)]
    assert kinds == ["linear", "linear", "linear", "full"] * 2
    assert (model.full_layers, model.linear_layers) == (10, 30)
    assert model.mtp_layers == 1 and model.total_params() > model.total_params(mtp=False)


def test_kv_cache_and_recurrent_state_by_hand() -> None:
    # Qwen3-8B: 36 full layers x K and V x 8 KV heads x 128 dims x 2 bytes.
    assert load_model("qwen3-8b").kv_bytes_per_token() == 36 * 2 * 8 * 128 * 2 == 147_456
    assert load_model("qwen3-8b").state_bytes_per_sequence() == 0
    # Qwen3.6-35B-A3B: only its 10 full layers grow (2 KV heads of 256 dims).
    hybrid = load_model("qwen3.6-35b-a3b")
    assert hybrid.kv_bytes_per_token() == 10 * 2 * 2 * 256 * 2 == 20_480
    # Each of the 30 linear layers: 32 value heads x 128 x 128 fp32 state, and a 3-step
    # window of the 2*16*128 + 32*128 = 8,192 convolution channels in bf16.
    per_layer = 32 * 128 * 128 * 4 + 3 * 8192 * 2
    assert hybrid.state_bytes_per_sequence() == 30 * per_layer


def test_a_hugging_face_config_reads_like_the_named_file(tmp_path: Path) -> None:
    config = {
        "model_type": "qwen3_next",
        "hidden_size": 2048,
        "num_hidden_layers": 40,
        "vocab_size": 248320,
        "tie_word_embeddings": False,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "mtp_num_hidden_layers": 1,
    }
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"text_config": config}))
    read, named = load_model(folder), load_model("qwen3.6-35b-a3b")
    assert read.total_params() == named.total_params()
    assert read.kv_bytes_per_token() == named.kv_bytes_per_token()
    assert read.state_bytes_per_sequence() == named.state_bytes_per_sequence()


def test_an_unknown_model_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nope: not a named model \(qwen2.5-32b, qwen3"):
        load_model("nope")
