"""Asynchronous against synchronous RL, same model, tasks, engines and trainer, one run.

Each arm is a real `bureau train` run (Ray, the built-in engine, sandboxed trials with MCP
tools, the trainer, in-place weight pushes) on synthetic coin-flip tasks (`bureau.loop.synthetic`)
with a tiny warm-started model; only the `[async]` section differs. Tool calls can get an
injected lognormal latency (p99/p50 = 10), so wall time per trajectory is long-tailed the way
agent rollouts are. Steady-state figures leave out step 1 (start-up and the first batch):

    trained groups per minute   (steps 2..N) * B / sum of their step times
    trainer wait                the trainer's time waiting for B groups / step time
    generation idle             time with no trajectory running / step time
    weight sync share           weight-push time / step time
    staleness                   sampled tokens by (trainer version - token's version)

    .venv/bin/python bench/async_rl.py [--steps 8] [--latency-p50 0.5] [--no-latency-arm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import tomli_w

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def fixtures(cache: Path) -> tuple[Path, Path]:
    """A warm-started tiny model and 16 coin-flip tasks, built once under `cache`."""
    from bureau.loop.synthetic import write_answer_tasks

    tasks = cache / "tasks"
    if not tasks.is_dir():
        write_answer_tasks(tasks, 16, domain_cycle=("law", "consulting", "banking"))
    model = cache / "tools-model"
    if not (model / "config.json").is_file():
        tiny = cache / "tiny"
        subprocess.run(
            [str(BIN / "bureau"), "model", "init", "--vocab", "qwen3", "--layers", "2",
             "--hidden", "64", "--out", str(tiny)],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [str(BIN / "bureau"), "model", "warm-start", "--model", str(tiny), "--out",
             str(model), "--dataset", str(tasks)],
            check=True,
        )  # fmt: skip
    return model, tasks


def arm(
    name: str, out: Path, model: Path, tasks: Path, args: argparse.Namespace, **sections: Any
) -> dict[str, Any]:
    from bureau.loop.synthetic import run_config

    run = out / name
    shutil.rmtree(run, ignore_errors=True)  # a run folder left over would be resumed
    tree = run_config(
        run,
        model,
        tasks,
        steps=args.steps,
        **{
            "checkpoint.every": 1000,
            "checkpoint.export_weights": False,
            "rollout.keep_trials": False,
            "rollout.max_in_flight": args.in_flight,
            "async.groups_per_step": args.groups,
        },
        **sections,
    )
    config = out / f"{name}.toml"
    config.write_text(tomli_w.dumps(tree))
    started = time.perf_counter()
    with (out / f"{name}.log").open("w") as log:
        code = subprocess.run(
            [str(BIN / "bureau"), "train", "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"RAY_USAGE_STATS_ENABLED": "0"},
        ).returncode  # fmt: skip
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{name}: bureau train exited {code}; see {out / (name + '.log')}")
    rows = [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if '"data/group_ids"' in line
    ]
    return summarize(name, rows, args.groups, wall)


def summarize(name: str, rows: list[dict[str, Any]], groups: int, wall: float) -> dict[str, Any]:
    steady = rows[1:]
    span = sum(r["time/step_s"] for r in steady)
    staleness: Counter[int] = Counter()
    for r in rows:
        for key, value in r.items():
            if key.startswith("train/staleness_tokens/"):
                staleness[int(key.rsplit("/", 1)[1])] += int(value)
    return {
        "arm": name,
        "steps": len(rows),
        "groups_per_min": len(steady) * groups / span * 60 if span else float("nan"),
        "trainer_wait": sum(r["time/trainer_wait_s"] for r in steady) / span,
        "gen_idle": sum(r["perf/gen_idle_ratio"] * r["time/step_s"] for r in steady) / span,
        "sync_share": sum(r.get("weights/sync_s", 0.0) for r in steady) / span,
        "sync_s_mean": sum(r.get("weights/sync_s", 0.0) for r in steady) / max(1, len(steady)),
        "staleness_max": max((r["staleness/group_max"] for r in rows), default=0),
        "staleness_tokens": dict(sorted(staleness.items())),
        "run_wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--groups", type=int, default=2, help="B, groups per step")
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--max-staleness", type=int, default=2)
    parser.add_argument("--latency-p50", type=float, default=0.5, help="seconds per tool call")
    parser.add_argument("--no-latency-arm", action="store_true", help="also run without latency")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-async")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model, tasks = fixtures(args.out / "cache")
    latency = {"rollout.tool_latency": {"p50_s": args.latency_p50, "p99_over_p50": 10.0}}
    plans: list[tuple[str, dict[str, Any]]] = [
        ("sync+latency", {"async.mode": "sync"} | latency),
        ("async+latency", {"async.mode": "async", "async.max_staleness": args.max_staleness}
         | latency),
    ]  # fmt: skip
    if args.no_latency_arm:
        plans += [
            ("sync", {"async.mode": "sync"}),
            ("async", {"async.mode": "async", "async.max_staleness": args.max_staleness}),
        ]
    results = [arm(name, args.out, model, tasks, args, **sections) for name, sections in plans]
    header = (
        f"{'arm':<15}{'groups/min':>11}{'trainer wait':>14}{'gen idle':>10}{'sync share':>12}"
        f"{'sync s':>8}{'stale max':>10}  staleness (tokens)"
    )
    print(header)
    for r in results:
        print(
            f"{r['arm']:<15}{r['groups_per_min']:>11.2f}{r['trainer_wait']:>14.1%}"
            f"{r['gen_idle']:>10.1%}{r['sync_share']:>12.1%}{r['sync_s_mean']:>8.2f}"
            f"{r['staleness_max']:>10}  {r['staleness_tokens']}"
        )
    by_name = {r["arm"]: r for r in results}
    for suffix in ("+latency", ""):
        sync, asyn = by_name.get(f"sync{suffix}"), by_name.get(f"async{suffix}")
        if sync and asyn:
            ratio = asyn["groups_per_min"] / sync["groups_per_min"]
            print(
                f"async / sync, trained groups per minute{suffix or ' (no latency)'}: x{ratio:.2f}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
