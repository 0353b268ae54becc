"""`bureau train --config run.toml`: fully asynchronous RL on Ray (see `bureau.loop`).

The command line is parsed before torch or Ray are imported, so `--help` is instant.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
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

    from bureau.evaluation.preeval import PreevalFailed
    from bureau.loop.controller import LoopStalled
    from bureau.loop.run import train
    from bureau.loop.status import RunStatus

    console = Console()
    status = RunStatus()
    progress = Progress(console, run_config.steps, status, run_config.logging.heartbeat_s)
    shown = run_config.logging.progress
    try:
        with progress if shown else contextlib.nullcontext():
            step = train(
                run_config,
                say=progress.say,
                on_step=progress.step if shown else None,
                on_eval=progress.evaluated if shown else None,
                status=status,
            )
    except (LoopStalled, PreevalFailed) as error:
        console.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(1) from None
    console.print(f"reached step {step}; run folder {run_config.out}")


class Progress:
    """What `bureau train` prints: the run's own lines, one line per step (reward, Pass@1,
    staleness, groups dropped as stale, trainer wait, weight sync, errors, ETA), one per
    evaluation (its Pass@1 with the interval), and, whenever nothing was printed for
    `heartbeat_s` (while used as a context manager), what the run is doing or waiting for: a
    run that waits never looks like a slow one."""

    def __init__(
        self,
        console: Any,
        steps: int,
        status: Any = None,
        heartbeat_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.steps = steps
        self.status = status
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.started = clock()
        self.first_step: int | None = None
        self.last_print = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def print(self, line: str) -> None:
        with self._lock:
            self.console.print(line, highlight=False, markup=False)
            self.last_print = self.clock()

    def say(self, line: str) -> None:
        self.print(line)

    def step(self, m: dict[str, Any]) -> None:
        step = int(m["step"])
        if self.first_step is None:
            self.first_step = step - 1
        done = step - self.first_step
        elapsed = self.clock() - self.started
        eta = elapsed / done * (self.steps - step) if done else 0.0
        self.print(
            f"step {step}/{self.steps}  reward {m.get('rollout/reward', float('nan')):.3f}  "
            f"pass@1 {m.get('rollout/pass_at_1', float('nan')):.3f}  "
            f"staleness max {m.get('staleness/group_max', 0)}  "
            f"dropped stale {int(m.get('buffer/dropped_stale', 0))}  "
            f"trainer wait {m.get('perf/trainer_wait_ratio', 0.0):.0%}  "
            f"sync {m.get('weights/sync_s', 0.0):.2f}s  "
            f"errors {m.get('rollout/system_errors', 0)}  ETA {eta:.0f}s"
        )

    def evaluated(self, result: dict[str, Any]) -> None:
        which = "held-out" if result.get("held_out", True) else "evaluation (not held out)"
        rate = result.get("pass_at_1")
        shown = (
            "n/a"
            if rate is None
            else (
                f"{rate:.3f} [{result.get('pass_at_1_low', 0.0):.3f}, "
                f"{result.get('pass_at_1_high', 0.0):.3f}]"
            )
        )
        reward = result.get("reward")
        self.print(
            f"{which} Pass@1 {shown} at step {result.get('version', '?')} "
            f"({result.get('label', '')}): reward "
            f"{'n/a' if reward is None else f'{reward:.3f}'}, {result.get('graded', 0)} graded, "
            f"{result.get('system_errors', 0)} system errors, {result.get('time_s', 0.0):.0f} s"
        )

    def beat(self) -> bool:
        """Print what the run is doing if nothing was printed for `heartbeat_s`."""
        if self.status is None or self.clock() - self.last_print < self.heartbeat_s:
            return False
        self.print(f"... {self.status.describe()}")
        return True

    def __enter__(self) -> Progress:
        def watch() -> None:
            while not self._stop.wait(min(1.0, self.heartbeat_s / 4)):
                self.beat()

        self._thread = threading.Thread(target=watch, name="bureau-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
