"""The trainer's step at float32 against bfloat16 compute, on demonstration-shaped batches.

    .venv/bin/python bench/precision.py            # about two minutes on 2 idle CPU cores

The tiny Qwen3 of the demo (2 layers, width 128, tied embeddings, the real 151,936-token
vocabulary) trains with the `sft` loss on batches shaped like the demo's SFT stage: 8 sequences
of about 800 tokens, the last ~150 of each trained (the teacher's program and reply). Two
trainers start from the same weights, one with `dtype = "float32"`, one with `"bfloat16"`
(autocast compute; parameters, gradients and AdamW state stay float32), and take the same
batches alternately, after one untimed warm-up step each, so a change of machine load hits both.

Reported: tokens/s of each and their ratio (total times), the median of the per-batch paired
step-time ratios, and what bfloat16 costs in accuracy: the mean and max |Δ logprob| of the
trained tokens between the two, at the same (initial) weights.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bureau.algo.losses import SFTLossConfig, make_loss_fn
from bureau.bootstrap.sft import sft_batch
from bureau.models.checkpoint import init_checkpoint
from bureau.records import TrainBatch
from bureau.trainer.config import TrainerConfig
from bureau.trainer.trainer import Trainer


def demo_batch(rng: random.Random, vocab: int, sequences: int, length: int) -> TrainBatch:
    demos = []
    for _ in range(sequences):
        n = max(64, int(rng.gauss(length, length / 8)))
        trained = max(8, int(rng.gauss(150, 30)))
        ids = [rng.randrange(vocab) for _ in range(n)]
        demos.append((ids, [0] * (n - trained) + [1] * trained))
    return sft_batch(demos)


def trainer(model: Path, dtype: str) -> Trainer:
    config = TrainerConfig.model_validate(
        {
            "dtype": dtype,
            "compute_entropy": False,
            "packing": {"token_budget": 1024},
            "optimizer": {"lr": 3e-3},
        }
    )
    built = Trainer.from_pretrained(model, make_loss_fn(SFTLossConfig()), config)
    built.model.set_attn_implementation("sdpa")
    return built


def step_s(t: Trainer, batch: TrainBatch) -> float:
    started = time.perf_counter()
    t.forward_backward(batch)
    t.optim_step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--length", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bureau-bench-precision-") as tmp:
        model = init_checkpoint(
            "qwen3", 2, 128, Path(tmp) / "model", heads=4, kv_heads=4,
            tie_embeddings=True, seed=args.seed,
        )  # fmt: skip
        sides = {name: trainer(model, name) for name in ("float32", "bfloat16")}
        vocab = int(sides["float32"].model.config.vocab_size)
        batches = [
            demo_batch(rng, vocab, args.sequences, args.length) for _ in range(args.batches + 1)
        ]
        logprobs = {name: t.compute_logprobs(batches[0]) for name, t in sides.items()}
        diffs = torch.cat(
            [
                (a - b).abs()[torch.tensor(mask, dtype=torch.bool)]
                for a, b, mask in zip(
                    logprobs["float32"], logprobs["bfloat16"], batches[0].loss_mask, strict=True
                )
            ]
        )
        for t in sides.values():  # warm-up
            step_s(t, batches[0])
        times: dict[str, list[float]] = {name: [] for name in sides}
        for batch in batches[1:]:
            for name, t in sides.items():
                times[name].append(step_s(t, batch))
        tokens = sum(len(ids) for b in batches[1:] for ids in b.token_ids)
        for t in sides.values():
            t.close()
    report: dict[str, Any] = {
        name: {
            "tokens_per_s": round(tokens / sum(ts), 1),
            "median_step_s": round(statistics.median(ts), 3),
        }
        for name, ts in times.items()
    }
    report["bfloat16_over_float32_tokens_per_s"] = round(
        sum(times["float32"]) / sum(times["bfloat16"]), 2
    )
    paired = [f / b for f, b in zip(times["float32"], times["bfloat16"], strict=True)]
    report["paired_step_ratio_median"] = round(statistics.median(paired), 2)
    report["paired_step_ratio_range"] = [round(min(paired), 2), round(max(paired), 2)]
    report["abs_logprob_diff_mean"] = float(diffs.mean())
    report["abs_logprob_diff_max"] = float(diffs.max())
    report["batches"] = args.batches
    report["tokens_per_batch"] = round(tokens / args.batches)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
