"""`bureau train` on one GPU with a small random Qwen3, and the figures a user compares.

Run by `scripts/gpu_check.sh` (it needs `$BUREAU_VLLM_PYTHON`: a Python with the CUDA vllm).
The model has Qwen3-0.6B's width on 8 layers (random weights, warm-started for a minute on
the GPU to call tools, so groups differ in reward); the tasks are the synthetic answer tasks.
One vLLM engine and the trainer share the GPU (half of Ray's GPU each, vLLM held to 35% of the
memory). Four steps, asynchronous, staleness bound 1. Figures over steps 2..N:

    decode tokens/s      tokens the engine sampled per second of step time
    trainer tokens/s     tokens the trainer processed per second it was busy
    weight sync          seconds per push, and its share of the step
    memory               the trainer's CUDA peak, and the GPU's peak (nvidia-smi, both processes)
    staleness            the largest group staleness, and trained tokens by age

Exits non-zero when the run fails or steps are missing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import tomli_w

BIN = Path(sys.executable).parent


def gpu_memory_sampler(peak: list[int], stop: threading.Event) -> None:
    """The GPU's used memory (MiB), every half second, until `stop`."""
    while not stop.wait(0.5):
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        values = [int(v) for v in done.stdout.split() if v.strip().isdigit()]
        if values:
            peak[0] = max(peak[0], max(values))


def main() -> int:
    from bureau.loop.synthetic import run_config, write_answer_tasks

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tasks = write_answer_tasks(out / "tasks", 16, domain_cycle=("law", "consulting", "banking"))
    random_model, model = out / "qwen3-8x1024", out / "qwen3-8x1024-tools"
    if not (model / "config.json").is_file():
        subprocess.run(
            [str(BIN / "bureau"), "model", "init", "--vocab", "qwen3", "--layers", "8",
             "--hidden", "1024", "--heads", "16", "--kv-heads", "8", "--head-dim", "128",
             "--out", str(random_model)],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [str(BIN / "bureau"), "model", "warm-start", "--model", str(random_model),
             "--out", str(model), "--dataset", str(tasks)],
            check=True,
        )  # fmt: skip
    run = out / "run"
    shutil.rmtree(run, ignore_errors=True)
    tree = run_config(
        run, model, tasks, steps=args.steps,
        **{"rollout.attempts": 8, "rollout.max_in_flight": 32, "rollout.workers": 2,
           "rollout.worker_cpus": 1, "rollout.harness.max_tokens_per_turn": 256,
           "engines.kind": "vllm", "engines.num_cpus": 2, "engines.num_gpus": 0.5,
           "engines.dtype": "bfloat16",
           "engines.vllm_args": ["--gpu-memory-utilization", "0.35"],
           "ray.trainer_gpus": 0.5, "ray.num_cpus": 8,
           "trainer.dtype": "bfloat16", "weights.dtype": "bfloat16",
           "async.groups_per_step": 4, "checkpoint.every": 1000},
    )  # fmt: skip
    config = out / "run.toml"
    config.write_text(tomli_w.dumps(tree))
    peak = [0]
    stop = threading.Event()
    sampler = threading.Thread(target=gpu_memory_sampler, args=(peak, stop), daemon=True)
    sampler.start()
    started = time.perf_counter()
    with (out / "train.log").open("w") as log:
        code = subprocess.run(
            [str(BIN / "bureau"), "train", "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT, check=False,
        ).returncode  # fmt: skip
    wall = time.perf_counter() - started
    stop.set()
    if code != 0:
        print((out / "train.log").read_text()[-4000:])
        print(f"bureau train exited {code}")
        return 1
    rows = [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if '"data/group_ids"' in line
    ]
    if len(rows) != args.steps:
        print(f"{len(rows)} steps of {args.steps} in metrics.jsonl")
        return 1
    steady = rows[1:] or rows
    ages: Counter[int] = Counter()
    for row in steady:
        for key, value in row.items():
            if key.startswith("train/staleness_tokens/"):
                ages[int(key.rsplit("/", 1)[1])] += int(value)
    figures = {
        "wall_s": round(wall, 1),
        "decode_tokens_per_s": round(
            statistics.mean(r["perf/sampled_tokens_per_s"] for r in steady), 1
        ),
        "trainer_tokens_per_s": round(
            sum(r["train/num_tokens"] for r in steady)
            / sum(r["time/trainer_busy_s"] for r in steady),
            1,
        ),
        "weight_sync_s": round(statistics.mean(r["weights/sync_s"] for r in steady), 3),
        "weight_sync_share": round(statistics.mean(r["weights/sync_share"] for r in steady), 3),
        "trainer_cuda_peak_gib": round(max(r.get("train/cuda_peak_gib", 0.0) for r in rows), 2),
        "gpu_peak_used_mib": peak[0],
        "staleness_group_max": max(r["staleness/group_max"] for r in rows),
        "trained_tokens_by_age": dict(sorted(ages.items())),
        "reward_by_step": [round(r.get("rollout/reward", float("nan")), 3) for r in rows],
    }
    (out / "figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
