"""Grades a dataset's oracle or empty answers in-process, without a sandbox.

For each task: copy `environment/workspace` to a temporary folder, produce the answers (run the
oracle solution, or nothing), grade, and throw the copy away. bureau-generated tasks carry a
`solve.py` with a `solve(params, workspace)` function and a `tests/rubric.json`; both are run
in-process, which avoids a Python start per task. Any other Harbor task falls back to
`solution/solve.sh` and `tests/test.sh` as subprocesses, with the workspace and verifier folder
passed through `BUREAU_WORKSPACE` and `BUREAU_VERIFIER_DIR`.

A multi-step task (`[[steps]]`) runs its steps in order on one workspace, as a trial does: each
step's oracle (or nothing), then that step's grading; its reward is the mean over the steps.

This is a data check, not isolation: the sandboxed version is `bureau tasks check`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Literal

from bureau.grading.grader import grade
from bureau.grading.rubric import load_rubric
from bureau.tasks.reward import read_reward
from bureau.tasks.taskdir import step_names

AnswerMode = Literal["oracle", "empty"]
SCRIPT_TIMEOUT_S = 300.0


@dataclass
class TaskOutcome:
    task_id: str
    ok: bool  # the task behaved as expected for the answer mode
    reward: float | None = None
    passed: bool | None = None
    error: str | None = None  # the task is broken: an exception, not a low score
    failed_criteria: list[str] = field(default_factory=list)
    seconds: float = 0.0


_SOLVERS: dict[str, ModuleType] = {}


def _load_solver(solution_dir: Path) -> ModuleType | None:
    """The task's solve.py as a module, if it exposes `solve(params, workspace)`."""
    script = solution_dir / "solve.py"
    if not (script.exists() and (solution_dir / "params.json").exists()):
        return None
    digest = hashlib.sha256(script.read_bytes()).hexdigest()[:16]
    if digest not in _SOLVERS:
        lib = solution_dir / "oracle_lib.py"
        if lib.exists() and "oracle_lib" not in sys.modules:
            _import_file("oracle_lib", lib)
        _SOLVERS[digest] = _import_file(f"bureau_oracle_{digest}", script)
    module = _SOLVERS[digest]
    return module if callable(getattr(module, "solve", None)) else None


def _import_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _script_env(workspace: Path, verifier_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "BUREAU_WORKSPACE": str(workspace),
        "BUREAU_VERIFIER_DIR": str(verifier_dir),
    }


def _run_script(
    script: Path, workspace: Path, verifier_dir: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script)],
        cwd=workspace,
        env=_script_env(workspace, verifier_dir),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )


def run_oracle(task_dir: Path, workspace: Path, verifier_dir: Path) -> None:
    solution = task_dir / "solution"
    solver = _load_solver(solution)
    if solver is not None:
        solver.solve(json.loads((solution / "params.json").read_text()), workspace)
        return
    proc = _run_script(solution / "solve.sh", workspace, verifier_dir)
    if proc.returncode != 0:
        raise RuntimeError(f"solution/solve.sh exited {proc.returncode}: {proc.stderr[-500:]}")


def grade_workspace(
    task_dir: Path, workspace: Path, verifier_dir: Path
) -> tuple[float, bool, list[str]]:
    """(reward, passed, reasons of failed criteria) for the answers now in `workspace`."""
    rubric_path = task_dir / "tests" / "rubric.json"
    if rubric_path.exists():
        # No judge offline: LLM-judge criteria are left out (the reward is over the others).
        report = grade(load_rubric(rubric_path), workspace)
        failed = [f"{r.id}: {r.reason}" for r in report.results if not r.passed]
        return report.reward, report.num_passed == len(report.results), failed
    proc = _run_script(task_dir / "tests" / "test.sh", workspace, verifier_dir)
    reward = read_reward(verifier_dir)  # a missing or bad reward file raises: a verifier error
    detail = [] if proc.returncode == 0 else [f"test.sh exited {proc.returncode}"]
    return reward.reward, reward.reward >= 1.0, detail


def _parts(task_dir: Path) -> list[Path]:
    """The task's own folder, or its steps' folders in order (`[[steps]]` in task.toml)."""
    return [task_dir / "steps" / name for name in step_names(task_dir)] or [task_dir]


def check_task(task_dir: Path, mode: AnswerMode) -> TaskOutcome:
    started = time.perf_counter()
    outcome = TaskOutcome(task_id=task_dir.name, ok=False)
    with tempfile.TemporaryDirectory(prefix="bureau-grade-") as tmp:
        workspace = Path(tmp) / "workspace"
        verifier_dir = Path(tmp) / "logs" / "verifier"
        verifier_dir.mkdir(parents=True)
        source = task_dir / "environment" / "workspace"
        if source.is_dir():
            shutil.copytree(source, workspace)
        else:
            workspace.mkdir()
        (workspace / "output").mkdir(exist_ok=True)
        try:
            rewards, passed, failed = [], True, []
            for part in _parts(task_dir):
                if mode == "oracle":
                    run_oracle(part, workspace, verifier_dir)
                step_reward, step_passed, step_failed = grade_workspace(
                    part, workspace, verifier_dir
                )
                rewards.append(step_reward)
                passed = passed and step_passed
                prefix = f"{part.name}/" if part != task_dir else ""
                failed += [prefix + reason for reason in step_failed]
            reward = sum(rewards) / len(rewards)
        except Exception as exc:  # a broken task is reported, never raised
            outcome.error = f"{type(exc).__name__}: {exc}"[:400]
            outcome.failed_criteria = traceback.format_exc().splitlines()[-6:]
        else:
            outcome.reward, outcome.passed, outcome.failed_criteria = reward, passed, failed
            outcome.ok = reward == 1.0 if mode == "oracle" else reward == 0.0
    outcome.seconds = time.perf_counter() - started
    return outcome


def _check_one(args: tuple[Path, AnswerMode]) -> TaskOutcome:
    return check_task(*args)


def check_tasks(
    task_dirs: list[Path],
    mode: AnswerMode,
    *,
    jobs: int = 2,
    on_result: Callable[[TaskOutcome], None] | None = None,
) -> list[TaskOutcome]:
    work = [(d, mode) for d in task_dirs]
    out: list[TaskOutcome] = []
    with contextlib.ExitStack() as stack:
        results: Iterator[TaskOutcome] = map(_check_one, work)
        if jobs > 1:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=jobs))
            results = pool.map(_check_one, work, chunksize=4)
        for r in results:
            out.append(r)
            if on_result:
                on_result(r)
    return out


@dataclass
class CheckSummary:
    mode: AnswerMode
    tasks: int
    as_expected: int
    broken: list[TaskOutcome]
    wrong: list[TaskOutcome]  # graded, but not 1.0 for oracle / not 0.0 for empty
    mean_reward: float
    pass_rate: float
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.broken and not self.wrong

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def summarize(mode: AnswerMode, outcomes: list[TaskOutcome], seconds: float) -> CheckSummary:
    graded = [o for o in outcomes if o.error is None]
    n = max(1, len(graded))
    return CheckSummary(
        mode=mode,
        tasks=len(outcomes),
        as_expected=sum(1 for o in outcomes if o.ok),
        broken=[o for o in outcomes if o.error is not None],
        wrong=[o for o in graded if not o.ok],
        mean_reward=sum(o.reward or 0.0 for o in graded) / n,
        pass_rate=sum(1 for o in graded if o.passed) / n,
        seconds=round(seconds, 1),
    )
