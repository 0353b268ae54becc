"""The training tasks in a seeded order, and where the run is in it.

Position p of the stream is task `order(epoch)[offset]` with `epoch, offset = divmod(p, n)`:
each pass over the tasks is a fresh shuffle that depends only on the seed and the epoch. A group
is identified by its position (`g000042/bureau/law-3-x`), so the same task in two epochs is two
groups. The stream's state is what a resumed run needs: the next position, and the positions
handed out but not yet finished (in flight or waiting in the buffer when the run stopped), which
are handed out again first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bureau.loop.config import TaskFilter
from bureau.loop.rollout import TaskRef
from bureau.tasks.taskdir import read_prompt


def load_tasks(root: Path, selection: TaskFilter | None = None) -> list[TaskRef]:
    """The tasks of a dataset folder, filtered, in name order; errors name the broken task."""
    from bureau.tasks.dataset import load_dataset
    from bureau.tasks.support import require_runnable

    dataset = load_dataset(root)
    selection = selection or TaskFilter()
    tasks: list[TaskRef] = []
    for task_id in sorted(dataset.task_ids):
        task = dataset.load_task(task_id)
        require_runnable(task)
        meta = task.config.metadata
        ref = TaskRef(
            name=task.name,
            path=str(task.path.resolve()),
            domain=str(meta.get("domain", "unknown")),
            template=str(meta.get("template", "")),
            unseen_kind=unseen if isinstance(unseen := meta.get("held_out_kind"), bool) else None,
        )
        if selection.domains is not None and ref.domain not in selection.domains:
            continue
        if selection.templates is not None and ref.template not in selection.templates:
            continue
        tasks.append(ref)
    if selection.max_tasks is not None:
        tasks = tasks[: selection.max_tasks]
    if not tasks:
        raise ValueError(f"{root}: no task left after the filter {selection.model_dump()}")
    return tasks


def trained_on(eval_tasks: Sequence[TaskRef], train_tasks: Sequence[TaskRef]) -> list[str]:
    """The evaluation tasks that are not held out: a training task's folder, or a training
    task's instruction word for word (whitespace aside)."""

    def text(task: TaskRef) -> str:
        return " ".join(read_prompt(Path(task.path)).split())

    paths = {t.path for t in train_tasks}
    instructions = {text(t) for t in train_tasks}
    return [t.name for t in eval_tasks if t.path in paths or text(t) in instructions]


def group_id(position: int, task: TaskRef) -> str:
    return f"g{position:06d}/{task.name}"


def position_of(group: str) -> int:
    """The stream position in a group id made by `group_id`."""
    return int(group.split("/", 1)[0][1:])


class TaskStream:
    """An endless seeded stream of tasks; `next()` hands out (position, task)."""

    def __init__(self, tasks: Sequence[TaskRef], seed: int = 0) -> None:
        if not tasks:
            raise ValueError("no tasks to train on")
        self.tasks = list(tasks)
        self.seed = seed
        self.next_position = 0
        self.pending: set[int] = set()
        """Positions handed out and not yet finished (trained, dropped or filtered)."""
        self._requeue: list[int] = []
        self._orders: dict[int, list[int]] = {}
        self.dropped: set[str] = set()
        """Tasks found broken (`bureau.trials.defects`): never handed out again."""

    def task_at(self, position: int) -> TaskRef:
        epoch, offset = divmod(position, len(self.tasks))
        if epoch not in self._orders:
            order = list(range(len(self.tasks)))
            random.Random(f"bureau-loop:{self.seed}:{epoch}").shuffle(order)
            self._orders[epoch] = order
        return self.tasks[self._orders[epoch][offset]]

    def next(self) -> tuple[int, TaskRef]:
        """The next position and its task, skipping dropped tasks."""
        if len(self.dropped) >= len({task.name for task in self.tasks}):
            raise ValueError("every task was dropped as broken: nothing left to train on")
        while True:
            if self._requeue:
                position = self._requeue.pop(0)
            else:
                position = self.next_position
                self.next_position += 1
            task = self.task_at(position)
            if task.name not in self.dropped:
                self.pending.add(position)
                return position, task
            self.pending.discard(position)

    def drop(self, task_name: str) -> None:
        """Hand out `task_name` no more (its verifier fails on its oracle)."""
        self.dropped.add(task_name)

    def done(self, position: int) -> None:
        """The group at `position` is finished for good (trained, dropped or filtered)."""
        self.pending.discard(position)

    def state(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "num_tasks": len(self.tasks),
            "next_position": self.next_position,
            "pending": sorted(self.pending | set(self._requeue)),
            "dropped": sorted(self.dropped),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from `state`: unfinished groups run again, first, in position order."""
        if state.get("num_tasks") != len(self.tasks) or state.get("seed") != self.seed:
            raise ValueError(
                f"the checkpoint's task stream ({state.get('num_tasks')} tasks, seed "
                f"{state.get('seed')}) is not this run's ({len(self.tasks)} tasks, seed "
                f"{self.seed}): resume with the same data and seed"
            )
        self.next_position = int(state["next_position"])
        self._requeue = sorted(int(p) for p in state["pending"])
        self.pending = set()
        self.dropped = {str(name) for name in state.get("dropped", [])}
