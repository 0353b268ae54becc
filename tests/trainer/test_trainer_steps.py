"""The single-process trainer on the tiny Qwen3: accumulation, schedule, resume, exports."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers  # noqa: F401

from bureau.algo.inputs import PolicyLossInputs
from bureau.models.logprobs import token_logprobs
from bureau.records import TrainBatch
from bureau.trainer import OptimizerConfig, PackingConfig, Trainer, TrainerConfig
from bureau.trainer.synthetic import reinforce_loss, synthetic_batch

LENGTHS = [30, 5, 17, 60, 9, 40, 3, 22]


@pytest.fixture(scope="module")
def model(tiny_model: Path) -> Any:
    from bureau.models.checkpoint import load_checkpoint

    loaded, _ = load_checkpoint(tiny_model, dtype=torch.float32)
    return loaded


def _trainer(model: Any, **config: Any) -> Trainer:
    config.setdefault("optimizer", OptimizerConfig(lr=1e-3))
    return Trainer(copy.deepcopy(model), reinforce_loss, TrainerConfig(**config))


def _grads(trainer: Trainer) -> dict[str, Any]:
    return {n: p.grad.clone() for n, p in trainer.model.named_parameters()}


def test_the_gradient_does_not_depend_on_how_the_batch_is_packed(model: Any) -> None:
    batch = synthetic_batch(LENGTHS, seed=3)
    packings = {
        "one": PackingConfig(token_budget=4096),
        "budget-64": PackingConfig(token_budget=64),
        "fixed-3": PackingConfig(mode="fixed", fixed_size=3),
    }
    grads, metrics = {}, {}
    for name, packing in packings.items():
        trainer = _trainer(model, packing=packing)
        metrics[name] = trainer.forward_backward(batch)
        grads[name] = _grads(trainer)
    assert metrics["one"]["train/num_micro_batches"] == 1
    assert metrics["budget-64"]["train/num_micro_batches"] == 3  # 186 tokens
    assert metrics["fixed-3"]["train/num_micro_batches"] == 3
    assert metrics["budget-64"]["train/padding_waste"] == 0.0
    assert metrics["fixed-3"]["train/padding_waste"] > 0.3
    for name in ("budget-64", "fixed-3"):
        assert metrics[name]["train/loss"] == pytest.approx(metrics["one"]["train/loss"], rel=1e-5)
        # the loss function's metrics cover the whole batch, whatever the packing
        assert metrics[name]["logprob"] == pytest.approx(metrics["one"]["logprob"], rel=1e-5)
        for param, grad in grads[name].items():
            torch.testing.assert_close(grad, grads["one"][param], rtol=1e-4, atol=1e-7)
    assert metrics["one"]["train/num_loss_tokens"] == sum(map(sum, batch.loss_mask))


def test_two_forward_backwards_accumulate_into_one_step(model: Any) -> None:
    batch = synthetic_batch(LENGTHS, seed=3)
    whole = _trainer(model)
    whole.forward_backward(batch)
    halves = _trainer(model)
    halves.forward_backward(batch.select([0, 1, 2, 3]))
    halves.forward_backward(batch.select([4, 5, 6, 7]))
    for name, grad in _grads(halves).items():
        torch.testing.assert_close(grad, whole.model.get_parameter(name).grad, atol=1e-7, rtol=1e-4)
    assert halves.consumed_sequences == whole.consumed_sequences == 8


def test_resume_gives_a_bit_identical_next_step(model: Any, tmp_path: Path) -> None:
    optimizer = OptimizerConfig(lr=1e-3, warmup_steps=2, schedule="cosine", total_steps=10)
    first = _trainer(model, optimizer=optimizer, packing=PackingConfig(token_budget=64))
    for step in range(2):
        first.forward_backward(synthetic_batch(LENGTHS, seed=step))
        first.optim_step()
    saved_rng = torch.get_rng_state()
    first.save(tmp_path / "ckpt")
    torch.rand(3)  # the random state moves on; the checkpoint holds it as it was
    first.forward_backward(synthetic_batch(LENGTHS, seed=2))
    expected_metrics = first.optim_step()
    expected = {n: p.detach().clone() for n, p in first.model.named_parameters()}

    second = _trainer(model, optimizer=optimizer, packing=PackingConfig(token_budget=64))
    second.load(tmp_path / "ckpt")
    assert (second.step, second.consumed_sequences) == (2, 16)
    assert torch.equal(torch.get_rng_state(), saved_rng)
    second.forward_backward(synthetic_batch(LENGTHS, seed=2))
    metrics = second.optim_step()
    assert metrics["train/lr"] == expected_metrics["train/lr"]
    assert metrics["train/grad_norm"] == expected_metrics["train/grad_norm"]
    for name, param in second.model.named_parameters():
        assert torch.equal(param.detach(), expected[name]), name


def test_the_learning_rate_schedule_by_hand() -> None:
    warm = OptimizerConfig(lr=1.0, warmup_steps=3, schedule="cosine", total_steps=7)
    factors = [warm.lr_factor(s) for s in range(9)]
    cosine = [0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(5)]
    assert factors == pytest.approx([0.25, 0.5, 0.75, *cosine, 0.0])
    floor = OptimizerConfig(schedule="cosine", total_steps=4, min_lr_ratio=0.1)
    assert floor.lr_factor(4) == pytest.approx(0.1)
    assert OptimizerConfig(warmup_steps=1).lr_factor(5) == 1.0
    with pytest.raises(ValueError, match="total_steps"):
        OptimizerConfig(schedule="cosine").lr_factor(0)


def test_adamw_takes_the_fused_kernel_and_its_step_is_adams_by_hand() -> None:
    """One AdamW step from zero moments moves each weight by lr * g / (|g| + eps), less the
    decoupled decay lr * wd * w: with lr 0.1, wd 0.5, w = [1, -2], g = [3, -0.5] (eps 1e-8),
    w' = w * (1 - 0.05) - 0.1 * sign(g) = [0.85, -1.8]. The second step's bias-corrected moments
    by hand: m = 0.9 m + 0.1 g', v = 0.999 v + 0.001 g'^2 with g' = [1, 1]."""
    from bureau.trainer.config import adamw, build_optimizer

    weight = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = adamw([weight], lr=0.1, weight_decay=0.5, eps=1e-8)
    assert optimizer.defaults["fused"] is True  # float32 on the CPU: the fused kernel
    weight.grad = torch.tensor([3.0, -0.5])
    optimizer.step()
    assert weight.detach().tolist() == pytest.approx([0.85, -1.8], abs=1e-6)
    weight.grad = torch.tensor([1.0, 1.0])
    optimizer.step()
    m = [0.9 * 0.1 * 3.0 + 0.1, 0.9 * 0.1 * -0.5 + 0.1]
    v = [0.999 * 0.001 * 9.0 + 0.001, 0.999 * 0.001 * 0.25 + 0.001]
    expected = [
        w * (1 - 0.05) - 0.1 * (mi / (1 - 0.9**2)) / (math.sqrt(vi / (1 - 0.999**2)) + 1e-8)
        for w, mi, vi in zip([0.85, -1.8], m, v, strict=True)
    ]
    assert weight.detach().tolist() == pytest.approx(expected, abs=1e-6)
    # Where no fused kernel exists for every parameter (here float64), the foreach one.
    double = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    assert not adamw([double], lr=0.1).defaults["fused"]
    assert build_optimizer([weight], OptimizerConfig())[0].defaults["fused"] is True


