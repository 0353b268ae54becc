"""A dataset: a folder of task directories, optionally described by a manifest.

bureau writes `bureau-dataset.json` at the dataset root: its name, split and seed, one entry per
task (id, world, domain, split, path relative to the root, plus free extra fields such as
"template" or "difficulty") and a free-form description of each generated world. Unknown keys are
kept everywhere.

A folder without a manifest is a dataset too, since Harbor datasets have none: every direct
child folder holding a task.toml is a task whose id is the folder name, and whose world, domain
and split are "unknown".

`validate_dataset` checks every task and returns all problems grouped by task id, so one broken
task never hides another.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from bureau.tasks.errors import TaskFormatError, TaskFormatErrors, errors_from_validation
from bureau.tasks.taskdir import CONFIG_FILE, TaskDir, check_task_dir, load_task_dir

MANIFEST_FILE = "bureau-dataset.json"
MANIFEST_FORMAT: Literal["bureau-dataset/1"] = "bureau-dataset/1"
UNKNOWN = "unknown"

_MODEL_CONFIG = ConfigDict(extra="allow", strict=True)


class ManifestEntry(BaseModel):
    """One task of the dataset; extra keys (template, kind, difficulty, ...) are kept."""

    model_config = _MODEL_CONFIG

    task_id: str = Field(min_length=1, description="Unique id of the task within the dataset.")
    world_id: str = Field(description="Id of the generated world the task belongs to.")
    domain: str = Field(description="Business domain of the world (e.g. 'accounting').")
    split: str = Field(description="Split the task belongs to (e.g. 'train', 'test').")
    path: str = Field(description="Task directory, relative to the dataset root (POSIX).")

    @field_validator("path")
    @classmethod
    def _inside_root(cls, value: str) -> str:
        posix = PurePosixPath(value)
        if posix.is_absolute() or not posix.parts or ".." in posix.parts or "\\" in value:
            raise PydanticCustomError(
                "bureau_expected",
                "expected {expected}",
                {"expected": "a relative POSIX path inside the dataset, without '..'"},
            )
        return value


class DatasetManifest(BaseModel):
    """The bureau-dataset.json at a dataset's root; extra top-level keys are kept."""

    model_config = _MODEL_CONFIG

    format: Literal["bureau-dataset/1"] = Field(
        default=MANIFEST_FORMAT, description="Manifest format and version."
    )
    name: str = Field(description="Dataset name.")
    split: str = Field(description="Split of the dataset as a whole (e.g. 'train' or 'mixed').")
    seed: int | None = Field(default=None, description="Seed the dataset was generated from.")
    tasks: list[ManifestEntry] = Field(default_factory=list, description="One entry per task.")
    worlds: list[dict[str, Any]] = Field(
        default_factory=list, description="Free-form description of each generated world."
    )


@dataclass
class Dataset:
    """A dataset root with its manifest; task directories are loaded on first use."""

    root: Path
    manifest: DatasetManifest
    has_manifest: bool
    _loaded: dict[tuple[str, bool], TaskDir] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def entries(self) -> list[ManifestEntry]:
        return self.manifest.tasks

    @property
    def task_ids(self) -> list[str]:
        return [entry.task_id for entry in self.manifest.tasks]

    def __len__(self) -> int:
        return len(self.manifest.tasks)

    def entry(self, task_id: str) -> ManifestEntry:
        """The manifest entry of a task; KeyError if the dataset has no such task."""
        for entry in self.manifest.tasks:
            if entry.task_id == task_id:
                return entry
        raise KeyError(task_id)

    def task_path(self, task_id: str) -> Path:
        return self.root / self.entry(task_id).path

    def load_task(self, task_id: str, *, require_solution: bool = False) -> TaskDir:
        """Load (once) and return a task directory; raises TaskFormatErrors if it is broken."""
        key = (task_id, require_solution)
        if key not in self._loaded:
            self._loaded[key] = load_task_dir(
                self.task_path(task_id), require_solution=require_solution
            )
        return self._loaded[key]


