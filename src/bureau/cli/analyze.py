"""`bureau analyze RUN`: root causes of a run's failures, per-tool and per-template tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer


def analyze_command(
    run: Annotated[
        Path, typer.Argument(help="A run folder (eval, preeval, bootstrap record) or trials/.")
    ],
    examples: Annotated[int, typer.Option(min=0, help="Example trials per cause.")] = 3,
    min_attributed: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=1,
            help="Drills: exit 1 unless at least this share of the injected faults is "
            "attributed to its cause and none is counted as a model failure.",
        ),
    ] = None,
) -> None:
    """Give each failed or below-1 trial one root cause (model, tool defect, missing
    dependency, harness, verifier, infrastructure) with the turn where it happened, and count
    every incident, recovered or not. Writes analysis.json and analysis.md into RUN. When the
    run injected faults, also checks the analysis against them."""
    from bureau.cli.commands import console
    from bureau.evaluation.analysis import analyze, check_against_truth, write_analysis

    if not any(run.glob("result.json")) and not any(run.glob("**/result.json")):
        console.print(f"error: {run}: expected a run folder with trial results", markup=False)
        raise typer.Exit(2)
    found = analyze(run, examples)
    checked = check_against_truth(found, run)
    truth = checked if checked["injected"] else None
    report = write_analysis(run, found, truth)
    print_analysis(found, truth)
    console.print(f"{run / 'analysis.json'} and {report} written")
    if min_attributed is not None:
        ok = (
            truth is not None
            and (truth["attributed_share"] or 0) >= min_attributed
            and not truth["counted_as_model_failures"]
        )
        raise typer.Exit(0 if ok else 1)


def print_analysis(found: dict[str, Any], truth: dict[str, Any] | None) -> None:
    from rich.table import Table

    from bureau.cli.commands import console

    console.print(
        f"{found['final_attempts']} trials ({found['retried_attempts']} attempts retried): "
        f"{found['completed']} completed, {found['system_errors']} system errors, "
        f"{found['failures']} failed or below reward 1"
    )
    table = Table(title="root causes")
    for column in ("cause", "failures", "share", "what", "first example (turn)"):
        table.add_column(column)
    for cause, row in found["root_causes"].items():
        if not row["count"]:
            continue
        what = ", ".join(f"{k} {n}" for k, n in row["details"].items())
        first = row["examples"][0]
        example = f"{first['trial']} ({first['turn']})"
        table.add_row(cause, str(row["count"]), f"{row['share_of_failures']:.0%}", what, example)
    console.print(table)
    tools = Table(title="tools")
    for column in ("tool", "calls", "errors", "failed", "p50 s", "p95 s"):
        tools.add_column(column)
    for name, t in found["tools"].items():
        tools.add_row(
            name, str(t["calls"]), str(t["tool_errors"]), str(t["failed"]),
            f"{t['latency_p50_s']:.3f}", f"{t['latency_p95_s']:.3f}",
        )  # fmt: skip
    console.print(tools)
    recovered = sum(i["count"] for i in found["incidents"] if i["recovered"])
    console.print(
        f"incidents: {recovered} recovered, "
        f"{sum(i['count'] for i in found['incidents']) - recovered} not"
    )
    if found["overran"]:
        console.print(f"[red]past their time limits:[/] {', '.join(found['overran'])}")
    if truth is not None:
        console.print(
            f"drill check: {truth['attributed']} of {truth['injected']} injected faults "
            f"attributed ({truth['attributed_share']:.1%}); "
            f"{len(truth['counted_as_model_failures'])} counted as model failures"
        )
