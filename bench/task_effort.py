"""How much finding and reading a task takes, per template and per difficulty.

For a sample of a built split's tasks (up to `--per-template` of each template, in dataset
order), two figures (see `bureau.checks.oracle_reads` and `bureau.bootstrap.explorer`):

- files the oracle opens, and of those the files its answer needs (moved away, the oracle's
  answer no longer passes);
- tool calls of the scripted explorer, which finds those files through the MCP tools (tree,
  content search, reads by type) in a real sandboxed trial with the harness given, and the files
  it reads. Its reward is printed: it writes the answer keys, not file deliverables.

Multi-step tasks are listed but neither traced nor explored (the explorer plays one step).

    .venv/bin/python -m bureau.cli.main worlds build --split eval --out /tmp/eval-std
    .venv/bin/python bench/task_effort.py /tmp/eval-std --model MODEL --per-template 3
    .venv/bin/python bench/task_effort.py /tmp/eval-hard --model MODEL --per-template 3

`MODEL` is any checkpoint folder with the Qwen tokenizer (the explorer's turns are tokenized as
a model's would be): `tests` build one, or `bureau model init`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bureau.bootstrap.explorer import explore
from bureau.checks.oracle_reads import needed_files, trace_reads
from bureau.harness.loop import HarnessConfig
from bureau.tasks.taskdir import step_names


def sample(dataset: Path, per_template: int, templates: list[str] | None) -> list[dict[str, Any]]:
    manifest = json.loads((dataset / "bureau-dataset.json").read_text())
    taken: dict[str, int] = defaultdict(int)
    chosen = []
    for task in manifest["tasks"]:
        template = task["template"]
        if templates and template not in templates:
            continue
        if taken[template] < per_template:
            taken[template] += 1
            chosen.append(task)
    return chosen


def files_of(path: str) -> dict[str, Any]:
    if step_names(Path(path)):
        return {"opened": None, "needed": [], "opened_files": []}  # see the module docstring
    opened = trace_reads(Path(path)).files
    needed = needed_files(Path(path), opened)
    return {"opened": len(opened), "needed": needed, "opened_files": opened}


def spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(ordered):g} / {p90:g}"


def weighted_spread(values: list[tuple[float, float]]) -> str:
    """Median / p90 of (value, weight) pairs: each sampled task stands for its template's
    share of the split's tasks, so the figure is the split's, not the sample's."""
    if not values:
        return "n/a"
    ordered = sorted(values)
    total = sum(w for _, w in ordered)

    def quantile(q: float) -> float:
        seen = 0.0
        for value, weight in ordered:
            seen += weight
            if seen >= q * total - 1e-9:
                return value
        return ordered[-1][0]

    return f"{quantile(0.5):g} / {quantile(0.9):g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--model", type=Path, required=True, help="Tokenizer source.")
    parser.add_argument("--per-template", type=int, default=3)
    parser.add_argument("--template", action="append", help="Only these templates.")
    parser.add_argument("--jobs", type=int, default=2, help="Processes for the oracle runs.")
    parser.add_argument("--concurrency", type=int, default=2, help="Explorer trials at once.")
    parser.add_argument("--max-turns", type=int, default=150)
    parser.add_argument("--context-length", type=int, default=262144)
    parser.add_argument("--isolation", default="bwrap")
    parser.add_argument("--out", type=Path, default=Path("runs/task-effort"))
    args = parser.parse_args()

    tasks = sample(args.dataset, args.per_template, args.template)
    if not tasks:
        parser.error(f"{args.dataset}: no task matches")
    started = time.perf_counter()
    paths = [str(args.dataset / t["path"]) for t in tasks]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        files = dict(zip([t["task_id"] for t in tasks], pool.map(files_of, paths), strict=True))
    oracle_s = time.perf_counter() - started
    # A context the exploration never runs out of: the figure is what finding the files takes,
    # not what fits in 32k tokens (`bench/harness_ablation.py --explorer` keeps the default).
    harness = HarnessConfig(
        max_turns=args.max_turns, context_length=args.context_length, max_tokens=args.context_length
    )
    started = time.perf_counter()
    # The explorer's targets (`task_targets`): the files the answer needs, or when no single
    # file is (a fact repeated elsewhere; a null answer to what the files cannot support), the
    # files the oracle opens.
    targets = {
        f"bureau/{t['task_id']}": files[t["task_id"]]["needed"]
        or files[t["task_id"]]["opened_files"]
        for t in tasks
    }
    rows = explore(
        [args.dataset / t["path"] for t in tasks],
        args.model,
        harness,
        args.out,
        isolation=args.isolation,
        concurrency=args.concurrency,
        evidence=targets,
    )
    explore_s = time.perf_counter() - started
    explored = {r.task.removeprefix("bureau/"): r for r in rows}

    by_template: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for task in tasks:
        row = explored.get(task["task_id"])
        by_template[task["template"]].append({**task, **files[task["task_id"]], "row": row})
    print(
        "| template | tasks | files needed (median / p90) | files opened | explorer calls "
        "(median / p90) | files it read | its reward |"
    )
    print("|---|---|---|---|---|---|---|")
    summary: dict[str, Any] = {"templates": {}}
    for template, items in sorted(by_template.items()):
        ran = [i["row"] for i in items if i["row"] is not None and not i["row"].system_error]
        line = {
            "tasks": len(items),
            "needed": [len(i["needed"]) for i in items],
            "opened": [i["opened"] for i in items if i["opened"] is not None],
            "calls": [r.tool_calls for r in ran],
            "read": [r.files_read for r in ran],
            "reward": [r.reward or 0.0 for r in ran],
        }
        summary["templates"][template] = line
        reward = f"{statistics.mean(line['reward']):.2f}" if ran else "n/a"
        steps = " (multi-step: not explored)" if any(i.get("steps") for i in items) else ""
        print(
            f"| {template}{steps} | {len(items)} | {spread(line['needed'])} | "
            f"{spread(line['opened'])} | {spread(line['calls'])} | {spread(line['read'])} "
            f"| {reward} |"
        )
    single = [r for r in rows if not r.system_error]
    every_needed = [len(files[t["task_id"]]["needed"]) for t in tasks]
    # Each sampled task weighted by its template's tasks in the whole split over those sampled.
    manifest = json.loads((args.dataset / "bureau-dataset.json").read_text())["tasks"]
    in_split = Counter(t["template"] for t in manifest)
    sampled = Counter(t["template"] for t in tasks)
    weight = {name: in_split[name] / sampled[name] for name in sampled}
    weighted_needed = [(len(files[t["task_id"]]["needed"]), weight[t["template"]]) for t in tasks]
    weighted_calls = [
        (float(explored[t["task_id"]].tool_calls), weight[t["template"]])
        for t in tasks
        if t["task_id"] in explored and not explored[t["task_id"]].system_error
    ]
    overall = {
        "tasks": len(tasks),
        "explored": len(single),
        "system_errors": sum(1 for r in rows if r.system_error),
        "needed": spread(every_needed),
        "calls": spread([r.tool_calls for r in single]),
        "needed_in_split": weighted_spread(weighted_needed),
        "calls_in_split": weighted_spread(weighted_calls),
        "truncated_results": sum(r.truncated_outputs for r in single),
        "context_notices": sum(r.context_notices for r in single),
        "longest_trajectory_tokens": max((r.trajectory_tokens for r in single), default=0),
        "stop_reasons": dict(Counter(str(r.stop_reason) for r in single).most_common()),
        "oracle_s": round(oracle_s, 1),
        "explore_s": round(explore_s, 1),
    }
    summary["overall"] = overall
    print(
        f"all: {overall['tasks']} tasks, {overall['explored']} explored "
        f"({overall['system_errors']} system errors); files needed {overall['needed']}; "
        f"explorer calls {overall['calls']} (median / p90); weighted to the split's tasks: "
        f"files needed {overall['needed_in_split']}, explorer calls "
        f"{overall['calls_in_split']}; truncated results "
        f"{overall['truncated_results']}, context notices {overall['context_notices']}, "
        f"longest trajectory {overall['longest_trajectory_tokens']} tokens; stop reasons "
        f"{overall['stop_reasons']}; oracle runs {oracle_s:.0f} s, explorer {explore_s:.0f} s"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "effort.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