@dataclass(frozen=True)
class DatasetReport:
    """Every problem found in a dataset: dataset-wide ones, and per task id."""

    root: Path
    task_ids: tuple[str, ...]
    dataset_errors: tuple[TaskFormatError, ...]
    task_errors: dict[str, tuple[TaskFormatError, ...]]
    task_warnings: dict[str, tuple[TaskFormatError, ...]]

    @property
    def ok(self) -> bool:
        return not self.dataset_errors and not self.task_errors

    @property
    def errors(self) -> list[TaskFormatError]:
        """All errors, dataset-wide ones first."""
        flat = list(self.dataset_errors)
        for problems in self.task_errors.values():
            flat.extend(problems)
        return flat

    def summary(self) -> str:
        """A human-readable report, one problem per line."""
        broken = len(self.task_errors)
        lines = [f"{self.root}: {len(self.task_ids)} tasks, {broken} with errors"]
        lines.extend(f"  {error}" for error in self.dataset_errors)
        for task_id, problems in self.task_errors.items():
            lines.append(f"  [{task_id}]")
            lines.extend(f"    {error}" for error in problems)
        return "\n".join(lines)


def load_manifest(path: Path | str) -> DatasetManifest:
    """Read a bureau-dataset.json; raises TaskFormatErrors naming the file and fields."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        error = TaskFormatError(path, "a dataset manifest", got="no such file")
        raise TaskFormatErrors([error]) from None
    except UnicodeDecodeError as exc:
        error = TaskFormatError(path, "UTF-8 text", got=f"invalid byte at offset {exc.start}")
        raise TaskFormatErrors([error]) from None
    except json.JSONDecodeError as exc:
        error = TaskFormatError(
            path, "valid JSON", got=f"a syntax error ({exc.msg})", line=exc.lineno, column=exc.colno
        )
        raise TaskFormatErrors([error]) from None
    try:
        manifest = DatasetManifest.model_validate(data)
    except ValidationError as exc:
        errors = errors_from_validation(exc, path, DatasetManifest, mapping_word="an object")
        raise TaskFormatErrors(errors) from None
    return manifest


def write_manifest(root: Path | str, manifest: DatasetManifest) -> Path:
    """Write `<root>/bureau-dataset.json` atomically and return its path."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / MANIFEST_FILE
    text = json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False)
    with tempfile.NamedTemporaryFile(
        "w", dir=root, prefix=".manifest-", suffix=".json", delete=False, encoding="utf-8"
    ) as handle:
        handle.write(text + "\n")
    os.replace(handle.name, path)
    return path


def load_dataset(root: Path | str) -> Dataset:
    """Open a dataset: its manifest if present, else the task folders directly under `root`.

    Raises TaskFormatErrors for an unreadable manifest or duplicate task ids; task directories
    themselves are only read by `Dataset.load_task` (check them all with `validate_dataset`).
    """
    root = Path(root)
    if not root.is_dir():
        got = "a file" if root.exists() else "no such directory"
        raise TaskFormatErrors([TaskFormatError(root, "a dataset directory", got=got)])
    manifest_path = root / MANIFEST_FILE
    if not manifest_path.exists():
        return Dataset(root=root, manifest=discover_manifest(root), has_manifest=False)
    manifest = load_manifest(manifest_path)
    duplicates = _duplicate_ids(manifest, manifest_path)
    if duplicates:
        raise TaskFormatErrors(error for _, error in duplicates)
    return Dataset(root=root, manifest=manifest, has_manifest=True)


def discover_manifest(root: Path | str) -> DatasetManifest:
    """The manifest a folder of task directories implies when it has none of its own."""
    root = Path(root)
    entries = [
        ManifestEntry(task_id=name, world_id=UNKNOWN, domain=UNKNOWN, split=UNKNOWN, path=name)
        for name in _task_folders(root)
    ]
    return DatasetManifest(name=root.name, split=UNKNOWN, tasks=entries)


