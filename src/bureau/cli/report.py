"""`bureau report RUN`: one self-contained HTML page of a run, for a person to look at."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_command(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run folder: of `bureau train`, `bureau eval`, `bureau preeval` or "
            "`bureau tasks check --agent harness`."
        ),
    ],
    out: Annotated[
        Path | None, typer.Option(help="The HTML file to write (default: RUN/report.html).")
    ] = None,
) -> None:
    """Write the run's report: reward and Pass@1 over steps (trained and held out, with
    intervals), domains and templates, the error taxonomy, stop reasons, staleness, the
    sampler/trainer mismatch, throughput and trainer wait, weight-sync times and the resolved
    config. One HTML file with everything inline: it opens offline."""
    from bureau.cli.common import console
    from bureau.report.run import NotARun

    try:
        from bureau.report.page import write_report

        path = write_report(run, out)
    except ModuleNotFoundError as exc:
        console.print(
            f"error: {exc.name} is missing: install bureau with the report extra "
            "(pip install -e '.[report]')",
            markup=False,
        )
        raise typer.Exit(2) from exc
    except NotARun as exc:
        console.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from exc
    console.print(f"report: {path}", markup=False, highlight=False)
