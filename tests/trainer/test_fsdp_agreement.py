"""FSDP2 on two CPU ranks (gloo, launched with torchrun) agrees with one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers  # noqa: F401

from bureau.trainer import OptimizerConfig, PackingConfig, Trainer, TrainerConfig
from bureau.trainer.synthetic import reinforce_loss, synthetic_batch

WORKER = Path(__file__).with_name("fsdp_worker.py")
LENGTHS = [30, 5, 17, 60, 9, 40, 3, 22]
CONFIG = TrainerConfig(optimizer=OptimizerConfig(lr=1e-3), packing=PackingConfig(token_budget=64))


@pytest.fixture(scope="module")
def fsdp_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fsdp")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(WORKER),
        str(tiny_model),
        str(out),
        CONFIG.model_dump_json(),
        json.dumps(LENGTHS),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_two_gloo_ranks_match_one_process(fsdp_run: Path, tiny_model: Path) -> None:
    report = json.loads((fsdp_run / "metrics.json").read_text())
    sharded = torch.load(fsdp_run / "fsdp.pt")
    single = Trainer.from_pretrained(tiny_model, reinforce_loss, CONFIG)
    metrics = single.forward_backward(synthetic_batch(LENGTHS, seed=1))
    grads = {n: p.grad.clone() for n, p in single.model.named_parameters()}
    metrics |= single.optim_step()

    fsdp = report["metrics"]
    assert fsdp["train/loss"] == pytest.approx(metrics["train/loss"], rel=1e-6)
    assert fsdp["logprob"] == pytest.approx(metrics["logprob"], rel=1e-6)
    assert fsdp["train/grad_norm"] == pytest.approx(metrics["train/grad_norm"], rel=1e-5)
    assert fsdp["train/num_tokens"] == metrics["train/num_tokens"] == sum(LENGTHS)
    # 186 tokens need 3 micro-batches of 64; two ranks get 2 each
    assert (fsdp["train/num_micro_batches"], metrics["train/num_micro_batches"]) == (4, 3)
    for name, grad in grads.items():
        torch.testing.assert_close(sharded["grads"][name], grad, rtol=1e-5, atol=1e-7)
    # AdamW's first step is about lr * sign(grad): tiny gradient differences move it a little.
    for name, param in single.model.named_parameters():
        torch.testing.assert_close(sharded["params"][name], param.detach(), rtol=0, atol=1e-4)
    scored = single.compute_logprobs(synthetic_batch(LENGTHS, seed=3))
    for got, want in zip(sharded["scored"], scored, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


def test_sharded_resume_export_and_an_idle_rank(fsdp_run: Path) -> None:
    report = json.loads((fsdp_run / "metrics.json").read_text())
    assert report["resume_identical"] is True
    assert sorted(p.name for p in (fsdp_run / "export").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]
    assert sorted(p.name for p in (fsdp_run / "checkpoint").iterdir()) == [
        "model-and-optimizer",
        "rng-rank0.pt",
        "rng-rank1.pt",
        "scheduler.pt",
        "trainer_state.json",
    ]
    filler = report["filler"]
    assert filler["train/num_sequences"] == 1
    assert filler["train/num_micro_batches"] == 1
    assert filler["train/skipped_step"] == 0.0