def test_the_optimizer_follows_the_schedule(model: Any) -> None:
    trainer = _trainer(model, optimizer=OptimizerConfig(lr=1e-3, warmup_steps=1))
    lrs = []
    for step in range(3):
        trainer.forward_backward(synthetic_batch([6, 7], seed=step))
        lrs.append(trainer.optim_step()["train/lr"])
    assert lrs == pytest.approx([5e-4, 1e-3, 1e-3])
    assert trainer.step == 3


def test_a_non_finite_gradient_skips_the_step(model: Any) -> None:
    def broken(inputs: PolicyLossInputs) -> tuple[Any, dict[str, Any]]:
        return (inputs.logprobs * math.nan).sum(), {}

    trainer = _trainer(model)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.forward_backward(synthetic_batch([6, 7]), loss_fn=broken)
    metrics = trainer.optim_step()
    assert metrics["train/skipped_step"] == 1.0
    assert trainer.step == 0
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param.detach(), before[name])


def test_misuse_is_refused(model: Any, tmp_path: Path) -> None:
    trainer = _trainer(model)
    with pytest.raises(RuntimeError, match="without forward_backward"):
        trainer.optim_step()
    trainer.forward_backward(synthetic_batch([6, 7]))
    with pytest.raises(RuntimeError, match="between forward_backward and optim_step"):
        trainer.save(tmp_path / "ckpt")
    with pytest.raises(ValueError, match="loss_mask\\[0\\]\\[0\\] is set"):
        TrainBatch([[1, 2]], [[1, 1]], [[0.0, 0.0]], [[0.0, 0.0]], [[0.0, 0.0]])
    with pytest.raises(ValueError, match="advantages\\[0\\] has 1 values for 2 tokens"):
        TrainBatch([[1, 2]], [[0, 1]], [[0.0, 0.0]], [[0.0]], [[0.0, 0.0]])