def validate_dataset(
    root: Path | str, *, require_solution: bool = True, require_manifest: bool = False
) -> DatasetReport:
    """Check the manifest and every task directory, reporting all problems.

    Without a manifest the task folders are still checked; the missing manifest is an error
    only with `require_manifest=True` (bureau-built datasets) or when no task is found at all.
    """
    root = Path(root)
    manifest_path = root / MANIFEST_FILE
    dataset_errors: list[TaskFormatError] = []
    task_errors: dict[str, list[TaskFormatError]] = {}
    task_warnings: dict[str, list[TaskFormatError]] = {}
    if not root.is_dir():
        got = "a file" if root.exists() else "no such directory"
        dataset_errors.append(TaskFormatError(root, "a dataset directory", got=got))
        return DatasetReport(root, (), tuple(dataset_errors), {}, {})

    manifest: DatasetManifest | None = None
    if manifest_path.exists():
        try:
            manifest = load_manifest(manifest_path)
        except TaskFormatErrors as exc:
            dataset_errors.extend(exc.errors)
    elif require_manifest:
        dataset_errors.append(
            TaskFormatError(manifest_path, "a dataset manifest", got="no such file")
        )
    if manifest is not None:
        for task_id, error in _duplicate_ids(manifest, manifest_path):
            task_errors.setdefault(task_id, []).append(error)
        dataset_errors.extend(_unlisted_folders(root, manifest))
    else:
        # An unreadable or absent manifest still leaves the task folders worth checking.
        manifest = discover_manifest(root)

    for index, entry in enumerate(manifest.tasks):
        task_dir = root / entry.path
        if not task_dir.is_dir():
            task_errors.setdefault(entry.task_id, []).append(
                TaskFormatError(
                    manifest_path,
                    "the path of an existing task directory",
                    field=f"tasks[{index}].path",
                    got=f"{json.dumps(entry.path)} (no such directory)",
                )
            )
            continue
        check = check_task_dir(task_dir, require_solution=require_solution)
        if check.errors:
            task_errors.setdefault(entry.task_id, []).extend(check.errors)
        if check.warnings:
            task_warnings.setdefault(entry.task_id, []).extend(check.warnings)

    if not manifest.tasks and not dataset_errors:
        dataset_errors.append(
            TaskFormatError(
                manifest_path,
                f"a dataset manifest or task folders (each with a {CONFIG_FILE}) in {root}",
                got="neither",
            )
        )
    return DatasetReport(
        root=root,
        task_ids=tuple(entry.task_id for entry in manifest.tasks),
        dataset_errors=tuple(dataset_errors),
        task_errors={key: tuple(value) for key, value in task_errors.items()},
        task_warnings={key: tuple(value) for key, value in task_warnings.items()},
    )


def _task_folders(root: Path) -> list[str]:
    return sorted(
        child.name
        for child in root.iterdir()
        if child.is_dir() and not child.name.startswith(".") and (child / CONFIG_FILE).is_file()
    )


def _duplicate_ids(
    manifest: DatasetManifest, manifest_path: Path
) -> list[tuple[str, TaskFormatError]]:
    """An error for every entry that repeats an earlier entry's task id or path."""
    problems = []
    first_id: dict[str, int] = {}
    first_path: dict[str, int] = {}
    for index, entry in enumerate(manifest.tasks):
        task_path = str(PurePosixPath(entry.path))
        for key, value, seen in (
            ("task_id", entry.task_id, first_id),
            ("path", task_path, first_path),
        ):
            if value in seen:
                problems.append(
                    (
                        entry.task_id,
                        TaskFormatError(
                            manifest_path,
                            f"a {key} used by one task only",
                            field=f"tasks[{index}].{key}",
                            got=f"{json.dumps(value)} (also tasks[{seen[value]}])",
                        ),
                    )
                )
            else:
                seen[value] = index
    return problems


def _unlisted_folders(root: Path, manifest: DatasetManifest) -> list[TaskFormatError]:
    listed = {str(PurePosixPath(entry.path)) for entry in manifest.tasks}
    return [
        TaskFormatError(
            root / name,
            f"a task folder listed in {MANIFEST_FILE}",
            got="a task folder the manifest does not list",
        )
        for name in _task_folders(root)
        if name not in listed
    ]
