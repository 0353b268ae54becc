"""A standard world is crowded like a real shared drive, the same bytes for the same seed, and
says which of its PDFs are scans and whether they carry a text layer."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pdfplumber
import pytest

from bureau.tasks.taskdir import read_prompt
from bureau.worlds import builder
from bureau.worlds.builder import MANIFEST, BuildConfig, build_split


def _workspace_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("crowded") / "train"
    build_split(BuildConfig("train", 1, 4, 21, out, jobs=1))
    manifest = json.loads((out / MANIFEST).read_text())
    return out, manifest


def _workspace(out: Path, manifest: dict[str, Any]) -> Path:
    task = manifest["tasks"][0]["path"]
    return out / task / "environment" / "workspace"


def test_a_standard_world_holds_every_kind_of_work_product(
    crowded: tuple[Path, dict[str, Any]],
) -> None:
    out, manifest = crowded
    (world,) = manifest["worlds"]
    assert 150 <= world["n_files"] <= 250
    ws = _workspace(out, manifest)
    files = [p for p in ws.rglob("*") if p.is_file()]
    assert len(files) == world["n_files"]
    kinds = Counter(p.suffix for p in files)
    for suffix in (".pdf", ".xlsx", ".docx", ".pptx", ".eml", ".json", ".ics", ".csv"):
        assert kinds[suffix] > 0, suffix
    # Chat channels with hundreds to thousands of messages.
    messages = sum(len(json.loads(p.read_text())["messages"]) for p in ws.glob("chat/*.json"))
    assert messages >= 1100
    # Mail threads: replies that point at the message they answer.
    replies = [p for p in ws.glob("mail/archive/**/*.eml") if b"In-Reply-To:" in p.read_bytes()]
    assert replies
    # Versions of one policy, the older ones marked.
    versions = sorted(ws.glob("admin/policies/*/*_v*.pdf"))
    assert len({p.parent for p in versions}) >= 1 and any("_v3_" in p.name for p in versions)


def test_scans_are_stated_per_file_and_are_what_they_say(
    crowded: tuple[Path, dict[str, Any]],
) -> None:
    out, manifest = crowded
    (world,) = manifest["worlds"]
    notes: dict[str, str] = world["file_notes"]
    assert notes and all(rel.startswith("scans/") for rel in notes)
    ws = _workspace(out, manifest)
    seen = set()
    for rel, note in notes.items():
        with pdfplumber.open(ws / rel) as pdf:
            page = pdf.pages[0]
            assert page.images, rel  # every page is an image
            text = page.extract_text()
            has_layer = note == "scanned pages with an OCR text layer"
            assert bool(text.strip()) == has_layer, (rel, note)
            seen.add(has_layer)
    assert seen == {True, False}


def test_a_crowded_world_is_the_same_bytes_for_the_same_seed(
    tmp_path: Path, crowded: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, manifest = crowded
    again = tmp_path / "again"
    build_split(BuildConfig("train", 1, 4, 21, again, jobs=1))
    assert _workspace_digest(_workspace(again, manifest)) == _workspace_digest(
        _workspace(out, manifest)
    )
    # The clutter draws from its own generator: the same tasks whatever it holds.
    monkeypatch.setattr(builder, "fill_world", lambda ctx: ctx.rng.getrandbits(64))
    bare = tmp_path / "bare"
    build_split(BuildConfig("train", 1, 4, 21, bare, jobs=1))
    # (every step's prompt, for a task in several steps)
    instructions = [read_prompt(again / t["path"]) for t in manifest["tasks"]]
    bare_manifest = json.loads((bare / MANIFEST).read_text())
    assert [read_prompt(bare / t["path"]) for t in bare_manifest["tasks"]] == instructions