def test_compute_logprobs_matches_the_reference_and_sees_updates(model: Any) -> None:
    trainer = _trainer(model, packing=PackingConfig(token_budget=16))
    seqs = [[5, 6, 7, 8, 9], [10, 11, 12], list(range(100, 120))]
    scored = trainer.compute_logprobs(seqs)
    for seq, got in zip(seqs, scored, strict=True):
        assert got.shape == (len(seq),) and float(got[0]) == 0.0
        want = token_logprobs(model, seq, list(range(1, len(seq))))
        torch.testing.assert_close(got[1:], want, rtol=0, atol=1e-5)
    batch = synthetic_batch([12, 9])
    masked = trainer.compute_logprobs(batch)
    for mask, got in zip(batch.loss_mask, masked, strict=True):
        assert [float(v) == 0.0 for v in got] == [m == 0 for m in mask]
    trainer.forward_backward(batch)
    trainer.optim_step()
    assert not torch.equal(trainer.compute_logprobs(seqs)[0], scored[0])


def test_export_weights_is_what_an_engine_loads(model: Any, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from bureau.inference.weights import WeightPlan

    trainer = _trainer(model)
    trainer.forward_backward(synthetic_batch([10, 12]))
    trainer.optim_step()
    folder = trainer.export_weights(tmp_path / "step-1")
    assert folder == tmp_path / "step-1"
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    target = copy.deepcopy(model)
    WeightPlan.build(folder, target).load_into(target)  # the built-in engine's checked update
    reloaded = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True)
    for name, param in trainer.model.named_parameters():
        assert torch.equal(target.get_parameter(name), param.detach())
        assert torch.equal(reloaded.get_parameter(name), param.detach())
    state = trainer.export_weights()
    assert isinstance(state, dict)
    assert torch.equal(state["lm_head.weight"], trainer.model.lm_head.weight.detach())
    halves = trainer.export_weights(dtype=torch.bfloat16)
    assert isinstance(halves, dict) and halves["lm_head.weight"].dtype == torch.bfloat16


def test_activation_checkpointing_and_bf16(model: Any) -> None:
    batch = synthetic_batch([20, 11, 7], seed=5)
    plain = _trainer(model)
    plain.forward_backward(batch)
    checkpointed = _trainer(model, activation_checkpointing=True)
    checkpointed.forward_backward(batch)
    for name, grad in _grads(checkpointed).items():
        torch.testing.assert_close(grad, plain.model.get_parameter(name).grad, rtol=1e-4, atol=1e-7)
    bf16 = _trainer(model, dtype="bfloat16")
    metrics = bf16.forward_backward(batch)
    assert metrics["train/loss"] == pytest.approx(
        plain.forward_backward(batch)["train/loss"], rel=0.05
    )
    bf16.optim_step()
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())


