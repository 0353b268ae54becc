"""The consulting domain builds worlds whose files open and whose tasks the oracle solves.

One small standard world and one starter world are built with the real builder; every file is
opened with the library an agent would use, and every task is graded twice: the oracle's
answers must pass all criteria, an empty answer none.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from worldfiles import STANDARD_WORLD_SUFFIXES, open_with_library, templates_asked

from bureau.checks.offline import check_tasks
from bureau.worlds import builder
from bureau.worlds.domains import consulting
from bureau.worlds.spec import Difficulty, WorldContext


def _build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, difficulty: Difficulty) -> Path:
    monkeypatch.setattr(builder, "DOMAINS", ("consulting",))
    out = tmp_path / difficulty
    tasks = 12 if difficulty == "standard" else 4
    cfg = builder.BuildConfig(
        split="train", worlds=1, tasks=tasks, seed=7, out=out, difficulty=difficulty, jobs=1
    )
    report = builder.build_split(cfg)
    assert report["tasks"] == tasks
    assert report["worlds_by_domain"]["consulting"] == 1
    return out


def _task_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if (p / "task.toml").exists())


def test_templates_cover_the_kinds() -> None:
    names = {t.name for t in consulting.TEMPLATES}
    assert len(names) == len(consulting.TEMPLATES) >= 8
    standard = [t for t in consulting.TEMPLATES if "standard" in t.difficulties]
    starter = [t for t in consulting.TEMPLATES if "starter" in t.difficulties]
    assert len(standard) >= 9 and len(starter) >= 3
    assert {t.kind for t in standard} == {
        "fact",
        "multi_hop",
        "compute",
        "reconcile",
        "deliverable",
    }


def test_standard_world_files_open_and_oracle_solves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _build(tmp_path, monkeypatch, "standard")
    dirs = _task_dirs(out)
    workspace = dirs[0] / "environment" / "workspace"
    files = sorted(p for p in workspace.rglob("*") if p.is_file())
    assert {p.suffix for p in files} >= STANDARD_WORLD_SUFFIXES
    for path in files:
        open_with_library(path)
    assert (
        len(templates_asked(out) - {t.name for t in consulting.TEMPLATES if ".brief" in t.name})
        >= 8
    )
    for mode in ("oracle", "empty"):
        bad = [o for o in check_tasks(dirs, mode, jobs=1) if not o.ok]
        assert not bad, [(o.task_id, o.reward, o.error, o.failed_criteria) for o in bad]


@pytest.mark.parametrize(("difficulty", "lo", "hi"), [("starter", 5, 5), ("standard", 22, 32)])
def test_core_file_count(tmp_path: Path, difficulty: Difficulty, lo: int, hi: int) -> None:
    ctx = WorldContext(
        world_id="w",
        domain="consulting",
        split="train",
        difficulty=difficulty,
        company="Birch Retail",
        workspace=tmp_path,
        rng=random.Random(3),
        n_files=40,
    )
    consulting.build(ctx)
    assert lo <= len(ctx.files) <= hi


def test_starter_world_oracle_solves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = _task_dirs(_build(tmp_path, monkeypatch, "starter"))
    for mode in ("oracle", "empty"):
        bad = [o for o in check_tasks(dirs, mode, jobs=1) if not o.ok]
        assert not bad, [(o.task_id, o.reward, o.error, o.failed_criteria) for o in bad]
