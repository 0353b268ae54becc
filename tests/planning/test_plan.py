"""The planner against published allocations and hand computation.

Published configurations (each judged with the same estimate as the sweep):

- SkyRL's Megatron example for Qwen3-30B-A3B (`skyrl-train/examples/megatron/
  run_megatron_qwen3-30b-a3b.sh`): 2 nodes of 8 H100, TP4 PP2 CP1 EP8 ETP1, full recompute,
  micro-batches of 4 sequences of 512 + 1,024 tokens; 2 vLLM engines at TP8.
- SkyRL's FSDP2 example for the dense Qwen2.5-32B (`examples/gsm8k/run_32b_gsm8k.sh`): 2 nodes
  of 8 GPUs, micro-batches of 8 sequences of 512 + 1,024 tokens, gradient checkpointing (SkyRL's
  default); 4 engines at TP4.
- The reference pipeline's public recipe: Qwen3.6-35B-A3B on 4 training nodes at TP8/EP8 with
  10 vLLM engines at TP8; Qwen3.5-397B-A17B at TP4/PP4/CP2/EP16 on 8 training nodes with 12
  engines at TP8. The recipe does not state its GPUs: 397B weights in bf16 take 92 GiB a GPU at
  TP8, more than an 80 GB card holds, so its engines are judged on 141 GB (H200) cards.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bureau.planning.engines import EngineAssumptions, Workload, engine_fit, split
from bureau.planning.model import load_model
from bureau.planning.plan import Cluster, Rates, evaluate_published, make_plan
from bureau.planning.trainer import Layout

H100 = Cluster(gpu_memory_gib=80)
H200 = Cluster(gpu_memory_gib=141, hbm_tbps=4.8)


@pytest.mark.parametrize(
    ("model", "layout", "gpus", "micro_tokens", "cluster"),
    [
        ("qwen3-30b-a3b", Layout(tp=4, pp=2, cp=1, ep=8), 16, 4 * 1536, H100),
        ("qwen2.5-32b", Layout(fsdp=True), 16, 8 * 1536, H100),
        ("qwen3.6-35b-a3b", Layout(tp=8, ep=8), 32, 32768, H100),
        ("qwen3.5-397b-a17b", Layout(tp=4, pp=4, cp=2, ep=16), 64, 32768, H200),
    ],
)
def test_published_trainer_allocations_fit(
    model: str, layout: Layout, gpus: int, micro_tokens: int, cluster: Cluster
) -> None:
    fit = evaluate_published(load_model(model), layout, gpus, micro_tokens, cluster)
    assert fit.fits, fit.to_dict()


def test_the_397b_layout_needs_the_optimizer_off_the_gpu_on_80_gb_cards() -> None:
    model, layout = load_model("qwen3.5-397b-a17b"), Layout(tp=4, pp=4, cp=2, ep=16)
    on_gpu = evaluate_published(model, layout, 64, 32768, H100)
    offloaded = evaluate_published(
        model, layout.model_copy(update={"offload_optimizer": True}), 64, 32768, H100
    )
    assert not on_gpu.fits and offloaded.fits
    assert offloaded.host_optimizer_gib == pytest.approx(on_gpu.optimizer_gib)


@pytest.mark.parametrize(
    ("model", "tp", "cluster", "fits"),
    [
        ("qwen3-30b-a3b", 8, H100, True),
        ("qwen2.5-32b", 4, H100, True),
        ("qwen3.6-35b-a3b", 8, H100, True),
        ("qwen3.5-397b-a17b", 8, H200, True),
        ("qwen3.5-397b-a17b", 8, H100, False),
    ],
)
def test_published_engines_fit_their_cards(
    model: str, tp: int, cluster: Cluster, fits: bool
) -> None:
    engine = engine_fit(
        load_model(model), tp, 32768, 8192, EngineAssumptions(gpu_memory_gib=cluster.gpu_memory_gib)
    )
    assert engine.fits is fits, engine.to_dict()


def test_engine_capacity_by_hand() -> None:
    model = load_model("qwen3.6-35b-a3b")
    engine = engine_fit(model, 8, 131072, 32768, EngineAssumptions())
    weights = model.total_params(mtp=False) * 2
    free = 8 * (80 * 0.9 - 4) * 2**30 - weights
    per_sequence = 131072 * 20_480 + model.state_bytes_per_sequence()
    assert engine.sequences_at_context == math.floor(free / per_sequence)
    assert engine.sequences_at_mean == math.floor(
        free / (32768 * 20_480 + model.state_bytes_per_sequence())
    )
    assert engine.concurrency == min(engine.sequences_at_mean, 256)


def test_the_split_by_hand_with_measured_rates() -> None:
    model = load_model("qwen3-8b")
    engine = engine_fit(
        model, 1, 16384, 4096, EngineAssumptions(decode_tokens_per_s=2000.0, max_num_seqs=64)
    )
    assert engine.concurrency == 64 and engine.measured
    work = Workload(
        context_length=16384, mean_tokens=4096, p99_tokens=12288, sampled_share=0.5,
        group_size=8, groups_per_step=16, max_staleness=1, tool_s_per_trajectory=10.0,
    )  # fmt: skip
    planned = split(engine, trainer_step_s=60.0, work=work, target_wait=0.0)
    # A sequence decodes at 2000 / 64 tokens/s: 2048 sampled tokens take 65.5 s; its 2048
    # prefilled tokens share the prefill rate with the 63 others; then 10 s of tools.
    prefill = 2048 / (engine.prefill_tokens_per_s / 64)
    latency = 2048 / (2000 / 64) + prefill + 10.0
    assert planned.mean_latency_s == pytest.approx(latency)
    per_engine = 64 / latency
    needed = 8 * 16 / 60.0
    assert planned.engines == math.ceil(needed / per_engine)
    assert planned.in_flight == pytest.approx(needed * latency)  # Little's law
    p99 = 6144 / (2000 / 64) + 6144 / (engine.prefill_tokens_per_s / 64) + 10.0
    assert planned.staleness_p99 == math.ceil(p99 / 60.0)


def test_a_plan_for_the_reference_models_and_its_train_config(tmp_path: Path) -> None:
    from bureau.loop.config import AsyncSection, EngineSection, RaySection, RolloutSection

    plan = make_plan(load_model("qwen3.6-35b-a3b"), Cluster(trainer_nodes=4), Workload(), Rates())
    assert plan.trainer.fits and plan.ranked[0] is plan.trainer
    assert all(f.fits for f in plan.ranked)
    order = [(not f.has_headroom, f.step_s) for f in plan.ranked]
    assert order == sorted(order)  # a tenth of the memory to spare first, then fastest
    assert plan.trainer.has_headroom
    settings = plan.train_config()
    EngineSection.model_validate(settings["engines"])
    RaySection.model_validate(settings["ray"])
    RolloutSection.model_validate(settings["rollout"])
    AsyncSection.model_validate(settings["async"])
    assert settings["engines"]["count"] == plan.split.engines >= 1
    assert any("Megatron" in note for note in plan.notes) or plan.trainer.layout.fsdp
    big = make_plan(load_model("qwen3.5-397b-a17b"), H200.model_copy(update={"trainer_nodes": 8}),
                    Workload(), Rates())  # fmt: skip
    assert big.trainer.fits and big.engine.fits
    with pytest.raises(ValueError, match="does not fit an engine of 8 GPUs of 80 GiB"):
        make_plan(load_model("qwen3.5-397b-a17b"), Cluster(trainer_nodes=8), Workload(), Rates())


def test_bureau_plan_writes_json_and_train_settings(tmp_path: Path) -> None:
    bureau = str(Path(sys.executable).parent / "bureau")
    done = subprocess.run(
        [bureau, "plan", "--model", "qwen3-30b-a3b", "--set", "cluster.trainer_nodes=2",
         "--set", "rates.decode_tokens_per_s=12000", "--json", str(tmp_path / "plan.json"),
         "--train-config", str(tmp_path / "train.toml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "trainer layouts that fit 16 GPUs" in done.stdout and "decode rate measured" in done.stdout
    )
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["engine"]["decode_tokens_per_s"] == 12000 and plan["trainer"]["fits"]
    assert tomllib.loads((tmp_path / "train.toml").read_text())["engines"]["kind"] == "vllm"
    wrong = subprocess.run(
        [bureau, "plan", "--model", "qwen3-30b-a3b", "--set", "cluster.gpus=8"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert wrong.returncode == 2 and "cluster.gpus" in wrong.stdout
