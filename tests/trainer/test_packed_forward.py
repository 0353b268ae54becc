"""Packed forward passes on the tiny Qwen3: the same logprobs as each sequence alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers  # noqa: F401

from bureau.models.logprobs import token_logprobs
from bureau.records import TrainBatch
from bureau.trainer.forward import build_micro_batch, micro_batch_logprobs
from bureau.trainer.packing import MicroBatchPlan

SEQS = [
    [151644, 872, 198, 14990, 151645, 198, 1000, 2000, 3000],
    [77091, 198, 500, 600],
    [11, 12, 13, 14, 15, 16, 17],
]
PAD = 151643


@pytest.fixture(scope="module")
def model(tiny_model: Path) -> Any:
    from bureau.models.checkpoint import load_checkpoint

    loaded, _ = load_checkpoint(tiny_model, dtype=torch.float32)
    return loaded


def _batch(seqs: list[list[int]]) -> TrainBatch:
    return TrainBatch.for_scoring(seqs)


def _plan(n: int) -> MicroBatchPlan:
    return MicroBatchPlan(tuple(range(n)), 0, 0.0)


def _alone(model: Any, seqs: list[list[int]]) -> list[Any]:
    return [token_logprobs(model, s, list(range(1, len(s)))) for s in seqs]


def _split(values: Any, seqs: list[list[int]]) -> list[Any]:
    out, start = [], 0
    for s in seqs:
        out.append(values[start + 1 : start + len(s)])  # position 0 is not scored
        start += len(s)
    return out


@pytest.mark.parametrize(
    ("attention", "padded_rows", "pad_multiple"),
    [("auto", False, 1), ("mask", False, 1), ("auto", False, 8), ("auto", True, 1)],
    ids=["position-ids", "explicit-mask", "padded-to-8", "padded-rows"],
)
def test_packed_logprobs_equal_each_sequence_alone(
    model: Any, attention: str, padded_rows: bool, pad_multiple: int
) -> None:
    batch = _batch(SEQS)
    mb = build_micro_batch(
        batch, _plan(3), pad_id=PAD, padded_rows=padded_rows, pad_multiple=pad_multiple
    )
    with torch.no_grad():
        packed, entropy = micro_batch_logprobs(
            model, mb, mb.loss_mask > 0, with_entropy=True, attention=attention
        )
    assert packed.shape == (sum(map(len, SEQS)),)
    for got, want in zip(_split(packed, SEQS), _alone(model, SEQS), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert entropy is not None
    assert bool((entropy[mb.loss_mask > 0] > 0).all())
    assert float(entropy[0]) == 0.0  # first token: not scored


def test_no_attention_crosses_a_sequence_boundary(model: Any) -> None:
    changed = [[7, 8, 9, 10, 11, 12, 13, 14, 15], *SEQS[1:]]
    results = []
    for seqs in (SEQS, changed):
        mb = build_micro_batch(_batch(seqs), _plan(3), pad_id=PAD)
        with torch.no_grad():
            results.append(_split(micro_batch_logprobs(model, mb, mb.loss_mask > 0)[0], seqs))
    assert not torch.allclose(results[0][0], results[1][0])  # sequence A did change
    for b in (1, 2):  # the sequences packed after it did not, not even in the last bit
        assert torch.equal(results[0][b], results[1][b])


def test_gradient_does_not_cross_a_sequence_boundary(model: Any) -> None:
    """The loss of sequence B has no gradient through the tokens of sequence A."""
    mb = build_micro_batch(_batch(SEQS), _plan(3), pad_id=PAD)
    embeddings = model.get_input_embeddings()
    captured: dict[str, Any] = {}

    def keep(_module: Any, _inputs: Any, output: Any) -> None:
        output.retain_grad()
        captured["embeds"] = output

    handle = embeddings.register_forward_hook(keep)
    try:
        logprobs, _ = micro_batch_logprobs(model, mb, (mb.seq_ids == 1) & (mb.loss_mask > 0))
        logprobs.sum().backward()
    finally:
        handle.remove()
        model.zero_grad(set_to_none=True)
    grad = captured["embeds"].grad[0]  # [W, hidden]
    a, b = len(SEQS[0]), len(SEQS[1])
    assert float(grad[:a].abs().max()) == 0.0
    assert float(grad[a : a + b].abs().max()) > 0.0
    assert float(grad[a + b :].abs().max()) == 0.0


def test_scoring_a_first_token_is_refused(model: Any) -> None:
    mb = build_micro_batch(_batch(SEQS), _plan(3), pad_id=PAD)
    score = torch.zeros(mb.token_index.numel(), dtype=torch.bool)
    score[len(SEQS[0])] = True  # the first token of sequence B
    with pytest.raises(ValueError, match="first token"):
        micro_batch_logprobs(model, mb, score)


def test_selected_logprobs_match_autograd_in_value_and_gradient() -> None:
    from bureau.trainer.forward import SelectedLogprobs

    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(7, 300, generator=generator) * 3).requires_grad_()
    targets = torch.tensor([0, 5, 299, 17, 17, 100, 42])
    weights = torch.randn(7, generator=generator)
    picked, entropy = SelectedLogprobs.apply(logits, targets, True)
    (picked * weights).sum().backward()
    reference = logits.detach().clone().requires_grad_()
    logp = torch.log_softmax(reference, dim=-1)
    want = logp.gather(-1, targets[:, None])[:, 0]
    (want * weights).sum().backward()
    torch.testing.assert_close(picked, want.detach(), rtol=0, atol=1e-5)
    torch.testing.assert_close(entropy, -(logp.exp() * logp).sum(-1).detach(), rtol=0, atol=1e-5)
    torch.testing.assert_close(logits.grad, reference.grad, rtol=0, atol=1e-6)
    assert not entropy.requires_grad


def test_a_micro_batch_with_nothing_to_score_still_runs_backward(model: Any) -> None:
    """A rank's filler (or a prompt-only sequence): zero logprobs, a graph to run backward on."""
    mb = build_micro_batch(_batch(SEQS), _plan(3), pad_id=PAD)
    nothing = torch.zeros(mb.token_index.numel(), dtype=torch.bool)
    logprobs, entropy = micro_batch_logprobs(model, mb, nothing, with_entropy=True)
    assert float(logprobs.detach().abs().sum()) == 0.0 and entropy is not None
    (logprobs.sum() * 0.0).backward()
    assert model.lm_head.weight.grad is not None
    model.zero_grad(set_to_none=True)


