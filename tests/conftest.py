"""Fixtures shared across packages: a tiny random-weight Qwen3 model with the real vocabulary.

Built once per test process (about 10 s), in a temporary folder: tests never download weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# 2 layers, hidden 64: about 20M parameters, almost all of them the 151,936-row embeddings.
TINY_SHAPE = {"layers": 2, "hidden": 64, "heads": 2, "kv_heads": 1}


@pytest.fixture(scope="session")
def tokenizer_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tokenizer-cache")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, tokenizer_cache: Path) -> Path:
    """A local Hugging Face checkpoint folder (qwen3 vocabulary, untied embeddings, fp32)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bureau.models.checkpoint import init_checkpoint

    out = tmp_path_factory.mktemp("tiny-model") / "qwen3-tiny"
    return init_checkpoint(
        "qwen3", out=out, seed=0, tokenizer_cache_dir=tokenizer_cache, **TINY_SHAPE
    )
