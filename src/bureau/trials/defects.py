"""Task defects: a verifier that fails on the task's own oracle solution.

A trial that ends in a verifier error (`verifier_error`, `reward_file_missing`,
`verifier_timeout`) is masked, whoever's fault it was. If the same verifier also fails on the
task's oracle (`solution/solve.sh`), the task itself is broken: retrying cannot help, and every
later attempt at it would only add another masked trial. `TaskDefects` runs the oracle once
per suspected task (concurrent suspicions share the run), and a task whose oracle fails the
verifier is dropped for the rest of the run and reported with the oracle's trial.

An oracle that fails for another reason (its sandbox did not start, say) proves nothing, and
the task stays.

When the oracle passes the same verifier, the verifier works and it was the agent's output
that broke it (its reruns crashed on that output too): the trial is the agent's failure,
graded 0 (`settle`), never a masked trial a policy could learn to produce. A verifier timeout
is left masked: a loaded machine can cause one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bureau.errors import SystemErrorKind as Kind
from bureau.sandbox.base import Runtime
from bureau.tasks.taskdir import TaskDir
from bureau.trials.result import COMPLETED, TrialResult

VERIFIER_KINDS = frozenset(
    {Kind.verifier_error.value, Kind.reward_file_missing.value, Kind.verifier_timeout.value}
)


OUTPUT_KINDS = frozenset({Kind.verifier_error.value, Kind.reward_file_missing.value})
"""Verifier failures the agent's output can cause (a timeout is left to the machine)."""


def suspect(result: TrialResult) -> bool:
    """Whether `result` could be a task defect: the verifier failed."""
    return result.status in VERIFIER_KINDS


class TaskDefects:
    """Oracle checks of suspected tasks, and the tasks found broken; see the module docstring."""

    def __init__(self, runtime: Runtime, trials_dir: Path) -> None:
        self.runtime, self.trials_dir = runtime, trials_dir
        self.found: dict[str, dict[str, Any]] = {}
        """Broken tasks: name -> the oracle's trial, its status and the message."""
        self._checks: dict[str, asyncio.Task[bool]] = {}

    def dropped(self, task_name: str) -> bool:
        return task_name in self.found

    async def check(self, task: TaskDir) -> bool:
        """Whether `task`'s verifier fails on its oracle (run once per task)."""
        if task.name not in self._checks:
            self._checks[task.name] = asyncio.create_task(self._run_oracle(task))
        return await asyncio.shield(self._checks[task.name])

    async def _run_oracle(self, task: TaskDir) -> bool:
        from bureau.trials.agents import OracleAgent
        from bureau.trials.trial import run_trial

        self.trials_dir.mkdir(parents=True, exist_ok=True)
        result = await run_trial(task, OracleAgent(), self.runtime, self.trials_dir)
        if not suspect(result):
            return False
        message = result.exception_info.exception_message if result.exception_info else ""
        self.found[task.name] = {
            "task": task.name,
            "path": str(task.path),
            "oracle_trial": str(self.trials_dir / result.trial_name),
            "status": result.status,
            "message": message[:300],
        }
        return True

    async def settle(self, task: TaskDir, result: TrialResult) -> None:
        """After a trial whose verifier failed: mark the task broken, or, when the oracle
        passes, grade the trial 0 as the agent's (see the module docstring)."""
        if not suspect(result):
            return
        if await self.check(task):
            result.task_defect = self.found[task.name]
        elif result.status in OUTPUT_KINDS:
            message = result.exception_info.exception_message if result.exception_info else ""
            result.status, result.reward, result.exception_info = COMPLETED, 0.0, None
            result.verifier_result = {
                "rewards": {"reward": 0.0},
                "verifier_failed_on_output": message[:300],
            }

    def report(self) -> list[dict[str, Any]]:
        return [self.found[name] for name in sorted(self.found)]
