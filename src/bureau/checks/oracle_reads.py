"""Which workspace files a task's oracle reads, and which of them its answer needs.

The oracle (`solution/solve.py`) is a program that reads the workspace and writes the answer,
as an agent would. Two figures, for every template whether or not its spec lists `evidence`:

- **Opened** (`trace_reads`): run in this process with a Python audit hook on `open`, the
  regular files under the workspace it opens for reading (not `output/`, which holds what
  earlier steps or the oracle itself wrote; a folder listing is not a read). An oracle that
  scans every mail for the latest word on a contract opens them all.
- **Needed** (`needed_files`): of those, the files without which the oracle's answer no longer
  passes the task's rubric (or the oracle fails): each is moved away in turn, the oracle runs
  on the rest, and its answer is graded. The latest email that moved a date is needed; the
  older ones it overrides are not. This is the evidence a correct answer must find.

A multi-step task's steps run in order on one workspace: the files of all steps together.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bureau.checks.offline import _load_solver, _parts, grade_workspace, run_oracle

_local = threading.local()
_installed = False
_install_lock = threading.Lock()


def _hook(event: str, args: tuple[Any, ...]) -> None:
    seen: set[str] | None = getattr(_local, "seen", None)
    if seen is None or event != "open":
        return
    path, mode = args[0], args[1]
    if isinstance(path, int | type(None)):
        return
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return
    if isinstance(mode, int) and mode & 0o3:  # os.open with O_WRONLY or O_RDWR
        return
    seen.add(str(path))


def _ensure_hook() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)  # cannot be removed; inert unless a trace is on
            _installed = True


@dataclass
class OracleReads:
    """The files (relative to the workspace) one task's oracle read, per part."""

    task: str
    parts: dict[str, list[str]] = field(default_factory=dict)

    @property
    def files(self) -> list[str]:
        return sorted({f for files in self.parts.values() for f in files})


def trace_reads(task_dir: Path, workspace: Path | None = None) -> OracleReads:
    """Run the task's oracle on a copy of its workspace (or on `workspace`, which it writes
    into) and return the files it read. Raises when the task has no in-process oracle or the
    oracle fails."""
    task_dir = Path(task_dir)
    result = OracleReads(task_dir.name)
    with tempfile.TemporaryDirectory(prefix="bureau-reads-") as scratch:
        if workspace is None:
            workspace = Path(scratch) / "workspace"
            shutil.copytree(task_dir / "environment" / "workspace", workspace)
        root = workspace.resolve()
        _ensure_hook()
        for part in _parts(task_dir):
            solver = _load_solver(part / "solution")
            if solver is None:
                raise ValueError(f"{part}: no solution/solve.py with solve(params, workspace)")
            params = json.loads((part / "solution" / "params.json").read_text())
            seen: set[str] = set()
            _local.seen = seen
            try:
                solver.solve(params, workspace)
            finally:
                _local.seen = None
            name = part.name if part != task_dir else "task"
            result.parts[name] = _under(root, seen)
    return result


def needed_files(task_dir: Path, opened: list[str] | None = None) -> list[str]:
    """The files of `opened` (default: `trace_reads`) that the oracle's passing answer needs;
    see the module docstring. One oracle run and grading per opened file."""
    task_dir = Path(task_dir)
    if opened is None:
        opened = trace_reads(task_dir).files
    needed = []
    with tempfile.TemporaryDirectory(prefix="bureau-needed-") as scratch:
        workspace = Path(scratch) / "workspace"
        shutil.copytree(task_dir / "environment" / "workspace", workspace)
        if not _oracle_passes(task_dir, workspace, Path(scratch) / "verifier"):
            raise ValueError(f"{task_dir}: the oracle's answer does not pass its own rubric")
        # Files in groups first (about sqrt(n) of them): a group the oracle still passes
        # without holds no needed file, so only the failing groups are split file by file.
        size = max(1, math.isqrt(len(opened)))
        for start in range(0, len(opened), size):
            group = opened[start : start + size]
            if len(group) > 1 and _passes_without(task_dir, workspace, Path(scratch), group):
                continue
            needed += [
                f for f in group if not _passes_without(task_dir, workspace, Path(scratch), [f])
            ]
    return needed


def task_targets(task_dir: Path) -> list[str]:
    """The files an agent must find for the task: those its answer needs, or, when no single
    file is needed (its facts are repeated elsewhere, or the files cannot support an answer
    and the answer is null either way), every file the oracle opens."""
    opened = trace_reads(task_dir).files
    return needed_files(task_dir, opened) or opened


def _passes_without(task_dir: Path, workspace: Path, scratch: Path, files: list[str]) -> bool:
    """Whether the oracle's answer passes with `files` moved out of the workspace."""
    aside = scratch / "aside"
    aside.mkdir(exist_ok=True)
    moved = []
    try:
        for n, rel in enumerate(files):
            shutil.move(workspace / rel, aside / str(n))
            moved.append(rel)
        return _oracle_passes(task_dir, workspace, scratch / "verifier")
    finally:
        for n, rel in enumerate(moved):
            shutil.move(aside / str(n), workspace / rel)


def _oracle_passes(task_dir: Path, workspace: Path, verifier: Path) -> bool:
    shutil.rmtree(workspace / "output", ignore_errors=True)
    (workspace / "output").mkdir()
    shutil.rmtree(verifier, ignore_errors=True)
    verifier.mkdir()
    for part in _parts(task_dir):
        try:
            run_oracle(part, workspace, verifier)
            passed = grade_workspace(part, workspace, verifier)[1]
        except Exception:  # the oracle or the grader failed without the file: needed
            return False
        if not passed:
            return False
    return True


def _under(root: Path, opened: set[str]) -> list[str]:
    files = set()
    for raw in opened:
        path = Path(raw)
        path = (path if path.is_absolute() else Path.cwd() / path).resolve()
        if not path.is_file():
            continue
        try:
            rel = path.relative_to(root)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] != "output":
            files.add(rel.as_posix())
    return sorted(files)
