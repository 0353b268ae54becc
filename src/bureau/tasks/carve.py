"""A validation split carved out of a training dataset, by whole worlds.

Hyperparameters are chosen on tasks the policy is not trained on, without touching the reported
evaluation split: `carve_validation` moves the task folders of some of a dataset's worlds into a
dataset of their own (its manifest's split is "validation", each task keeps its "train"
metadata) and rewrites the source's manifest without them, so nothing that reads the training
dataset afterwards (the teacher's recording, SFT, `bureau train`) sees those worlds.

Which worlds: the last ones of each domain by world id, taken from the domains in turn, so the
split has the domains in the proportions of the source. Task folders are moved (a rename), which
keeps the hard links the builder made between a world's tasks.

The validation split is held out the way the evaluation split is: a carved task whose
instruction is word for word (whitespace aside) the instruction of a task left to train on is
not moved but deleted, and counted, so tuning never scores a prompt the policy trained on.
"""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path

from bureau.tasks.dataset import (
    MANIFEST_FILE,
    UNKNOWN,
    ManifestEntry,
    load_dataset,
    write_manifest,
)
from bureau.tasks.errors import TaskFormatError, TaskFormatErrors
from bureau.tasks.taskdir import load_task_dir

VALIDATION = "validation"


@dataclass(frozen=True)
class Carved:
    source: Path
    out: Path
    worlds: tuple[str, ...]
    """The worlds moved, in the order they were chosen."""
    tasks: int
    """Task folders moved."""
    left: int
    """Tasks left in the source."""
    duplicates: int = 0
    """Tasks of the carved worlds deleted because their instruction is a training one."""


def choose_worlds(world_domains: dict[str, str], count: int) -> list[str]:
    """`count` worlds, the domains in turn (sorted by name), each giving its last world by id
    first. `world_domains` maps world id to domain."""
    by_domain: dict[str, list[str]] = {}
    for world, domain in sorted(world_domains.items()):
        by_domain.setdefault(domain, []).append(world)
    lasts = [list(reversed(worlds)) for _, worlds in sorted(by_domain.items())]
    turns = itertools.chain.from_iterable(itertools.zip_longest(*lasts))
    return [w for w in turns if w is not None][:count]


def carve_validation(source: Path, count: int, out: Path) -> Carved:
    """Move `count` worlds' tasks from the dataset at `source` into a new dataset at `out`.

    Raises TaskFormatErrors when `source` has no manifest naming the tasks' worlds, when it has
    `count` worlds or fewer (nothing would be left to train on), or when `out` is not empty;
    ValueError for a count below 1."""
    if count < 1:
        raise ValueError(f"worlds to carve: expected at least 1, got {count}")
    dataset = load_dataset(source)
    manifest_path = source / MANIFEST_FILE
    if not dataset.has_manifest:
        error = TaskFormatError(
            manifest_path, "a dataset manifest naming each task's world", got="no manifest"
        )
        raise TaskFormatErrors([error])
    unknown = [e.task_id for e in dataset.entries if e.world_id == UNKNOWN]
    if unknown:
        error = TaskFormatError(
            manifest_path, "a world id for every task", got=f"none for {unknown[0]}", field="tasks"
        )
        raise TaskFormatErrors([error])
    domains = {e.world_id: e.domain for e in dataset.entries}
    if count >= len(domains):
        error = TaskFormatError(
            manifest_path,
            f"more than {count} worlds (some must be left to train on)",
            got=f"{len(domains)}",
            field="tasks",
        )
        raise TaskFormatErrors([error])
    if out.exists() and any(out.iterdir()):
        raise TaskFormatErrors([TaskFormatError(out, "an empty or new folder", got="not empty")])
    chosen = choose_worlds(domains, count)
    picked = set(chosen)
    carved_entries = [e for e in dataset.entries if e.world_id in picked]
    kept = [e for e in dataset.entries if e.world_id not in picked]
    trained = {_instruction(source / e.path) for e in kept}
    moved: list[ManifestEntry] = []
    duplicates: list[ManifestEntry] = []
    for entry in carved_entries:
        (duplicates if _instruction(source / entry.path) in trained else moved).append(entry)
    out.mkdir(parents=True, exist_ok=True)
    for entry in duplicates:
        shutil.rmtree(source / entry.path)
    for entry in moved:
        target = out / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        (source / entry.path).rename(target)
    manifest = dataset.manifest
    carved = manifest.model_copy(
        update={
            "name": f"{manifest.name}-{VALIDATION}",
            "split": VALIDATION,
            "tasks": moved,
            "worlds": [w for w in manifest.worlds if w.get("world_id") in picked],
            "carved_from": str(source.resolve()),
        }
    )
    write_manifest(out, carved)
    rest = manifest.model_copy(
        update={
            "tasks": kept,
            "worlds": [w for w in manifest.worlds if w.get("world_id") not in picked],
            VALIDATION: {"path": str(out.resolve()), "worlds": chosen},
        }
    )
    write_manifest(source, rest)
    return Carved(source, out, tuple(chosen), len(moved), len(kept), len(duplicates))


def _instruction(task: Path) -> str:
    return " ".join(load_task_dir(task).instruction.split())
