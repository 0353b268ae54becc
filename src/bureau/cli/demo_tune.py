"""`bureau demo-tune`: choose the demo's RL settings on the validation split, never on eval.

The demo reports held-out Pass@1 on its eval worlds; a setting chosen by looking at those
numbers would make them a tuning score, not a held-out one. Here the same policy the demo
prepares (`demo_rl.prepare_policy`: worlds, copy pretraining, the teacher's recording, SFT) is
trained once per candidate setting (`--set`-style overrides of `configs/cpu-demo.toml`), each
run evaluated before and after on the validation split (`bureau worlds build --split
validation`: other worlds, built like eval from their own part of every pool). The eval split
is built (the preparation is the demo's) but never read.

The candidates share one evaluation of the starting policy (the first run's); each is scored
by the paired per-task difference of validation Pass@1, after over before, on the trained
templates, and the one with the highest difference is named. A tuning seed is one the demo's
reported runs then do not count as untouched.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from bureau.cli.common import console
from bureau.cli.demo_rl import DemoSizes, prepare_policy, rl_config, summarize

RESULT_FILE = "tuning.json"


def tune_demo(
    out: Path,
    *,
    seed: int,
    jobs: int,
    candidates: list[list[str]],
    sizes: DemoSizes | None = None,
    reuse: bool = False,
) -> dict[str, Any]:
    """Prepare the demo's policy under `out/rl` (or reuse one there with `reuse`), train it
    once per candidate into `out/candidate-N`, evaluating on `out/rl/validation`; write and
    return `out/tuning.json`."""
    from bureau.loop.controller import LoopStalled
    from bureau.loop.run import train

    if not candidates:
        raise ValueError("no candidate settings to compare")
    sizes = sizes or DemoSizes()
    root = out / "rl"
    validation = root / "validation"
    walls: dict[str, float] = {}
    if reuse and (root / "sft" / "weights").is_dir() and validation.is_dir():
        console.print(f"reusing the policy and validation split in {root}", highlight=False)
    else:
        shutil.rmtree(root, ignore_errors=True)
        walls = prepare_policy(root, seed=seed, jobs=jobs, sizes=sizes)
    before: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = []
    for index, overrides in enumerate(candidates):
        run = out / f"candidate-{index}"
        shutil.rmtree(run, ignore_errors=True)
        console.rule(f"candidate {index}: {' '.join(overrides) or '(the config as it is)'}")
        shared = [] if before is None else ["eval.at_start=false"]
        config = rl_config(
            root, seed=seed, sizes=sizes, evaluate_on=validation, out=run,
            overrides=[*overrides, *shared],
        )  # fmt: skip
        started = time.perf_counter()
        row: dict[str, Any] = {"candidate": index, "overrides": overrides, "run": str(run)}
        try:
            row["steps"] = train(config, say=lambda line: console.print(line, highlight=False))
        except LoopStalled as stalled:
            console.print(f"[red]candidate {index} stopped:[/] {stalled}", highlight=False)
            rows.append({**row, "error": str(stalled), "wall_s": time.perf_counter() - started})
            continue
        evals = json.loads((run / "evals.json").read_text())
        before = before or evals[0]
        verdict = summarize(
            before["report"], evals[-1]["report"], seed=seed, untrained=sizes.transfer,
            title="validation Pass@1 (worlds of their own, never trained on), 95% intervals",
        )  # fmt: skip
        overall = verdict.comparison["overall"]["pass_at_1"]
        row |= {
            "difference": None if overall is None else overall["difference"],
            "low": None if overall is None else overall["low"],
            "high": None if overall is None else overall["high"],
            "before": None if overall is None else overall["before"],
            "after": None if overall is None else overall["after"],
            "wall_s": time.perf_counter() - started,
        }
        rows.append(row)
    scored = [r for r in rows if r.get("difference") is not None]
    chosen = max(scored, key=lambda r: r["difference"]) if scored else None
    result = {
        "seed": seed,
        "split": str(validation),
        "prepare_wall_s": walls,
        "candidates": rows,
        "chosen": None if chosen is None else chosen["candidate"],
    }
    (out / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for r in rows:
        score = (
            r.get("error", "stopped")
            if r.get("difference") is None
            else f"{r['before']:.3f} -> {r['after']:.3f}, paired {r['difference']:+.3f} "
            f"[{r['low']:+.3f}, {r['high']:+.3f}]"
        )
        mark = " (chosen)" if chosen is r else ""
        console.print(
            f"candidate {r['candidate']}{mark}: {' '.join(r['overrides']) or '(as is)'}: {score}",
            highlight=False,
            markup=False,
        )
    return result
