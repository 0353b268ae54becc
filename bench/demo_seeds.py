"""The demo's held-out Pass@1 pooled over several seeds' runs, per template.

    .venv/bin/python bench/demo_seeds.py runs/demo-101 runs/demo-102 runs/demo-103

Each folder is one `bureau demo --seed S --out DIR` (its `rl/run/evals.json`, first and last
evaluation). The seeds' eval worlds are other companies, so their tasks are independent: they
are pooled (renamed `S/task`), and every interval is the paired per-task difference, after over
before, with a bootstrap that resamples tasks across all the seeds (`compare_reports`). Rows:
the trained templates together, each trained template, the trained templates whose eval prompts
copy a span no training prompt showed (`rl/novelty.json`, in every seed), and the transfer
template apart.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bureau.cli.demo_rl import TRANSFER
from bureau.evaluation.report import EvalReport, PairedEstimate, compare_reports


def pooled(runs: list[Path]) -> tuple[EvalReport, EvalReport, set[str]]:
    """The first and the last evaluation of every run, one report each with every run's tasks,
    and the templates that some run's novelty report says copy nothing new."""
    firsts, lasts, nothing_new = [], [], set()
    for run in runs:
        evals = json.loads((run / "rl" / "run" / "evals.json").read_text())
        for reports, found in ((firsts, evals[0]), (lasts, evals[-1])):
            report = EvalReport.model_validate(found["report"])
            tag = f"{report.seed}:{run.name}"
            renamed = [t.model_copy(update={"task": f"{tag}/{t.task}"}) for t in report.tasks]
            reports.append(report.model_copy(update={"tasks": renamed}))
        novelty = json.loads((run / "rl" / "novelty.json").read_text())
        nothing_new |= set(novelty.get("needs_nothing_new", []))

    def merge(reports: list[EvalReport]) -> EvalReport:
        return reports[0].model_copy(update={"tasks": [t for r in reports for t in r.tasks]})

    return merge(firsts), merge(lasts), nothing_new


def only(report: EvalReport, keep: set[str]) -> EvalReport:
    return report.model_copy(update={"tasks": [t for t in report.tasks if t.template in keep]})


def row(name: str, found: PairedEstimate | None) -> str:
    if found is None:
        return f"{name:<48} -"
    return (
        f"{name:<48} {found.tasks:>5}  {found.before:.3f} -> {found.after:.3f}  "
        f"{found.difference:+.3f} [{found.low:+.3f}, {found.high:+.3f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="`bureau demo --out` folders")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    args = parser.parse_args()
    before, after, nothing_new = pooled(args.runs)
    templates = {t.template for t in before.tasks if t.template} - {TRANSFER}
    print(f"{len(args.runs)} runs; paired difference of held-out Pass@1, tasks resampled")
    print(f"{'':<48} {'tasks':>5}  before -> after  difference [95% interval]")
    trained = compare_reports(only(after, templates), only(before, templates), seed=args.seed)
    print(row("trained templates", trained.overall.pass_at_1))
    for name in sorted(templates):
        marked = f"{name} (nothing new)" if name in nothing_new else name
        print(row(marked, trained.templates[name].pass_at_1))
    novel = templates - nothing_new
    found = compare_reports(only(after, novel), only(before, novel), seed=args.seed)
    print(row("templates that copy new spans", found.overall.pass_at_1))
    moved = compare_reports(only(after, {TRANSFER}), only(before, {TRANSFER}), seed=args.seed)
    print(row(f"transfer: {TRANSFER}", moved.overall.pass_at_1))


if __name__ == "__main__":
    main()
