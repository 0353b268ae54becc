"""Copy pretraining: the synthetic sequences, and a short run that learns to copy."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from bureau.bootstrap.config import PretrainConfig
from bureau.bootstrap.pretrain import CopyTask


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path):  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model), local_files_only=True)


def test_the_trained_tokens_are_a_span_written_earlier(tokenizer) -> None:  # type: ignore[no-untyped-def]
    task = CopyTask(tokenizer, max_words=40)
    rng = random.Random(0)
    for _ in range(80):
        ids, mask = task.sample(rng)
        start = mask.index(1)
        assert all(mask[start:]) and not any(mask[:start])
        copied = tokenizer.decode(ids[start:])
        assert copied[-1] in "'\"", copied  # the closing quote is trained too
        span = copied.strip("'\"\\")
        assert span and span in tokenizer.decode(ids[:start]), (copied, ids)


@pytest.mark.parametrize(
    ("kind", "shape"),
    [
        ("id", r"[A-Z]{1,2}-\d{2,4}"),
        ("name", r"[A-Z][a-z]+( [A-Z][a-z]+){0,2}"),
        ("slug", r"[a-z]+(-[a-z]+){0,2}"),
        ("path", r"[a-z]+(/[a-z]+)?/[a-z]+(-[a-z]+){0,2}(_[a-z]+){0,3}(_v\d)?\.[a-z]+"),
    ],
)
def test_each_kind_of_span_has_its_shape(tokenizer, kind: str, shape: str) -> None:  # type: ignore[no-untyped-def]
    import re

    task = CopyTask(tokenizer, max_words=10, kinds=(kind,))
    rng = random.Random(1)
    for _ in range(30):
        assert re.fullmatch(shape, task.span(rng, kind))
    with pytest.raises(ValueError, match="span kinds must be among"):
        CopyTask(tokenizer, max_words=10, kinds=("sentence",))


def test_the_curriculum_lengthens_the_text(tokenizer) -> None:  # type: ignore[no-untyped-def]
    task = CopyTask(tokenizer, max_words=80)
    take = task.batches(seed=3, steps=10, per_step=16)
    first, last = take(0), take(9)
    assert sum(len(ids) for ids, _ in first) < sum(len(ids) for ids, _ in last)
    assert take(4) == task.batches(seed=3, steps=10, per_step=16)(4)  # depends on step and seed
    assert take(4) != take(5)


def test_words_are_whole_spaced_words(tokenizer) -> None:  # type: ignore[no-untyped-def]
    words = CopyTask(tokenizer, max_words=10).words
    assert len(words) > 10_000
    sample = [tokenizer.decode([w]) for w in random.Random(0).sample(words, 200)]
    assert all(w.startswith(" ") and w[1:].isalpha() for w in sample)


def test_pretraining_lowers_the_loss_and_writes_a_checkpoint(
    tiny_model: Path, tmp_path: Path
) -> None:
    from bureau.bootstrap.pretrain import pretrain_copy

    config = PretrainConfig(
        model=tiny_model,
        out=tmp_path / "pre",
        steps=20,
        sequences_per_step=16,
        max_words=6,
        eval_every=10,
    )
    history = pretrain_copy(config)
    accuracy = [m["copy_accuracy"] for m in history if "copy_accuracy" in m]
    assert len(accuracy) == 2 and all(0.0 <= a <= 1.0 for a in accuracy)
    nll = [m["nll"] for m in history]
    assert sum(nll[-5:]) < sum(nll[:5])
    from bureau.models.checkpoint import load_checkpoint

    model, _ = load_checkpoint(tmp_path / "pre" / "weights")
    assert model.config.num_hidden_layers == 2


def test_sampled_softmax_is_the_softmax_over_the_candidates() -> None:

    from bureau.bootstrap.pretrain import sampled_softmax_nll

    weight = torch.tensor([[9.0, 9.0], [0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])  # 4 ids
    hidden = torch.tensor([[0.0, 0.0], [float(torch.log(torch.tensor(3.0))), 0.0]])
    candidates = torch.tensor([1, 2])  # ids 0 and 3 are left out
    # row 0: logits (0, 0) -> -log(1/2); row 1: logits (0, ln 3) -> -log(3/4)
    loss = sampled_softmax_nll(hidden, weight, torch.tensor([1, 2]), candidates)
    expected = (torch.log(torch.tensor(2.0)) + torch.log(torch.tensor(4 / 3))) / 2
    assert float(loss) == pytest.approx(float(expected), abs=1e-6)
    with pytest.raises(ValueError, match="among the candidates"):
        sampled_softmax_nll(hidden, weight, torch.tensor([1, 3]), candidates)


def test_batch_tensors_point_at_the_positions_that_predict_trained_tokens() -> None:
    from bureau.bootstrap.pretrain import batch_tensors

    ids, where, targets = batch_tensors([([5, 6, 7], [0, 0, 1]), ([8, 9], [0, 1])])
    assert ids.tolist() == [[5, 6, 7], [8, 9, 0]]
    assert where.tolist() == [[0, 1], [1, 0]]  # (row 0, column 1) predicts 7; (1, 0) predicts 9
    assert targets.tolist() == [7, 9]


def test_passes_by_length_give_the_step_one_pass_would(tiny_model: Path, tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Sorted by length and cut to a token budget, a step's gradient and nll are the ones of
    the whole step in one padded pass."""
    from bureau.bootstrap.pretrain import by_length, copy_backward
    from bureau.models.checkpoint import load_checkpoint

    demos = CopyTask(tokenizer, max_words=12).batches(seed=1, steps=2, per_step=6)(1)
    parts = by_length(demos, token_budget=40)
    lengths = [len(ids) for part in parts for ids, _ in part]
    assert lengths == sorted(lengths) and len(parts) > 1
    assert all(len(p) == 1 or len(p) * max(len(i) for i, _ in p) <= 40 for p in parts)
    model, _ = load_checkpoint(tiny_model, dtype=torch.float32)
    weight, body = model.get_output_embeddings().weight, model.get_decoder()
    candidates = torch.unique(torch.tensor([t for ids, _ in demos for t in ids] + [0, 1, 2]))
    found = []
    for budget in (10**6, 40):
        model.zero_grad(set_to_none=True)
        nll = copy_backward(body, weight, demos, candidates, budget)
        found.append((nll, [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (one, whole), (many, parted) = found
    assert many == pytest.approx(one, rel=1e-5)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(whole, parted, strict=True))