def test_temperature_scores_the_tempered_distribution(model: Any) -> None:
    """At temperature T the logprobs are log_softmax(logits / T) of each sequence alone."""
    mb = build_micro_batch(_batch(SEQS), _plan(3), pad_id=PAD)
    with torch.no_grad():
        tempered, _ = micro_batch_logprobs(model, mb, mb.loss_mask > 0, temperature=0.5)
        raw, _ = micro_batch_logprobs(model, mb, mb.loss_mask > 0)
    for seq, got in zip(SEQS, _split(tempered, SEQS), strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([seq])).logits.float()[0, :-1] / 0.5
        want = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(seq[1:])[:, None])[:, 0]
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert float((tempered - raw).abs().max()) > 1e-2


def test_teacher_forced_logprobs_are_of_the_tempered_distribution(model: Any) -> None:
    """What a sampler at temperature T reports (`inference.sampling`): log softmax(logits / T).
    The audit compares against these, so a run sampled at 0.7 is checked at 0.7."""
    seq = SEQS[0]
    positions = list(range(1, len(seq)))
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, :-1].float()
    targets = torch.tensor(seq[1:])[:, None]
    for temperature in (1.0, 0.7):
        want = torch.log_softmax(logits / temperature, dim=-1).gather(-1, targets)[:, 0]
        got = token_logprobs(model, seq, positions, temperature)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, _alone(model, [seq])[0])  # 0.7 is not 1.0
