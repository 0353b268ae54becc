"""The SFT loss on literal tensors, values computed by hand in comments."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import TypeAdapter
from torch.testing import assert_close

from bureau.algo.inputs import PolicyLossInputs
from bureau.algo.losses import PolicyLossConfig, SFTLossConfig, make_loss_fn, sft_loss
from bureau.algo.metrics import reduce_metrics


def _inputs(logprobs: list[float], mask: list[float], weights: list[float]) -> PolicyLossInputs:
    n = len(logprobs)
    return PolicyLossInputs(
        logprobs=torch.tensor(logprobs, requires_grad=True),
        # Sampler logprobs and advantages are ignored by the SFT loss: absurd values here.
        sampler_logprobs=torch.full((n,), -50.0),
        advantages=torch.full((n,), -7.0),
        loss_mask=torch.tensor(mask),
        loss_weights=torch.tensor(weights),
        seq_ids=torch.zeros(n, dtype=torch.int64),
        entropy=torch.tensor([9.0, 1.0, 2.0, 3.0]),
    )


def test_sft_loss_is_the_weighted_masked_nll() -> None:
    # Token 0 is a prompt token (mask 0) with a logprob that must not count.
    # Token mean over the 3 trained tokens: w = 1/3 each.
    inputs = _inputs(
        [-9.0, -math.log(2), -math.log(4), 0.0], [0, 1, 1, 1], [0, 1 / 3, 1 / 3, 1 / 3]
    )
    loss, metrics = sft_loss(inputs, SFTLossConfig())
    # -(1/3)(-ln 2 - ln 4 + 0) = ln 8 / 3 = ln 2
    assert_close(loss, torch.tensor(math.log(2)))
    # d loss / d logprob_t = -w_t
    (grad,) = torch.autograd.grad(loss, inputs.logprobs)
    assert_close(grad, torch.tensor([0.0, -1 / 3, -1 / 3, -1 / 3]))
    reduced = reduce_metrics([metrics])
    assert reduced["nll"] == pytest.approx(math.log(2))  # (ln 2 + ln 4 + 0) / 3
    assert reduced["entropy"] == pytest.approx(2.0)  # (1 + 2 + 3) / 3, the prompt token left out


def test_sft_loss_uses_the_batch_wide_weights() -> None:
    # A micro-batch holding 2 of the batch's 4 trained tokens: w = 1/4, not renormalised.
    inputs = _inputs([0.0, -1.0, -3.0, 0.0], [0, 1, 1, 0], [0, 0.25, 0.25, 0])
    loss, _ = sft_loss(inputs, SFTLossConfig())
    assert_close(loss, torch.tensor(1.0))  # -(0.25 * -1 + 0.25 * -3)


def test_make_loss_fn_selects_sft_from_config() -> None:
    adapter: TypeAdapter[PolicyLossConfig] = TypeAdapter(PolicyLossConfig)
    config = adapter.validate_python({"kind": "sft"})
    assert isinstance(config, SFTLossConfig)
    inputs = _inputs([0.0, -2.0, -4.0, 0.0], [0, 1, 1, 0], [0, 0.5, 0.5, 0])
    loss, _ = make_loss_fn(config)(inputs)
    assert_close(loss, torch.tensor(3.0))  # -(0.5 * -2 + 0.5 * -4)
