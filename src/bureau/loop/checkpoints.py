"""Checkpoint folders of a run: one per step, and a pointer to the newest complete one.

`checkpoint/step-000004/` holds the trainer's state (`trainer/`) and the loop's
(`loop_state.json`, written last). Only once both are on disk does `checkpoint/latest` (replaced
atomically) name the folder, and only then are older folders removed, keeping the previous one.
A run killed at any instant, mid-save included, therefore always finds a complete checkpoint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

LOOP_STATE = "loop_state.json"
LATEST = "latest"


def step_folder(root: Path, version: int) -> Path:
    return root / f"step-{version:06d}"


def write_loop_state(folder: Path, state: dict[str, Any]) -> None:
    """The loop's state beside a trainer checkpoint (written by the trainer side, last)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (LOOP_STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(folder / LOOP_STATE)


def read_loop_state(folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((folder / LOOP_STATE).read_text())
    return result


def commit(root: Path, folder: Path, keep: int = 2) -> None:
    """Point `latest` at `folder` (complete), then drop all but the newest `keep` folders."""
    if not (folder / LOOP_STATE).is_file():
        raise RuntimeError(f"checkpoint {folder} is incomplete: no {LOOP_STATE}")
    tmp = root / (LATEST + ".tmp")
    tmp.write_text(folder.name + "\n")
    tmp.replace(root / LATEST)
    folders = sorted(p for p in root.glob("step-*") if p.is_dir())
    for old in folders[:-keep]:
        if old != folder:
            shutil.rmtree(old, ignore_errors=True)


def latest(root: Path) -> Path | None:
    """The newest complete checkpoint folder, or None."""
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    folder = root / pointer.read_text().strip()
    return folder if (folder / LOOP_STATE).is_file() else None
