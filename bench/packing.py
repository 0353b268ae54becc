"""Token-budget packing against fixed, padded micro-batches, in the trainer, on the tiny Qwen3.

    .venv/bin/python bench/packing.py    # a few minutes on 2 idle CPU cores, far longer if busy

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

A third arm, `raw`, measures the trainer's overhead over the model itself: the model's forward
and backward on the budget side's own micro-batches (the same tensors, position ids and kept
logit positions, built once beforehand), with `logits.mean()` as the loss — no logprob
gathering, no entropy, no loss function, no packing or metrics inside the timed region.

All arms take the same batch one after another before the next batch (alternating, so a change
of machine load hits every arm alike), after one untimed warm-up step each. Every arm trains
the same real tokens (padding is never counted), so a tokens/s ratio is a ratio of total times.
A ratio of *median* step times is not: the batches differ in size and skew, the two medians can
fall on different batches, and the sum is dominated by the largest batches while the median
ignores them. So each comparison reports the tokens/s ratio (total time, token-weighted) next to
the median (and range) of the per-batch paired ratios (the same batch, measured back to back);
the two agree when the per-batch ratio does not depend on the batch.

Reported per side: padding waste (padded positions over positions computed), tokens/s, the
median step, and peak memory — on CPU the peak RSS growth of a fresh process running two steps
of that side alone (torch's CPU allocator keeps no peak), on a GPU `max_memory_allocated`.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bureau.models.checkpoint import init_checkpoint, load_checkpoint
from bureau.trainer import OptimizerConfig, PackingConfig, Trainer, TrainerConfig
from bureau.trainer.synthetic import lognormal_lengths, reinforce_loss, synthetic_batch

SIDES = ("fixed", "budget")
ARMS = (*SIDES, "raw")


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
    return TrainerConfig(
        optimizer=OptimizerConfig(lr=1e-4),
        packing=packing,
        device=args.device,
        compute_entropy=not args.no_entropy,
    )


RawStep = list[tuple[dict[str, Any], torch.Tensor]]
"""Per micro-batch: the model's keyword inputs and the positions whose logits are kept."""


def raw_inputs(trainer: Trainer, batch: Any) -> RawStep:
    """The trainer's own micro-batches of `batch`, as plain model inputs (built untimed).

    The kept positions are the ones `micro_batch_logprobs` keeps: the position before each
    trained token, per row when packed into one row, their union when rows are stacked.
    """
    if trainer.config.attention != "auto":
        raise ValueError("the raw arm passes the micro-batch's own attention mask (attention=auto)")
    steps: RawStep = []
    for mb in trainer._micro_batches(batch):
        scored = (mb.loss_mask > 0).nonzero()[:, 0]
        width = mb.input_ids.shape[1]
        col = mb.token_index[scored] % width
        keep = col - 1 if mb.input_ids.shape[0] == 1 else torch.unique(col - 1, sorted=True)
        inputs = {
            "input_ids": mb.input_ids,
            "position_ids": mb.position_ids,
            "attention_mask": mb.attention_mask,
        }
        steps.append((inputs, keep))
    return steps


def raw_forward_backward(model: torch.nn.Module, step: RawStep) -> None:
    """The model alone: forward, `logits.mean()`, backward, per micro-batch."""
    model.train()
    for inputs, keep in step:
        out = model(**inputs, logits_to_keep=keep, use_cache=False)
        out.logits.float().mean().backward()


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
    if args.no_entropy:
        command.append("--no-entropy")
    if args.device:
        command += ["--device", args.device]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"])


def timed_steps(
    trainers: dict[str, Trainer], batches: list[Any], raw: list[RawStep], repeats: int
) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """Each arm's step times, batch by batch with the arms alternating, and the trainer's
    counters (positions computed, micro-batches, budget fill) per side."""
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    counts = {side: {"positions": 0.0, "micro_batches": 0.0, "fill": 0.0} for side in SIDES}
    model = trainers["budget"].model
    for side in SIDES:  # warm-up, untimed
        trainers[side].forward_backward(batches[0])
        trainers[side].optimizer.zero_grad(set_to_none=True)
    raw_forward_backward(model, raw[0])
    model.zero_grad(set_to_none=True)
    for _ in range(repeats):
        for batch, raw_step in zip(batches, raw, strict=True):
            for arm in ARMS:
                started = time.perf_counter()
                if arm == "raw":
                    raw_forward_backward(model, raw_step)
                    times[arm].append(time.perf_counter() - started)
                    model.zero_grad(set_to_none=True)
                    continue
                metrics = trainers[arm].forward_backward(batch)
                times[arm].append(time.perf_counter() - started)
                tally = counts[arm]
                tally["positions"] += metrics["train/num_tokens"] / (
                    1 - metrics["train/padding_waste"]
                )
                tally["micro_batches"] += metrics["train/num_micro_batches"]
                tally["fill"] += metrics.get("train/budget_fill", 0.0)
                trainers[arm].optimizer.zero_grad(set_to_none=True)
    return times, counts


