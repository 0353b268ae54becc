"""A validation split carved from a training dataset by whole worlds (`bureau tasks carve`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bureau.cli.main import app
from bureau.tasks import DatasetManifest, TaskFormatErrors, load_dataset, write_manifest
from bureau.tasks.carve import carve_validation, choose_worlds

MakeTask = Callable[..., Path]

WORLDS = {  # world id -> domain: law has 3 worlds, banking 2, consulting 1
    "train-law-000": "law",
    "train-law-003": "law",
    "train-law-005": "law",
    "train-banking-001": "banking",
    "train-banking-004": "banking",
    "train-consulting-002": "consulting",
}


def make_dataset(make_task: MakeTask, root: Path, tasks_per_world: int = 2) -> Path:
    """`root` (under the fixture's tmp_path) with two tasks per world and their manifest."""
    entries = []
    for world, domain in WORLDS.items():
        for t in range(tasks_per_world):
            task_id = f"{world}-t{t:02d}"
            make_task(f"{root.name}/{task_id}", instruction=f"Question {t} about {world}.\n")
            entries.append(
                {"task_id": task_id, "world_id": world, "domain": domain, "split": "train",
                 "path": task_id, "template": f"{domain}.starter"}
            )  # fmt: skip
    worlds = [{"world_id": w, "domain": d} for w, d in WORLDS.items()]
    manifest = {"name": "bureau-train", "split": "train", "seed": 0, "tasks": entries}
    write_manifest(root, DatasetManifest.model_validate({**manifest, "worlds": worlds}))
    return root


def test_worlds_are_taken_from_the_domains_in_turn_last_first() -> None:
    assert choose_worlds(WORLDS, 4) == [
        "train-banking-004", "train-consulting-002", "train-law-005", "train-banking-001",
    ]  # fmt: skip
    assert choose_worlds(WORLDS, 5)[-1] == "train-law-003"  # consulting has no second world


def test_carving_moves_whole_worlds_and_both_manifests_say_so(
    tmp_path: Path, make_task: MakeTask
) -> None:
    source = make_dataset(make_task, tmp_path / "train")
    linked = source / "train-law-005-t00" / "instruction.md"
    os.link(linked, tmp_path / "link")  # the builder hard-links a world's files; a move keeps it
    carved = carve_validation(source, 3, tmp_path / "validation")
    assert carved.worlds == ("train-banking-004", "train-consulting-002", "train-law-005")
    assert (carved.tasks, carved.left) == (6, 6)

    validation = load_dataset(tmp_path / "validation")
    assert validation.manifest.split == "validation"
    assert {e.world_id for e in validation.entries} == set(carved.worlds)
    assert {w["world_id"] for w in validation.manifest.worlds} == set(carved.worlds)
    moved = tmp_path / "validation" / "train-law-005-t00" / "instruction.md"
    assert moved.read_text() == "Question 0 about train-law-005.\n"
    assert moved.stat().st_ino == (tmp_path / "link").stat().st_ino
    assert validation.load_task("train-law-005-t00").name == "acme/q3-expenses"

    rest = load_dataset(source)
    assert not {e.world_id for e in rest.entries} & set(carved.worlds)
    assert len(rest) == 6 and not (source / "train-law-005-t00").exists()
    assert rest.manifest.model_extra is not None
    assert rest.manifest.model_extra["validation"]["worlds"] == list(carved.worlds)
    assert sorted(p.name for p in source.iterdir() if p.is_dir()) == sorted(rest.task_ids)


def test_what_cannot_be_carved_is_refused_naming_the_file(
    tmp_path: Path, make_task: MakeTask
) -> None:
    source = make_dataset(make_task, tmp_path / "train")
    with pytest.raises(TaskFormatErrors, match="more than 6 worlds"):
        carve_validation(source, 6, tmp_path / "validation")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(TaskFormatErrors, match="full: expected an empty or new folder"):
        carve_validation(source, 2, tmp_path / "full")
    with pytest.raises(ValueError, match="at least 1"):
        carve_validation(source, 0, tmp_path / "validation")
    harbor = make_task("harbor/t1").parent  # a Harbor folder has no manifest: no world ids
    with pytest.raises(TaskFormatErrors, match=r"dataset\.json: expected a dataset manifest"):
        carve_validation(harbor, 1, tmp_path / "validation")
    assert len(load_dataset(source)) == 12  # nothing moved by a refusal


def test_the_cli_carves_and_reports(tmp_path: Path, make_task: MakeTask) -> None:
    source = make_dataset(make_task, tmp_path / "train")
    result = CliRunner().invoke(
        app, ["tasks", "carve", str(source), "--worlds", "2", "--out", str(tmp_path / "val")]
    )
    assert result.exit_code == 0, result.output
    assert "4 tasks of 2 worlds" in result.output and "8 tasks left" in result.output
    again = CliRunner().invoke(
        app, ["tasks", "carve", str(source), "--worlds", "2", "--out", str(tmp_path / "val")]
    )
    assert again.exit_code == 2 and "not empty" in again.output


def test_a_carved_task_whose_instruction_is_a_training_one_is_not_kept(
    tmp_path: Path, make_task: MakeTask
) -> None:
    source = make_dataset(make_task, tmp_path / "train")
    # A task of a world that will be carved asks, word for word but for spacing, what a task
    # left to train on asks.
    trained = (source / "train-law-000-t01" / "instruction.md").read_text()
    (source / "train-law-005-t00" / "instruction.md").write_text(trained.replace(" ", "  "))
    carved = carve_validation(source, 3, tmp_path / "validation")
    assert (carved.tasks, carved.left, carved.duplicates) == (5, 6, 1)
    validation = load_dataset(tmp_path / "validation")
    assert "train-law-005-t00" not in validation.task_ids
    assert "train-law-005-t01" in validation.task_ids
    assert not (source / "train-law-005-t00").exists()
    assert not (tmp_path / "validation" / "train-law-005-t00").exists()
