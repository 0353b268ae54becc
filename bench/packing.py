"""Token-budget packing against fixed, padded micro-batches, in the trainer, on the tiny Qwen3.

    .venv/bin/python bench/packing.py                 # about 3 minutes on 2 CPU cores

Sequence lengths are long-tailed: lognormal with p99/p50 = 10 (median `--median`). Each batch
is a prompt (a quarter of the sequence) and a sampled completion, trained on with a plain
policy-gradient loss. The two sides train the same batches from the same weights:

1. `fixed`: micro-batches of 4 consecutive sequences, right-padded to the longest of the four
   (one row each, a 2-D padding mask) — the usual baseline;
2. `budget`: sequences packed end to end into rows of at most `--token-budget` tokens,
   balanced by the cost a·L + L², isolated by restarting position ids.

Both compute logits only where a logprob is needed (`logits_to_keep` with an index tensor):
the 151,936-wide output layer dominates this model. Packed, that is exactly the sampled
positions; padded, the rows of a micro-batch share one index tensor (the union of their
positions), so a row pays for its neighbours' positions too — padding's real cost.

Reported per side: padding waste (padded positions over positions computed), trainer tokens/s
of `forward_backward` (real tokens; the median of interleaved repeats, and their ratio), and
peak memory — on CPU the peak RSS growth of a fresh process running two steps of that side
alone (torch's CPU allocator keeps no peak), on a GPU `max_memory_allocated`.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

from bureau.models.checkpoint import init_checkpoint, load_checkpoint
from bureau.trainer import OptimizerConfig, PackingConfig, Trainer, TrainerConfig
from bureau.trainer.synthetic import lognormal_lengths, reinforce_loss, synthetic_batch

SIDES = ("fixed", "budget")


def make_batches(args: argparse.Namespace) -> list[Any]:
    """`--batches` batches whose lengths together are the lognormal's quantiles, shuffled."""
    count = args.sequences
    lengths = lognormal_lengths(
        count * args.batches, median=args.median, p99_over_p50=10.0, seed=args.seed, stratified=True
    )
    return [
        synthetic_batch(lengths[k * count : (k + 1) * count], seed=args.seed + k)
        for k in range(args.batches)
    ]


def config_for(side: str, args: argparse.Namespace) -> TrainerConfig:
    packing = (
        PackingConfig(mode="fixed", fixed_size=4)
        if side == "fixed"
        else PackingConfig(token_budget=args.token_budget)
    )
    return TrainerConfig(optimizer=OptimizerConfig(lr=1e-4), packing=packing, device=args.device)


def rss_bytes() -> int:
    """This process's resident memory now (Linux /proc)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples this process's resident memory every few milliseconds, in a thread."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.interval_s)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def probe_memory(side: str, args: argparse.Namespace) -> None:
    """Child process: peak memory growth of two forward-backward passes of one side."""
    model, _ = load_checkpoint(args.model, dtype=torch.float32)
    trainer = Trainer(model, reinforce_loss, config_for(side, args))
    batches = make_batches(args)
    gc.collect()
    before = rss_bytes()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with PeakRSS() as rss:
        for batch in batches[:2]:
            trainer.forward_backward(batch)
            trainer.optimizer.zero_grad(set_to_none=True)
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if torch.cuda.is_available()
        else (rss.peak - before) / 2**20
    )
    print(json.dumps({"peak_mib": peak}))


def measure_memory(side: str, args: argparse.Namespace) -> float:
    command = [sys.executable, __file__, "--probe", side, "--model", str(args.model)]
    for name in ("sequences", "median", "batches", "seed", "token_budget"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if args.device:
        command += ["--device", args.device]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    model, _ = load_checkpoint(args.model, dtype=torch.float32)
    trainers = {
        side: Trainer(copy.deepcopy(model), reinforce_loss, config_for(side, args))
        for side in SIDES
    }
    batches = make_batches(args)
    lengths = [n for b in batches for n in b.lengths]
    cuts = statistics.quantiles(lengths, n=100, method="inclusive")
    p50, p99 = cuts[49], cuts[98]
    times: dict[str, list[float]] = {s: [] for s in SIDES}
    positions = dict.fromkeys(SIDES, 0.0)
    fill: list[float] = []
    micro_batches = dict.fromkeys(SIDES, 0)
    for side in SIDES:  # warm-up, untimed
        trainers[side].forward_backward(batches[0])
        trainers[side].optimizer.zero_grad(set_to_none=True)
    for _ in range(args.repeats):
        for batch in batches:
            for side in SIDES:  # interleaved, so load changes hit both sides alike
                started = time.perf_counter()
                metrics = trainers[side].forward_backward(batch)
                times[side].append(time.perf_counter() - started)
                positions[side] += metrics["train/num_tokens"] / (
                    1 - metrics["train/padding_waste"]
                )
                micro_batches[side] += metrics["train/num_micro_batches"]
                fill += [metrics["train/budget_fill"]] if side == "budget" else []
                trainers[side].optimizer.zero_grad(set_to_none=True)
    tokens = sum(b.num_tokens for b in batches) * args.repeats
    report: dict[str, Any] = {
        "sequences_per_batch": args.sequences,
        "length_p50": p50,
        "length_p99": p99,
        "p99_over_p50": p99 / p50,
        "token_budget": args.token_budget,
    }
    for side in SIDES:
        report[side] = {
            "padding_waste": 1 - tokens / positions[side],
            "micro_batches_per_batch": micro_batches[side] / (len(batches) * args.repeats),
            "tokens_per_s": tokens / sum(times[side]),
            "median_step_s": statistics.median(times[side]),
            "peak_mib": measure_memory(side, args),
        }
    report["budget"]["budget_fill"] = statistics.mean(fill)
    report["throughput_ratio"] = report["budget"]["tokens_per_s"] / report["fixed"]["tokens_per_s"]
    report["memory_ratio"] = report["budget"]["peak_mib"] / report["fixed"]["peak_mib"]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, help="checkpoint (default: a fresh tiny Qwen3)")
    parser.add_argument("--sequences", type=int, default=64, help="sequences per batch")
    parser.add_argument("--median", type=int, default=40, help="median sequence length")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--token-budget", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    parser.add_argument("--probe", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    if args.probe:
        probe_memory(args.probe, args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.model is None:
            args.model = init_checkpoint("qwen3", 2, 64, Path(tmp) / "tiny", heads=2, kv_heads=1)
        report = run(args)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
