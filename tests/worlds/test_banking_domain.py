"""The banking domain builds deal worlds whose files open and whose tasks the oracle solves.

A small standard world is built with the real builder. Every file is opened with the library an
agent would use, the model workbooks carry cached formula values and named ranges, and each task
is graded twice: the oracle's answers must pass every criterion, an empty answer none.
"""

from __future__ import annotations

import random
from pathlib import Path

import openpyxl
import pytest
from worldfiles import STANDARD_WORLD_SUFFIXES, open_with_library, templates_asked

from bureau.checks.offline import check_tasks
from bureau.worlds import builder
from bureau.worlds.domains import banking
from bureau.worlds.spec import Difficulty, WorldContext

KINDS = {"fact", "multi_hop", "compute", "reconcile", "deliverable"}


def _world(tmp_path: Path, difficulty: Difficulty) -> WorldContext:
    ctx = WorldContext(
        world_id="w",
        domain="banking",
        split="train",
        difficulty=difficulty,
        company="Amber Capital",
        workspace=tmp_path,
        rng=random.Random("banking-test"),
        n_files=40,
    )
    banking.build(ctx)
    return ctx


def test_templates_cover_every_kind() -> None:
    names = [t.name for t in banking.TEMPLATES]
    assert len(set(names)) == len(names) >= 8
    standard = [t for t in banking.TEMPLATES if "standard" in t.difficulties]
    assert len(standard) >= 9 and {t.kind for t in standard} == KINDS
    assert sum(t.kind == "deliverable" for t in standard) >= 2
    assert sum("starter" in t.difficulties for t in banking.TEMPLATES) >= 3


def test_starter_world_writes_five_core_files(tmp_path: Path) -> None:
    ctx = _world(tmp_path, "starter")
    assert len(ctx.files) == 5
    assert {Path(f).suffix for f in ctx.files} == {".xlsx", ".pptx", ".pdf", ".eml"}


def test_model_has_cached_formulas_and_named_ranges(tmp_path: Path) -> None:
    ctx = _world(tmp_path, "standard")
    (current,) = [f for f in ctx.files if f.endswith("_v4.xlsx")]
    (stale,) = [f for f in ctx.files if f.endswith("_v3.xlsx")]
    formulas = openpyxl.load_workbook(tmp_path / current)
    values = openpyxl.load_workbook(tmp_path / current, data_only=True)
    assert {"WACC", "TaxRate", "TerminalGrowth"} <= set(values.defined_names)
    assert formulas["IS"]["B6"].value.startswith("=") and values["IS"]["B6"].value is not None
    assert values["IS"]["A6"].value == "EBITDA"
    old = openpyxl.load_workbook(tmp_path / stale, data_only=True)
    assert old["Assumptions"]["B3"].value != values["Assumptions"]["B3"].value  # WACC differs


def test_standard_world_opens_and_oracle_solves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(builder, "DOMAINS", ("banking",))
    out = tmp_path / "standard"
    cfg = builder.BuildConfig(split="train", worlds=1, tasks=12, seed=7, out=out, jobs=1)
    report = builder.build_split(cfg)
    assert report["tasks"] == 12 and report["worlds_by_domain"]["banking"] == 1
    dirs = sorted(p for p in out.iterdir() if (p / "task.toml").exists())
    files = sorted(p for p in (dirs[0] / "environment" / "workspace").rglob("*") if p.is_file())
    assert {p.suffix for p in files} == STANDARD_WORLD_SUFFIXES
    for path in files:
        open_with_library(path)
    assert (
        len(templates_asked(out) - {t.name for t in banking.TEMPLATES if ".brief" in t.name}) >= 8
    )
    for mode in ("oracle", "empty"):
        bad = [o for o in check_tasks(dirs, mode, jobs=1) if not o.ok]
        assert not bad, [(o.task_id, o.reward, o.error, o.failed_criteria) for o in bad]
