"""The harness fixes, each switched off in turn, against all on: the same policy, the same
eval tasks, side by side in one run.

The fixes: regeneration after an unparsable tool call (`max_parse_retries`: the model is told
what was wrong and samples again; off = the episode ends at the first unparsable call), tool
output truncation (`max_tool_output_chars`: a long result keeps its head and tail; off = the
whole result enters the context), and the context notice (`context_warning_fraction`: one
warning when the context runs low; off = none). Each setting runs `bureau eval`'s trials
(sandboxes, tools, built-in engine) with a fixed sampling seed per attempt, so the settings
differ only where the fix acts. Printed: mean reward and Pass@1 with 95% intervals per
setting, and the paired per-task difference against all-on with its bootstrap interval.

Layout-aware PDF reading has no switch yet: the tool server reads every PDF layout-aware.

With `--explorer`, the policy is the scripted explorer (`bureau.bootstrap.explorer`) instead of
a model: on standard and hard tasks it searches and reads far more than the tiny CPU policy,
so the fixes have something to act on. Printed per setting: how often each fix acted, the
explorer's mean reward and tool calls, and its stop reasons. (`--model` then only gives the
tokenizer; `--per-template` picks the tasks.)

    .venv/bin/python bench/harness_ablation.py --explorer --model MODEL \
        --tasks /tmp/eval-hard --per-template 2

    make demo   # the bootstrapped and RL-trained CPU policy, and its held-out worlds
    .venv/bin/python bench/harness_ablation.py --model runs/demo/rl/run/weights \\
        --tasks runs/demo/rl/eval --template law.starter_register_value \\
        --harness runs/demo/rl/run/config.resolved.toml --attempts 3
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bureau.evaluation.report import AttemptRow
from bureau.evaluation.run import EvalConfig, load_eval_tasks, run_eval
from bureau.evaluation.stats import bootstrap_mean_interval, paired_task_differences
from bureau.harness.loop import HarnessConfig

SETTINGS: dict[str, dict[str, Any]] = {
    "all on": {},
    "no regeneration after a parse failure": {"max_parse_retries": 0},
    "no tool output truncation": {"max_tool_output_chars": 10_000_000},
    "no context notice": {"context_warning_fraction": 0.0},
}


def settings_of(base: HarnessConfig) -> dict[str, HarnessConfig]:
    return {name: base.model_copy(update=change) for name, change in SETTINGS.items()}


def base_harness(path: Path | None) -> HarnessConfig:
    """The harness the policy was trained with: a run config's [rollout.harness], a harness
    TOML, or the bootstrap's teacher harness."""
    import tomllib

    from bureau.bootstrap.config import teacher_harness

    if path is None:
        return teacher_harness()
    tree = tomllib.loads(path.read_text())
    return HarnessConfig.model_validate(tree.get("rollout", {}).get("harness", tree))


def fixes_acted(parquet: Path) -> dict[str, int]:
    """How often each fix had something to act on, over a run's trajectories
    (`bureau.harness.loop.harness_events`)."""
    from bureau.harness.loop import harness_events
    from bureau.records import read_parquet

    records = read_parquet(parquet)
    totals = {"trajectories": len(records)}
    for record in records:
        for name, count in harness_events(record).items():
            totals[name] = totals.get(name, 0) + count
    return totals


def graded(rows: list[AttemptRow], field: str) -> list[tuple[str, float]]:
    return [
        (r.task, float(r.passed) if field == "pass" else float(r.reward or 0.0))
        for r in rows
        if not r.excluded
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="A checkpoint folder.")
    parser.add_argument("--tasks", type=Path, required=True, help="Eval dataset folder.")
    parser.add_argument("--harness", type=Path, default=None, help="Run config or harness TOML.")
    parser.add_argument("--template", action="append", help="Only tasks of these templates.")
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/harness-ablation"))
    parser.add_argument("--explorer", action="store_true", help="The scripted explorer.")
    parser.add_argument("--per-template", type=int, default=2, help="With --explorer.")
    parser.add_argument(
        "--context-length", type=int, default=32768, help="With --explorer, no --harness."
    )
    args = parser.parse_args()
    if args.explorer:
        explorer_ablation(args)
        return
    tasks = [
        t
        for t in load_eval_tasks(args.tasks)
        if not args.template or t.task.config.metadata.get("template") in args.template
    ]
    if not tasks:
        parser.error(f"{args.tasks}: no task of templates {args.template}")
    results: dict[str, Any] = {}
    rows_of: dict[str, list[AttemptRow]] = {}
    for name, harness in settings_of(base_harness(args.harness)).items():
        config = EvalConfig(
            attempts=args.attempts, concurrency=args.concurrency, seed=args.seed, harness=harness
        )
        started = time.perf_counter()
        run = run_eval(args.tasks, tasks, args.model, config, args.out / name.replace(" ", "-"))
        rows_of[name] = run.rows
        overall = run.report.overall
        acted = fixes_acted(run.out / "trajectories.parquet")
        results[name] = {
            "mean_reward": overall.mean_reward.model_dump(),
            "pass_at_1": overall.pass_at_1.model_dump(),
            "graded": overall.graded,
            "system_errors": overall.system_errors,
            "wall_s": round(time.perf_counter() - started, 1),
            "fixes_acted": acted,
        }
    base = rows_of["all on"]
    for name, rows in rows_of.items():
        for field, key in (("reward", "reward_diff"), ("pass", "pass_diff")):
            diffs = paired_task_differences(graded(rows, field), graded(base, field))
            mean = sum(diffs) / len(diffs) if diffs else None
            results[name][key] = {
                "mean": mean,
                "interval": bootstrap_mean_interval(diffs, seed=args.seed),
            }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    print("| setting | mean reward [95% CI] | Pass@1 [95% CI] | Δ reward | Δ Pass@1 |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {_estimate(r['mean_reward'])} | {_estimate(r['pass_at_1'])} "
            f"| {_diff(r['reward_diff'])} | {_diff(r['pass_diff'])} |"
        )
    for name, r in results.items():
        acted = ", ".join(f"{k} {v}" for k, v in r["fixes_acted"].items())
        print(f"{name}: {acted}")
    print(f"{args.out / 'ablation.json'} written")


