"""What every command shares: the console, the progress bar, the tasks of a dataset argument.

Command modules import this and never each other's siblings at module level, so `bureau.cli`
has no import cycle.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from bureau.tasks.dataset import load_dataset

console = Console(soft_wrap=True)  # never break paths and error lines


def progress_bar() -> Progress:
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def task_dirs(root: Path) -> list[Path]:
    """The task folders of `root`: itself when it is one task, else its dataset's tasks."""
    if (root / "task.toml").exists():
        return [root]
    dataset = load_dataset(root)
    return [dataset.task_path(task_id) for task_id in dataset.task_ids]
