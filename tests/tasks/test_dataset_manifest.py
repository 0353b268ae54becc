"""Datasets: the manifest round trip, manifest-less Harbor folders, and reports of every problem."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bureau.tasks import (
    MANIFEST_FILE,
    DatasetManifest,
    ManifestEntry,
    TaskFormatErrors,
    load_dataset,
    validate_dataset,
    write_manifest,
)

MakeTask = Callable[..., Path]


def entry(task_id: str, **extra: Any) -> ManifestEntry:
    return ManifestEntry.model_validate(
        {
            "task_id": task_id,
            "world_id": "acme",
            "domain": "accounting",
            "split": "train",
            "path": task_id,
            **extra,
        }
    )


def manifest(*entries: ManifestEntry, **extra: Any) -> DatasetManifest:
    return DatasetManifest.model_validate(
        {"name": "demo", "split": "train", "seed": 7, "tasks": list(entries), **extra}
    )


def test_manifest_round_trip_keeps_extra_fields(tmp_path: Path, make_task: MakeTask) -> None:
    make_task("t1")
    written = manifest(
        entry("t1", template="sum-expenses", difficulty=2),
        worlds=[{"world_id": "acme", "employees": 40}],
        generator={"version": "0.1"},
    )
    path = write_manifest(tmp_path, written)
    assert path == tmp_path / MANIFEST_FILE
    assert json.loads(path.read_text())["generator"] == {"version": "0.1"}

    dataset = load_dataset(tmp_path)
    assert dataset.has_manifest
    assert dataset.manifest == written
    assert dataset.entry("t1").model_extra == {"template": "sum-expenses", "difficulty": 2}
    assert dataset.task_ids == ["t1"] and len(dataset) == 1


def test_tasks_are_loaded_lazily_and_once(tmp_path: Path, make_task: MakeTask) -> None:
    make_task("t1")
    write_manifest(tmp_path, manifest(entry("t1"), entry("t2")))
    dataset = load_dataset(tmp_path)  # t2 is missing on disk: only loading it fails
    task = dataset.load_task("t1")
    assert task.name == "acme/q3-expenses"
    assert dataset.load_task("t1") is task
    with pytest.raises(TaskFormatErrors):
        dataset.load_task("t2")
    with pytest.raises(KeyError):
        dataset.entry("t3")


def test_folder_without_manifest_is_a_dataset(tmp_path: Path, make_task: MakeTask) -> None:
    make_task("b-task")
    make_task("a-task")
    (tmp_path / "notes").mkdir()
    (tmp_path / ".cache").mkdir()
    dataset = load_dataset(tmp_path)
    assert not dataset.has_manifest
    assert dataset.task_ids == ["a-task", "b-task"]
    first = dataset.entry("a-task")
    assert (first.world_id, first.domain, first.split, first.path) == (
        "unknown",
        "unknown",
        "unknown",
        "a-task",
    )
    assert validate_dataset(tmp_path).ok


def test_every_broken_task_is_reported(tmp_path: Path, make_task: MakeTask) -> None:
    make_task("good")
    no_verifier = make_task("no-verifier", test_sh=None)
    bad_config = make_task("bad-config", task_toml='[environment]\nworkdir = "rel"\n')
    write_manifest(tmp_path, manifest(entry("good"), entry("no-verifier"), entry("bad-config")))

    report = validate_dataset(tmp_path)
    assert not report.ok
    assert report.task_ids == ("good", "no-verifier", "bad-config")
    assert report.dataset_errors == ()
    assert set(report.task_errors) == {"no-verifier", "bad-config"}
    assert [str(e) for e in report.task_errors["no-verifier"]] == [
        f"{no_verifier / 'tests' / 'test.sh'}: expected the verifier script, got no such file"
    ]
    assert [str(e) for e in report.task_errors["bad-config"]] == [
        f"{bad_config / 'task.toml'}: environment.workdir: "
        'expected an absolute path (such as /workspace, or C:\\workspace on Windows), got "rel"'
    ]
    assert len(report.errors) == 2
    assert "[no-verifier]" in report.summary() and "[bad-config]" in report.summary()


def test_manifest_problems_are_reported_with_the_task_checks(
    tmp_path: Path, make_task: MakeTask
) -> None:
    make_task("t1")
    make_task("unlisted")
    make_task("t3", solve_sh=None)
    write_manifest(tmp_path, manifest(entry("t1"), entry("gone"), entry("t1", path="t3")))
    manifest_path = tmp_path / MANIFEST_FILE

    report = validate_dataset(tmp_path, require_solution=True)
    assert [str(e) for e in report.dataset_errors] == [
        f"{tmp_path / 'unlisted'}: expected a task folder listed in {MANIFEST_FILE}, "
        "got a task folder the manifest does not list"
    ]
    assert [str(e) for e in report.task_errors["gone"]] == [
        f"{manifest_path}: tasks[1].path: expected the path of an existing task directory, "
        'got "gone" (no such directory)'
    ]
    assert [str(e) for e in report.task_errors["t1"]] == [
        f'{manifest_path}: tasks[2].task_id: expected a task_id used by one task only, got "t1" '
        "(also tasks[0])",
        f"{tmp_path / 't3' / 'solution' / 'solve.sh'}: expected the oracle solution script, "
        "got no such file",
    ]
    with pytest.raises(TaskFormatErrors, match=r"tasks\[2\]\.task_id"):
        load_dataset(tmp_path)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{", "line 1, column 2: expected valid JSON, got a syntax error"),
        ("[]", "expected an object, got an array"),
        ({"name": "d", "split": "train", "seed": "7"}, 'seed: expected an integer, got "7"'),
        ({"name": "d", "split": "train", "format": "v2"}, "format: expected one of"),
        ({"split": "train"}, "name: expected a string, got nothing (the field is required)"),
        (
            {"name": "d", "split": "s", "tasks": [{"task_id": "a"}]},
            "tasks[0].world_id: expected a string, got nothing",
        ),
        (
            {
                "name": "d",
                "split": "s",
                "tasks": [
                    {"task_id": "a", "world_id": "w", "domain": "d", "split": "s", "path": "../x"}
                ],
            },
            "tasks[0].path: expected a relative POSIX path inside the dataset",
        ),
        ({"name": "d", "split": "s", "worlds": [1]}, "worlds[0]: expected an object, got 1"),
    ],
)
def test_malformed_manifest_names_file_and_field(
    tmp_path: Path, make_task: MakeTask, data: Any, message: str
) -> None:
    make_task("t1")
    manifest_path = tmp_path / MANIFEST_FILE
    manifest_path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(TaskFormatErrors) as caught:
        load_dataset(tmp_path)
    assert str(caught.value.errors[0]).startswith(f"{manifest_path}: {message}")

    # The task folders are still checked when the manifest cannot be read.
    report = validate_dataset(tmp_path)
    assert str(report.dataset_errors[0]).startswith(f"{manifest_path}: {message}")
    assert report.task_ids == ("t1",) and report.task_errors == {}


def test_missing_manifest_is_an_error_when_required(tmp_path: Path, make_task: MakeTask) -> None:
    make_task("t1")
    assert validate_dataset(tmp_path).ok
    report = validate_dataset(tmp_path, require_manifest=True)
    assert [str(e) for e in report.dataset_errors] == [
        f"{tmp_path / MANIFEST_FILE}: expected a dataset manifest, got no such file"
    ]


def test_empty_folder_is_not_a_dataset(tmp_path: Path) -> None:
    report = validate_dataset(tmp_path)
    assert not report.ok
    assert report.dataset_errors[0].path == tmp_path / MANIFEST_FILE
    absent = validate_dataset(tmp_path / "absent")
    assert str(absent.dataset_errors[0]).endswith(
        "expected a dataset directory, got no such directory"
    )