def explorer_ablation(args: argparse.Namespace) -> None:
    """Each setting with the scripted explorer on up to `--per-template` tasks per template."""
    from collections import Counter

    from bureau.bootstrap.explorer import explore
    from bureau.checks.oracle_reads import task_targets
    from bureau.tasks.taskdir import step_names

    manifest = json.loads((args.tasks / "bureau-dataset.json").read_text())
    taken: Counter[str] = Counter()
    paths = []
    for task in manifest["tasks"]:
        template = task["template"]
        if args.template and template not in args.template:
            continue
        if taken[template] < args.per_template and not step_names(args.tasks / task["path"]):
            taken[template] += 1
            paths.append(args.tasks / task["path"])
    # The explorer's own harness: every tool group and a real context (the teacher's harness,
    # the default of the model ablation, has 4,096 tokens and a few tools: a first run with it
    # ended 14 of 41 explorations on an exhausted context at 8 tool calls).
    if args.harness is not None:
        base = base_harness(args.harness).model_copy(update={"max_turns": 150})
    else:
        length = args.context_length
        base = HarnessConfig(max_turns=150, context_length=length, max_tokens=length)
    evidence = {f"bureau/{p.name}": task_targets(p) for p in paths}
    results: dict[str, Any] = {}
    for name, harness in settings_of(base).items():
        started = time.perf_counter()
        out = args.out / name.replace(" ", "-")
        rows = explore(
            paths, args.model, harness, out, concurrency=args.concurrency, evidence=evidence
        )
        ran = [r for r in rows if not r.system_error]
        results[name] = {
            "tasks": len(rows),
            "system_errors": len(rows) - len(ran),
            "mean_reward": sum(r.reward or 0.0 for r in ran) / max(1, len(ran)),
            "mean_tool_calls": sum(r.tool_calls for r in ran) / max(1, len(ran)),
            "evidence_read": sum(r.evidence_read for r in ran)
            / max(1, sum(r.evidence for r in ran)),
            "stop_reasons": dict(Counter(str(r.stop_reason) for r in ran).most_common()),
            "longest_trajectory_tokens": max((r.trajectory_tokens for r in ran), default=0),
            "fixes_acted": fixes_acted(out / "trajectories.parquet"),
            "wall_s": round(time.perf_counter() - started, 1),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        "| setting | tasks | mean reward | tool calls | evidence read | stop reasons "
        "| fixes acted |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        acted = ", ".join(f"{k} {v}" for k, v in r["fixes_acted"].items() if k != "trajectories")
        print(
            f"| {name} | {r['tasks']} | {r['mean_reward']:.3f} | {r['mean_tool_calls']:.1f} "
            f"| {r['evidence_read']:.2f} | {r['stop_reasons']} | {acted} |"
        )
    print(f"{args.out / 'ablation.json'} written")


def _estimate(e: dict[str, Any]) -> str:
    value = e.get("rate", e.get("mean"))
    low, high = e.get("low"), e.get("high")
    if value is None:
        return "n/a"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]" if low is not None else f"{value:.3f}"


def _diff(d: dict[str, Any]) -> str:
    if d["mean"] is None:
        return "n/a"
    low, high = d["interval"]
    return f"{d['mean']:+.3f} [{low:+.3f}, {high:+.3f}]"


if __name__ == "__main__":
    main()