def test_staleness_of_the_batch_tokens_is_reported(model: Any) -> None:
    """Tokens sampled by weight version v are `step - v` updates stale."""
    trainer = _trainer(model)
    batch = synthetic_batch([6, 6], seed=3)
    versions = []
    for b, mask in enumerate(batch.loss_mask):
        versions.append([(b if m else -1) for m in mask])  # sequence 0 by v0, sequence 1 by v1
    batch.weight_versions = versions
    trainer.forward_backward(batch)
    trainer.optim_step()
    trainer.forward_backward(batch)
    trainer.optim_step()  # now at step 2
    metrics = trainer.forward_backward(batch)
    n0, n1 = (sum(mask) for mask in batch.loss_mask)
    assert metrics["train/staleness_tokens/2"] == n0
    assert metrics["train/staleness_tokens/1"] == n1


def test_a_kl_penalty_scores_a_frozen_reference_and_pulls_towards_it(model: Any) -> None:
    from dataclasses import replace

    from bureau.algo.losses import PPOLossConfig, make_loss_fn, needs_reference

    config = PPOLossConfig(kl={"coef": 1.0})
    assert needs_reference(config) and not needs_reference(PPOLossConfig())
    trainer = Trainer(
        copy.deepcopy(model),
        make_loss_fn(config),
        TrainerConfig(optimizer=OptimizerConfig(lr=1e-3)),
        reference=copy.deepcopy(model),
    )
    batch = synthetic_batch(LENGTHS, seed=3)
    first = trainer.forward_backward(batch)
    assert abs(first["kl_ref"]) < 1e-6  # the policy is still the reference
    assert first["train/reference_s"] > 0
    trainer.optim_step()
    drifted = trainer.forward_backward(batch)
    assert drifted["kl_ref"] > 1e-5
    trainer.optim_step()
    for name, param in trainer.reference.named_parameters():  # type: ignore[union-attr]
        assert not param.requires_grad
        assert torch.equal(param, model.get_parameter(name))
    # With no advantages, only the KL term moves the (drifted) policy: back to the reference.
    pulled = Trainer(
        copy.deepcopy(trainer.model),
        make_loss_fn(config),
        TrainerConfig(optimizer=OptimizerConfig(lr=1e-3)),
        reference=copy.deepcopy(model),
    )
    still = replace(batch, advantages=[[0.0] * n for n in batch.lengths])
    before = pulled.forward_backward(still)["kl_ref"]
    pulled.optim_step()
    assert pulled.forward_backward(still)["kl_ref"] < before
    # Without a reference the loss refuses to guess the KL.
    plain = Trainer(copy.deepcopy(model), make_loss_fn(config), TrainerConfig())
    with pytest.raises(ValueError, match="needs ref_logprobs"):
        plain.forward_backward(batch)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_on_a_gpu_packed_steps_match_the_cpu_and_report_peak_memory(model: Any) -> None:
    batch = synthetic_batch(LENGTHS, seed=3)
    packing = PackingConfig(token_budget=64)
    results = {}
    for device in ("cpu", "cuda"):
        trainer = _trainer(model, packing=packing, device=device)
        metrics = trainer.forward_backward(batch) | trainer.optim_step()
        results[device] = (metrics, _grads(trainer))
    cpu, cuda = results["cpu"], results["cuda"]
    assert cuda[0]["train/num_micro_batches"] == 3
    assert cuda[0]["train/loss"] == pytest.approx(cpu[0]["train/loss"], rel=1e-4)
    assert cuda[0]["train/grad_norm"] == pytest.approx(cpu[0]["train/grad_norm"], rel=1e-3)
    assert cuda[0]["train/cuda_peak_gib"] > 0 and "train/cuda_peak_gib" not in cpu[0]
