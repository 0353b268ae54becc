"""How long world generation takes, and how much disk it uses.

    .venv/bin/python bench/worlds.py                 # full train (1928 tasks) and eval (480)
    .venv/bin/python bench/worlds.py --quick         # 12-world splits, for a fast look
    .venv/bin/python bench/worlds.py --grade         # also time oracle grading of the eval split
    .venv/bin/python bench/worlds.py --difficulty hard --splits eval --jobs 1 --out /tmp/hard

Prints the build time of each split, disk use (hard links counted once), and, measured side by
side in the same run, the speed-up of two worker processes over one on the same worlds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from bureau.checks.offline import check_tasks, summarize
from bureau.worlds.builder import BuildConfig, build_split

FIGURES = (
    "files_per_world",
    "messages_per_world",
    "scanned_pdfs",
    "avg_criteria",
    "deliverable_fraction",
    "infeasible_fraction",
    "held_out_kind_fraction",
    "evidence_files",
    "tasks_by_kind",
)
"""What the build report says of the split, printed beside the timings."""


def timed_build(cfg: BuildConfig) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    report = build_split(cfg)
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="keep the datasets here")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--grade", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--difficulty", choices=["standard", "hard"], default="standard")
    parser.add_argument("--splits", nargs="+", choices=["train", "eval"], default=["train", "eval"])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes of the full builds")
    parser.add_argument("--no-speedup", action="store_true", help="skip the 1-vs-2 workers run")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bureau-bench-"))
    sizes = (
        {"train": (12, 206), "eval": (12, 175)}
        if args.quick
        else {
            "train": (112, 1928),
            "eval": (33, 480),
        }
    )
    results: dict[str, object] = {}
    for split, (worlds, tasks) in sizes.items():
        if split not in args.splits:
            continue
        cfg = BuildConfig(
            split, worlds, tasks, args.seed, root / split, args.difficulty, jobs=args.jobs,
            force=True,
        )  # fmt: skip
        seconds, report = timed_build(cfg)
        row: dict[str, object] = {
            "worlds": worlds,
            "tasks": tasks,
            "files": report["files"],
            "seconds": round(seconds, 1),
            "ms_per_task": round(1000 * seconds / tasks, 1),
            "disk_mib": round(int(report["disk_bytes"]) / 2**20, 1),  # type: ignore[call-overload]
            **{key: report[key] for key in FIGURES},
        }
        results[split] = row
        print(
            f"{split:5s}: {worlds} worlds, {tasks} tasks, {report['files']} files in "
            f"{seconds:.1f} s, {row['disk_mib']} MiB on disk"
        )
    if not args.no_speedup:
        # Side by side: the same 6 worlds with one and with two worker processes.
        one, _ = timed_build(BuildConfig("eval", 6, 90, 99, root / "j1", jobs=1, force=True))
        two, _ = timed_build(BuildConfig("eval", 6, 90, 99, root / "j2", jobs=2, force=True))
        results["jobs_speedup"] = round(one / two, 2)
        print(f"6 worlds: 1 worker {one:.1f} s, 2 workers {two:.1f} s, speed-up x{one / two:.2f}")
    if args.grade and "eval" in args.splits:
        dirs = sorted(p for p in (root / "eval").iterdir() if (p / "task.toml").exists())
        started = time.perf_counter()
        summary = summarize("oracle", check_tasks(dirs, "oracle", jobs=2), 0.0)
        seconds = time.perf_counter() - started
        results["eval_oracle_grading"] = {
            "seconds": round(seconds, 1),
            "as_expected": summary.as_expected,
            "tasks": summary.tasks,
        }
        print(
            f"oracle grading of eval: {summary.as_expected}/{summary.tasks} at 1.0 in "
            f"{seconds:.1f} s"
        )
    print(json.dumps(results, indent=2))
    if args.out is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
