"""`bureau demo`: build small train and eval sets, grade them, run sandboxed trials, then the
main job (`bureau.cli.demo_rl`): bootstrap a tiny policy and show that asynchronous RL on Ray
raises its Pass@1 on held-out worlds; one summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bureau.cli.commands import build, grade, print_build_report, print_grade_summary
from bureau.cli.common import console
from bureau.worlds.builder import BuildConfig


def run_demo(out: Path, seed: int, jobs: int) -> int:
    """Small train and eval sets (every domain), oracle and empty grading in-process, the eval
    set as real sandboxed trials with the oracle and nop agents, then bootstrap + RL judged on
    held-out worlds; one summary."""
    console.rule("bureau demo")
    results: dict[str, dict[str, Any]] = {}
    ok = True
    for split, worlds, tasks in (("train", 6, 60), ("eval", 3, 24)):
        cfg = BuildConfig(split, worlds, tasks, seed, out / split, jobs=jobs, force=True)
        report = build(cfg)
        print_build_report(report)
        results[split] = {"build": report}
        for mode in ("oracle", "empty"):
            summary = grade(out / split, mode, jobs)
            print_grade_summary(f"{split}", summary)
            results[split][mode] = summary.to_dict()
            ok = ok and summary.ok
    console.rule("sandboxed trials")
    from bureau.cli.check import run_check
    from bureau.sandbox import get_runtime

    try:
        get_runtime("local").close()
    except Exception as exc:  # no bubblewrap here: the rest of the demo still stands
        console.print(f"[yellow]skipping sandboxed trials:[/] {exc}")
    else:
        for agent in ("oracle", "nop"):
            shutil.rmtree(out / f"trials-{agent}", ignore_errors=True)
            code = run_check(out / "eval", agent, 4, "bwrap", out / f"trials-{agent}", 4)
            results["eval"][f"sandboxed_{agent}_ok"] = code == 0
            ok = ok and code == 0
        ok = _run_rl(out, results, seed, jobs) and ok
    (out / "demo-summary.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    checks = "[green]every task check passed[/]" if ok else "[red]some tasks are broken[/]"
    rl = results.get("rl")
    if rl is None:
        learned = "RL did not run"
    elif rl.get("improved"):
        learned = "[green]RL improved held-out Pass@1[/]"
    else:
        learned = "[red]RL did not improve held-out Pass@1 on this run[/]"
    console.print(f"{checks}; {learned}; summary in {out / 'demo-summary.json'}")
    if rl is not None and rl.get("report"):
        console.print(f"report of the RL run (open it in a browser): {rl['report']}")
    return 0 if ok else 1


def _run_rl(out: Path, results: dict[str, Any], seed: int, jobs: int) -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        console.print("[yellow]skipping RL:[/] torch is not installed (train extra)")
        return True
    from bureau.cli.demo_rl import run_demo_rl

    # A measurement, not a check: the demo fails only if a stage breaks (an exception); whether
    # RL improved held-out Pass@1 is the verdict of the summary and of the final line.
    run_demo_rl(out, results, seed=seed, jobs=jobs)
    return True
