"""The fused output layer (`bureau.trainer.head`) against logits, in the trainer, side by side.

    .venv/bin/python bench/output_layer.py      # about 3 minutes on 2 idle CPU cores

The demo's SFT shape by default: the demo's tiny Qwen3 (2 layers, hidden 128, tied embeddings,
the real 151,936-token vocabulary), batches of 8 sequences of about 900 tokens of which the
last 15% are trained on (a prompt and tool output, then the policy's program and reply), at
temperature 1 or `--temperature`. Both arms train the same batches from the same weights,
alternating batch by batch after an untimed warm-up step each:

1. `fused`: the trainer as shipped; the output layer and the logprob are one blocked
   computation, no [N, V] logits;
2. `logits`: the same trainer with fusion off (`can_fuse` patched to False): the model's
   logits at the trained positions, then `SelectedLogprobs`;
3. `fused_bf16`: `fused` with `trainer.dtype = "bfloat16"` (autocast; the output layer's
   matmuls in bfloat16, AMX on this machine's CPU; float32 master weights and softmax).

Reported: tokens/s of each arm and their ratio, the per-batch paired step ratios, and the peak
RSS growth of a fresh process running two steps of one arm alone.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

import bureau.trainer.forward as forward
from bureau.algo.losses import SFTLossConfig, make_loss_fn
from bureau.models.checkpoint import init_checkpoint, load_checkpoint
from bureau.trainer import OptimizerConfig, PackingConfig, Trainer, TrainerConfig
from bureau.trainer.synthetic import synthetic_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from packing import PeakRSS, compare, rss_bytes, run_on_model

ARMS = ("fused", "logits", "fused_bf16")


def make_batches(args: argparse.Namespace) -> list[Any]:
    rng = random.Random(args.seed)
    batches = []
    for k in range(args.batches):
        lengths = [rng.randint(args.length * 3 // 4, args.length * 5 // 4) for _ in range(8)]
        batches.append(
            synthetic_batch(lengths, seed=args.seed + k, prompt_fraction=1 - args.trained)
        )
    return batches


def make_trainer(model: Any, args: argparse.Namespace, arm: str) -> Trainer:
    config = TrainerConfig(
        dtype="bfloat16" if arm == "fused_bf16" else "float32",
        optimizer=OptimizerConfig(lr=1e-4),
        packing=PackingConfig(token_budget=args.token_budget),
        temperature=args.temperature,
        compute_entropy=False,
    )
    return Trainer(model, make_loss_fn(SFTLossConfig()), config)


def use(arm: str) -> None:
    """Switch the trainer's forward between the two arms (fusion is decided per call)."""
    from bureau.trainer.head import can_fuse

    forward.can_fuse = can_fuse if arm != "logits" else (lambda _model: False)  # type: ignore[assignment]


def probe_memory(arm: str, args: argparse.Namespace) -> None:
    """Child process: peak RSS growth of two forward-backward passes of one arm."""
    use(arm)
    model, _ = load_checkpoint(args.model, dtype=torch.float32)
    trainer = make_trainer(model, args, arm)
    batches = make_batches(args)
    gc.collect()
    before = rss_bytes()
    with PeakRSS() as rss:
        for batch in batches[:2]:
            trainer.forward_backward(batch)
            trainer.optimizer.zero_grad(set_to_none=True)
    print(json.dumps({"peak_mib": (rss.peak - before) / 2**20}))


def measure_memory(arm: str, args: argparse.Namespace) -> float:
    command = [sys.executable, __file__, "--probe", arm, "--model", str(args.model)]
    for name in ("batches", "length", "trained", "seed", "token_budget", "temperature"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    model, _ = load_checkpoint(args.model, dtype=torch.float32)
    trainers = {arm: make_trainer(copy.deepcopy(model), args, arm) for arm in ARMS}
    batches = make_batches(args)
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for arm in ARMS:  # warm-up, untimed
        use(arm)
        trainers[arm].forward_backward(batches[0])
        trainers[arm].optimizer.zero_grad(set_to_none=True)
    trained = 0
    for batch in batches:
        trained += int(sum(sum(m) for m in batch.loss_mask))
        for arm in ARMS:
            use(arm)
            started = time.perf_counter()
            trainers[arm].forward_backward(batch)
            times[arm].append(time.perf_counter() - started)
            trainers[arm].optimizer.zero_grad(set_to_none=True)
    tokens = sum(b.num_tokens for b in batches)
    report: dict[str, Any] = {
        "batches": args.batches,
        "tokens_per_batch": tokens / len(batches),
        "trained_tokens_per_batch": trained / len(batches),
        "temperature": args.temperature,
    }
    for arm in ARMS:
        report[arm] = {
            "tokens_per_s": tokens / sum(times[arm]),
            "median_step_s": statistics.median(times[arm]),
            "peak_mib": measure_memory(arm, args),
        }
    report["fused_vs_logits"] = compare(times["logits"], times["fused"])
    report["fused_bf16_vs_fused"] = compare(times["fused"], times["fused_bf16"])
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, help="checkpoint (default: the demo's tiny Qwen3)")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--length", type=int, default=900, help="median sequence length")
    parser.add_argument("--trained", type=float, default=0.15, help="trained share of each")
    parser.add_argument("--token-budget", type=int, default=1024)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe", choices=ARMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    report = run_on_model(
        args,
        probe_memory,
        run,
        lambda tmp: init_checkpoint(
            "qwen3", 2, 128, tmp / "tiny", heads=4, kv_heads=4, tie_embeddings=True
        ),
    )
    if report is None:
        return
    print(json.dumps(report, indent=2))
    for key, (fast, slow) in {
        "fused_vs_logits": ("fused", "logits"),
        "fused_bf16_vs_fused": ("fused_bf16", "fused"),
    }.items():
        c = report[key]
        print(
            f"{fast} over {slow}: tokens/s x{c['tokens_per_s_ratio']:.2f}; per-batch paired "
            f"step ratio median x{c['paired_step_ratio_median']:.2f} "
            f"(x{c['paired_step_ratio_min']:.2f}..x{c['paired_step_ratio_max']:.2f}); peak RSS "
            f"growth {report[fast]['peak_mib']:.0f} MiB against {report[slow]['peak_mib']:.0f}"
        )


if __name__ == "__main__":
    main()
