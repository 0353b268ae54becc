"""`bureau demo`: build small train and eval sets, grade them, run sandboxed trials, drive a
tiny model through the harness, and run the asynchronous RL loop on Ray; one summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bureau.cli.commands import build, grade, print_build_report, print_grade_summary
from bureau.cli.common import console, task_dirs
from bureau.worlds.builder import BuildConfig


def run_demo(out: Path, seed: int, jobs: int) -> int:
    """Small train and eval sets (every domain), oracle and empty grading in-process, then the
    eval set as real sandboxed trials with the oracle and nop agents; one summary."""
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
        ok = run_demo_harness(out, results) and ok
        ok = run_demo_loop(out, results) and ok
    (out / "demo-summary.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    verdict = "[green]all checks passed[/]" if ok else "[red]some tasks are broken[/]"
    console.print(f"{verdict}; summary in {out / 'demo-summary.json'}")
    return 0 if ok else 1


def run_demo_harness(out: Path, results: dict[str, Any]) -> bool:
    """A tiny model (random, then warm-started on the tool-call format; both kept in
    `out/models` for the next run) drives 6 eval tasks through the harness and the built-in
    engine; the token-in/token-out audit checks the run."""
    console.rule("agent harness (tiny model, built-in engine)")
    try:
        import torch  # noqa: F401
    except ImportError:
        console.print("[yellow]skipping the harness:[/] torch is not installed (train extra)")
        return True
    from bureau.audit.tito import audit_run
    from bureau.cli.check import load_tasks
    from bureau.cli.harness_check import run_harness_check
    from bureau.harness.loop import HarnessConfig
    from bureau.harness.warmstart import DEFAULT_TOOLS, warm_start
    from bureau.models.checkpoint import init_checkpoint

    models = out / "models"
    base, tools_model = models / "tiny-qwen3", models / "tiny-tools"
    if not (base / "config.json").is_file():
        init_checkpoint("qwen3", 2, 64, base, overwrite=True)
    config = HarnessConfig(
        tool_prefixes=list(DEFAULT_TOOLS), max_turns=6, context_length=4096, max_tokens_per_turn=96
    )
    if not (tools_model / "config.json").is_file():
        console.print("warm-starting the tiny model on the tool-call format (about 2 minutes)")
        losses = warm_start(base, tools_model, task_dirs(out / "train")[:24])
        console.print(f"warm start: loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    run = out / "harness"
    shutil.rmtree(run, ignore_errors=True)
    code = run_harness_check(
        load_tasks(out / "eval", 6),
        model=tools_model,
        engine="builtin",
        engine_urls=[],
        out=run,
        harness=config,
        concurrency=3,
        max_starting=3,
        isolation="bwrap",
        agent_timeout_s=300,
    )
    report = audit_run(run, None)
    for line in report.lines()[:4]:
        console.print(line, markup=False, highlight=False)
    results["harness"] = {"exit_code": code, "audit": report.to_dict()}
    return code == 0 and not report.token_mismatches


def run_demo_loop(out: Path, results: dict[str, Any]) -> bool:
    """Three steps of `bureau train` (local Ray: the built-in engine, a trainer, a rollout worker
    with sandboxes and tools, weight pushes) with the warm-started tiny model, on synthetic
    coin-flip tasks: the loop's machinery, not learning (the tiny model solves no real task, so
    real tasks would give no learning signal; see the README)."""
    console.rule("asynchronous RL loop on Ray (machinery check on coin-flip tasks)")
    tools_model = out / "models" / "tiny-tools"
    if not (tools_model / "config.json").is_file():
        console.print("[yellow]skipping the loop:[/] no warm-started model")
        return True
    from bureau.config import validate_config
    from bureau.loop.config import RunConfig
    from bureau.loop.run import train
    from bureau.loop.synthetic import run_config, write_answer_tasks

    tasks = out / "loop-tasks"
    shutil.rmtree(tasks, ignore_errors=True)
    write_answer_tasks(tasks, 8, domain_cycle=("law", "consulting", "banking"))
    run = out / "loop"
    shutil.rmtree(run, ignore_errors=True)
    tree = run_config(run, tools_model.resolve(), tasks, None, steps=3)
    config = validate_config(RunConfig, tree, "demo loop config")
    rows: list[dict[str, Any]] = []
    step = train(config, say=lambda line: console.print(line, highlight=False), on_step=rows.append)
    for m in rows:
        console.print(
            f"step {m['step']}: reward {m.get('rollout/reward', float('nan')):.2f}, "
            f"trainer wait {m['perf/trainer_wait_ratio']:.0%}, "
            f"weight sync {m.get('weights/sync_s', 0.0):.2f} s, "
            f"staleness max {m['staleness/group_max']}, "
            f"system errors {m.get('rollout/system_errors', 0)}",
            highlight=False,
        )
    results["loop"] = {"steps": step, "run": str(run)}
    return step == 3
