"""`bureau train --config run.toml`: fully asynchronous RL on Ray (see `bureau.loop`).

The command line is parsed before torch or Ray are imported, so `--help` is instant.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer


def train_command(
    config: Annotated[Path, typer.Option(help="Run config (TOML); see configs/.")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a key: --set async.max_staleness=2 (repeatable)."),
    ] = None,
    preeval: Annotated[
        bool | None,
        typer.Option(
            "--preeval/--no-preeval",
            help="Pre-evaluate the starting policy on the training tasks first, and train only "
            "if its system-error gate passes (the config's preeval.enabled otherwise).",
        ),
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="An existing Ray cluster (ray start --head gives it).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Run folder (overrides the config's out).")
    ] = None,
) -> None:
    """Train a policy with RL on the worlds: rollouts, buffer, trainer and engines on Ray."""
    from bureau.config import ConfigError, load_config
    from bureau.loop.config import RunConfig

    overrides = list(set_ or [])
    if preeval is not None:
        overrides.append(f"preeval.enabled={'true' if preeval else 'false'}")
    if ray_address:
        overrides.append(f'ray.address="{ray_address}"')
    if out is not None:
        overrides.append(f'out="{out}"')
    try:
        run_config = load_config(RunConfig, config, overrides)
    except ConfigError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None

    from rich.console import Console

    from bureau.loop.run import train

    console = Console()
    progress = StepLine(console, run_config.steps) if run_config.logging.progress else None
    from bureau.evaluation.preeval import PreevalFailed
    from bureau.loop.controller import LoopStalled

    try:
        step = train(
            run_config,
            say=lambda line: console.print(line, highlight=False),
            on_step=progress,
        )
    except (LoopStalled, PreevalFailed) as error:
        console.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(1) from None
    console.print(f"reached step {step}; run folder {run_config.out}")


class StepLine:
    """One line per step: reward, Pass@1, staleness, trainer wait, weight sync, ETA."""

    def __init__(self, console: Any, steps: int) -> None:
        self.console = console
        self.steps = steps
        self.started = time.perf_counter()
        self.first_step: int | None = None

    def __call__(self, m: dict[str, Any]) -> None:
        step = int(m["step"])
        if self.first_step is None:
            self.first_step = step - 1
        done = step - self.first_step
        elapsed = time.perf_counter() - self.started
        eta = elapsed / done * (self.steps - step) if done else 0.0
        self.console.print(
            f"step {step}/{self.steps}  reward {m.get('rollout/reward', float('nan')):.3f}  "
            f"pass@1 {m.get('rollout/pass_at_1', float('nan')):.3f}  "
            f"staleness max {m.get('staleness/group_max', 0)}  "
            f"trainer wait {m.get('perf/trainer_wait_ratio', 0.0):.0%}  "
            f"sync {m.get('weights/sync_s', 0.0):.2f}s  "
            f"errors {m.get('rollout/system_errors', 0)}  ETA {eta:.0f}s",
            highlight=False,
        )
