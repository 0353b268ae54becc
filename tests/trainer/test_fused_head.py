"""The fused output layer against plain autograd, and the trainer's two paths against each other."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

import bureau.trainer.forward as forward
import bureau.trainer.head as head
from bureau.trainer import Trainer, TrainerConfig
from bureau.trainer.head import LinearLogprobs
from bureau.trainer.synthetic import reinforce_loss, synthetic_batch


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("block_bytes", [head.BLOCK_BYTES, 4096])
def test_logprobs_entropy_and_gradients_match_plain_autograd(
    temperature: float, block_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(head, "BLOCK_BYTES", block_bytes)  # 4096: blocks of 256 of 1000 tokens
    torch.manual_seed(0)
    h = torch.randn(37, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(1000, 16, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 1000, (37,))
    upstream = torch.randn(37, dtype=torch.float64)

    picked, entropy = LinearLogprobs.apply(h, w, targets, temperature, True)
    (picked * upstream).sum().backward()
    got = (picked.detach(), entropy, h.grad.clone(), w.grad.clone())  # type: ignore[union-attr]
    h.grad, w.grad = None, None

    logp = torch.log_softmax(h @ w.T / temperature, dim=-1)
    want_picked = logp.gather(-1, targets[:, None])[:, 0]
    want_entropy = -(logp.exp() * logp).sum(-1)
    (want_picked * upstream).sum().backward()
    for value, expected in zip(got, (want_picked, want_entropy, h.grad, w.grad), strict=True):
        torch.testing.assert_close(value, expected.detach(), rtol=1e-9, atol=1e-9)
    assert not entropy.requires_grad


def test_without_entropy_the_logprobs_are_the_same() -> None:
    torch.manual_seed(1)
    h, w = torch.randn(5, 8), torch.randn(300, 8)
    targets = torch.tensor([0, 299, 7, 7, 150])
    with_entropy, _ = LinearLogprobs.apply(h, w, targets, 1.0, True)
    plain, entropy = LinearLogprobs.apply(h, w, targets, 1.0, False)
    assert torch.equal(with_entropy, plain) and entropy.numel() == 0


@pytest.fixture(scope="module")
def model(tiny_model: Path) -> Any:
    from bureau.models.checkpoint import load_checkpoint

    loaded, _ = load_checkpoint(tiny_model, dtype=torch.float32)
    return loaded


@pytest.mark.parametrize("packing", ["budget", "fixed"])
def test_the_trainer_gets_the_same_logprobs_and_gradients_with_and_without_fusion(
    model: Any, packing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert head.can_fuse(model)
    batch = synthetic_batch([30, 5, 17, 60, 9], seed=2)
    config = TrainerConfig.model_validate(
        {"temperature": 0.7, "packing": {"mode": packing, "fixed_size": 2, "token_budget": 64}}
    )
    results = []
    for fuse in (True, False):
        monkeypatch.setattr(forward, "can_fuse", lambda _m, fuse=fuse: fuse)
        trainer = Trainer(copy.deepcopy(model), reinforce_loss, config)
        trainer.forward_backward(batch)
        grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters()}
        mb = trainer._micro_batches(batch)[0]
        with torch.no_grad():
            _, entropy = forward.micro_batch_logprobs(
                trainer.model, mb, mb.loss_mask > 0, with_entropy=True, temperature=0.7
            )
        results.append((trainer.compute_logprobs(batch), entropy, grads))
    (fused_lp, fused_entropy, fused_grads), (plain_lp, plain_entropy, plain_grads) = results
    for a, b in zip(fused_lp, plain_lp, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-5)
    assert fused_entropy is not None and plain_entropy is not None
    torch.testing.assert_close(fused_entropy, plain_entropy, rtol=1e-5, atol=1e-5)
    for name, grad in fused_grads.items():
        torch.testing.assert_close(grad, plain_grads[name], rtol=1e-4, atol=1e-6)


def test_under_autocast_the_matmuls_run_in_bfloat16_and_gradients_keep_their_dtype() -> None:
    torch.manual_seed(3)
    h = torch.randn(20, 32, requires_grad=True)
    w = (0.3 * torch.randn(500, 32)).requires_grad_()
    targets = torch.randint(0, 500, (20,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        picked, _ = LinearLogprobs.apply(h, w, targets, 1.0, False)
    picked.sum().backward()
    assert picked.dtype == torch.float32 and bool((picked <= 0).all())
    assert h.grad is not None and h.grad.dtype == torch.float32
    assert w.grad is not None and w.grad.dtype == torch.float32
    exact = torch.log_softmax(h @ w.T, -1).gather(-1, targets[:, None])[:, 0]
    torch.testing.assert_close(picked, exact, rtol=0, atol=0.1)  # bf16 logits: ~3 digits
    assert not torch.equal(picked, exact)
