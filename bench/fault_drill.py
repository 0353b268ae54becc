"""The fault drill: at least 200 real trials under every kind of injected fault, then the
analysis checked against what was injected (`bureau.evaluation.drill`).

Builds a starter dataset (the scripted teacher's tasks, with its seeded mistakes) and a
dataset with LLM-judge criteria (the oracle's tasks, graded through the judge client against a
reference-matching judge on 127.0.0.1), and a tiny checkpoint for its tokenizer, in a temporary
folder; runs both under the given fault rates with training's retries; prints the figures:
system errors after retries, injected faults attributed to their cause at their place, faults
that ended in a failure put on the model, trials past their time limits.

    .venv/bin/python bench/fault_drill.py --rate 0.05 --attempts 12 --judged-attempts 40
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bureau.evaluation.drill import DrillConfig, run_drill
from bureau.trials.faults import FAULT_CAUSES, FaultConfig


def build_inputs(root: Path, seed: int) -> tuple[Path, Path, Path]:
    from bureau.models.checkpoint import init_checkpoint
    from bureau.worlds.builder import BuildConfig, build_split

    model = root / "model"
    init_checkpoint("qwen3", out=model, seed=0, layers=2, hidden=64, heads=2, kv_heads=1)
    starter = root / "starter"
    build_split(BuildConfig("train", 3, 15, seed, starter, difficulty="starter", jobs=1))
    judged = root / "judged"
    build_split(
        BuildConfig("train", 3, 30, seed, judged, files_per_world=20, jobs=1, judge_criteria=True)
    )
    return starter, judged, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=0.05, help="Rate of every fault kind.")
    parser.add_argument("--attempts", type=int, default=12, help="Per starter task (15 tasks).")
    parser.add_argument("--judged-attempts", type=int, default=40, help="Per judged task.")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="Keep the run here.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bureau-drill-") as tmp:
        starter, judged, model = build_inputs(Path(tmp), args.seed)
        out = args.out or Path(tmp) / "run"
        rates = {kind: args.rate for kind in FAULT_CAUSES}
        figures = run_drill(
            DrillConfig(
                starter=starter,
                judged=judged,
                model=model,
                out=out,
                attempts=args.attempts,
                judged_attempts=args.judged_attempts,
                faults=FaultConfig(**rates, engine_stall_s=1.0, seed=args.seed),
                concurrency=args.concurrency,
            )
        )
    print(json.dumps(figures, indent=2))
    print(
        f"{figures['trials']} trials ({figures['attempts']} attempts), every fault kind at "
        f"{args.rate:.0%}: system errors after retries {figures['system_errors']} "
        f"({figures['system_error_rate']:.2%}); injected faults {figures['injected']}, "
        f"attributed to their cause {figures['attributed']} ({figures['attributed_share']:.1%}); "
        f"counted as model failures {figures['counted_as_model_failures']}; "
        f"past their time limit {figures['overran']}; {figures['wall_s']} s"
    )


if __name__ == "__main__":
    main()