def compare(slow: list[float], fast: list[float]) -> dict[str, float]:
    """How much faster `fast` is than `slow`, measured on the same steps in the same order."""
    paired = sorted(s / f for s, f in zip(slow, fast, strict=True))
    return {
        "tokens_per_s_ratio": sum(slow) / sum(fast),  # same tokens on both sides
        "paired_step_ratio_median": statistics.median(paired),
        "paired_step_ratio_min": paired[0],
        "paired_step_ratio_max": paired[-1],
        "median_step_ratio": statistics.median(slow) / statistics.median(fast),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    model, _ = load_checkpoint(args.model, dtype=torch.float32)
    trainers = {
        side: Trainer(copy.deepcopy(model), reinforce_loss, config_for(side, args))
        for side in SIDES
    }
    batches = make_batches(args)
    raw = [raw_inputs(trainers["budget"], batch) for batch in batches]
    lengths = [n for b in batches for n in b.lengths]
    cuts = statistics.quantiles(lengths, n=100, method="inclusive")
    times, counts = timed_steps(trainers, batches, raw, args.repeats)
    steps = len(batches) * args.repeats
    tokens = sum(b.num_tokens for b in batches) * args.repeats
    report: dict[str, Any] = {
        "sequences_per_batch": args.sequences,
        "batch_tokens": [b.num_tokens for b in batches],
        "length_p50": cuts[49],
        "length_p99": cuts[98],
        "p99_over_p50": cuts[98] / cuts[49],
        "token_budget": args.token_budget,
        "compute_entropy": not args.no_entropy,
        "steps_per_arm": steps,
    }
    for arm in ARMS:
        report[arm] = {
            "tokens_per_s": tokens / sum(times[arm]),
            "median_step_s": statistics.median(times[arm]),
            "step_s": [round(t, 3) for t in times[arm]],
        }
    for side in SIDES:
        report[side]["padding_waste"] = 1 - tokens / counts[side]["positions"]
        report[side]["micro_batches_per_batch"] = counts[side]["micro_batches"] / steps
        report[side]["peak_mib"] = measure_memory(side, args)
    report["budget"]["budget_fill"] = counts["budget"]["fill"] / steps
    report["budget_vs_fixed"] = compare(times["fixed"], times["budget"])
    report["trainer_vs_raw"] = compare(times["budget"], times["raw"])
    report["trainer_overhead"] = report["trainer_vs_raw"]["tokens_per_s_ratio"] - 1
    report["memory_ratio"] = report["budget"]["peak_mib"] / report["fixed"]["peak_mib"]
    return report


def run_on_model(
    args: argparse.Namespace,
    probe: Callable[[str, argparse.Namespace], None],
    run: Callable[[argparse.Namespace], dict[str, Any]],
    make_model: Callable[[Path], Path],
) -> dict[str, Any] | None:
    """A bench's main: a memory probe in a child (`--probe ARM`, None), else `run` on
    `--model` or on a fresh model that `make_model` writes in a temporary folder."""
    if args.probe:
        probe(args.probe, args)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        if args.model is None:
            args.model = make_model(Path(tmp))
        return run(args)


def summary(report: dict[str, Any]) -> str:
    """The comparisons in a few lines, below the JSON."""
    lines = []
    names = {"budget_vs_fixed": "budget over fixed", "trainer_vs_raw": "raw model over trainer"}
    for key, name in names.items():
        c = report[key]
        lines.append(
            f"{name}: tokens/s x{c['tokens_per_s_ratio']:.2f}; per-batch paired step ratio "
            f"median x{c['paired_step_ratio_median']:.2f} "
            f"(x{c['paired_step_ratio_min']:.2f}..x{c['paired_step_ratio_max']:.2f}); "
            f"ratio of median steps x{c['median_step_ratio']:.2f}"
        )
    lines.append(f"trainer overhead over the model: {100 * report['trainer_overhead']:.1f}%")
    return "\n".join(lines)


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
    parser.add_argument(
        "--no-entropy", action="store_true", help="trainers skip the entropy metric"
    )
    parser.add_argument("--probe", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    report = run_on_model(
        args,
        probe_memory,
        run,
        lambda tmp: init_checkpoint("qwen3", 2, 64, tmp / "tiny", heads=2, kv_heads=1),
    )
    if report is None:
        return
    print(json.dumps(report, indent=2))
    print(summary(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
