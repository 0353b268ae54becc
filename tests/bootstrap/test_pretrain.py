"""Copy pretraining: the synthetic sequences, and a short run that learns to copy."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bureau.bootstrap.config import PretrainConfig
from bureau.bootstrap.pretrain import CopyTask

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path):  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model), local_files_only=True)


def test_the_trained_tokens_are_the_id_written_earlier(tokenizer) -> None:  # type: ignore[no-untyped-def]
    task = CopyTask(tokenizer, max_words=40)
    rng = random.Random(0)
    for _ in range(50):
        ids, mask = task.sample(rng)
        start = mask.index(1)
        assert all(mask[start:]) and not any(mask[:start])
        copied = tokenizer.decode(ids[start:])
        ident, quote = copied[:-1].removesuffix("\\"), copied[-1]
        assert quote == '"' and ident[0].isupper() and ident[1] == "-" and ident[2:].isdigit()
        # written earlier with a spaced letter, as in "contract C-103"
        assert f" {ident}" in tokenizer.decode(ids[:start])


def test_the_curriculum_lengthens_the_text(tokenizer) -> None:  # type: ignore[no-untyped-def]
    task = CopyTask(tokenizer, max_words=80)
    take = task.batches(seed=3, steps=10, per_step=16)
    first, last = take(0), take(9)
    assert max(len(ids) for ids, _ in first) < min(80, max(len(ids) for ids, _ in last))
    assert take(4) == task.batches(seed=3, steps=10, per_step=16)(4)  # depends on step and seed
    assert take(4) != take(5)


def test_words_are_whole_spaced_words(tokenizer) -> None:  # type: ignore[no-untyped-def]
    words = CopyTask(tokenizer, max_words=10).words
    assert len(words) > 10_000
    sample = [tokenizer.decode([w]) for w in random.Random(0).sample(words, 200)]
    assert all(w.startswith(" ") and w[1:].isalpha() for w in sample)


def test_pretraining_raises_copy_accuracy(tiny_model: Path, tmp_path: Path) -> None:
    from bureau.bootstrap.pretrain import pretrain_copy

    config = PretrainConfig(
        model=tiny_model,
        out=tmp_path / "pre",
        steps=30,
        sequences_per_step=8,
        max_words=6,
        eval_every=15,
    )
    history = pretrain_copy(config)
    accuracy = [m["copy_accuracy"] for m in history if "copy_accuracy" in m]
    assert len(accuracy) == 2
    assert (tmp_path / "pre" / "weights" / "config.json").is_file()
    assert history[-1]["nll"] < history[0]["nll"]
    assert accuracy[-1] > accuracy[0]
