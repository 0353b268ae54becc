"""`bureau audit`: checks on stored runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

audit_app = typer.Typer(help="Audit stored runs.", no_args_is_help=True)


@audit_app.command("tito")
def audit_tito(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run folder (trajectories.parquet, or a `bureau train` run's trajectories/), "
            "or a Parquet file."
        ),
    ],
    model: Annotated[
        Path | None,
        typer.Option(
            help="Checkpoint for the logprob check (default: run.json's, or a train run's "
            "starting model, for what version 0 sampled)."
        ),
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Also write the report as JSON here.")] = None,
) -> None:
    """Token-in/token-out audit: stored tokens vs sampled ids and fixed-base observations,
    trainer-side logprobs vs the sampler's, and the drift a naive re-tokenization would cause.
    Exits 1 when any trajectory's tokens do not match."""
    from bureau.audit.tito import audit_run
    from bureau.cli.common import console

    try:
        result = audit_run(run, model)
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    for line in result.lines():
        console.print(line, markup=False, highlight=False)
    if report is not None:
        report.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    raise typer.Exit(1 if result.token_mismatches else 0)
