"""Whole-split builds: disjoint splits, determinism, validity, oracle 1.0 and empty 0.0."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path

import pytest
from worldfiles import open_with_library

from bureau.checks.offline import check_tasks
from bureau.tasks.dataset import load_dataset, validate_dataset
from bureau.worlds.builder import MANIFEST, BuildConfig, build_split, domain_module
from bureau.worlds.spec import DOMAINS


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "build-report.json"
    }


@pytest.fixture(scope="module")
def small_sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three worlds per domain for train, one per domain for eval."""
    root = tmp_path_factory.mktemp("sets")
    build_split(BuildConfig("train", 9, 45, 11, root / "train", files_per_world=20))
    build_split(BuildConfig("eval", 3, 18, 11, root / "eval", files_per_world=20))
    return {"train": root / "train", "eval": root / "eval"}


def test_splits_never_share_a_world_or_company(small_sets: dict[str, Path]) -> None:
    manifests = {
        split: json.loads((root / MANIFEST).read_text()) for split, root in small_sets.items()
    }
    ids = {s: {w["world_id"] for w in m["worlds"]} for s, m in manifests.items()}
    companies = {s: {w["company"] for w in m["worlds"]} for s, m in manifests.items()}
    assert ids["train"].isdisjoint(ids["eval"])
    assert companies["train"].isdisjoint(companies["eval"])
    assert all(t["split"] == "train" for t in manifests["train"]["tasks"])
    domains = [w["domain"] for w in manifests["train"]["worlds"]]
    assert sorted(domains) == sorted(list(DOMAINS) * 3)


def test_held_out_kinds_are_eval_only_and_marked(small_sets: dict[str, Path]) -> None:
    held_out = {t.name for d in DOMAINS for t in domain_module(d).TEMPLATES if t.held_out}
    assert len(held_out) == 13  # ten single kinds, and each domain's held-out brief
    for split, root in small_sets.items():
        for task in json.loads((root / MANIFEST).read_text())["tasks"]:
            meta = tomllib.loads((root / task["path"] / "task.toml").read_text())["metadata"]
            assert meta["held_out_kind"] is task["held_out_kind"] is (task["template"] in held_out)
            assert not (split == "train" and task["held_out_kind"]), task["task_id"]
    evaluation = json.loads((small_sets["eval"] / MANIFEST).read_text())["tasks"]
    assert any(t["held_out_kind"] for t in evaluation)


def test_every_task_validates_as_a_harbor_task(small_sets: dict[str, Path]) -> None:
    for root in small_sets.values():
        report = validate_dataset(root, require_solution=True)
        assert report.ok, report.summary()
        assert len(load_dataset(root).task_ids) == len(
            json.loads((root / MANIFEST).read_text())["tasks"]
        )


@pytest.mark.parametrize("mode, expected", [("oracle", 1.0), ("empty", 0.0)])
def test_oracle_scores_one_and_empty_scores_zero(
    small_sets: dict[str, Path], mode: str, expected: float
) -> None:
    for root in small_sets.values():
        dirs = sorted(p for p in root.iterdir() if (p / "task.toml").exists())
        outcomes = check_tasks(dirs, mode, jobs=1)  # type: ignore[arg-type]
        bad = [(o.task_id, o.reward, o.error, o.failed_criteria) for o in outcomes if not o.ok]
        assert not bad
        assert all(o.reward == expected for o in outcomes)


def test_workspace_files_are_hard_links_shared_by_a_world(small_sets: dict[str, Path]) -> None:
    root = small_sets["eval"]
    manifest = json.loads((root / MANIFEST).read_text())
    world = manifest["worlds"][0]["world_id"]
    tasks = [t["path"] for t in manifest["tasks"] if t["world_id"] == world][:2]
    a, b = (sorted((root / t / "environment" / "workspace").rglob("*.*")) for t in tasks)
    assert [p.name for p in a] == [p.name for p in b]
    assert all(os.path.samefile(x, y) for x, y in zip(a, b, strict=True))


def test_rubric_is_never_visible_to_the_agent_or_the_oracle(small_sets: dict[str, Path]) -> None:
    for task in (small_sets["eval"]).iterdir():
        if not (task / "task.toml").exists():
            continue
        workspace = task / "environment" / "workspace"
        assert not list(workspace.rglob("rubric.json"))
        # A multi-step task keeps a rubric and an oracle per step.
        for part in sorted((task / "steps").iterdir()) if (task / "steps").is_dir() else [task]:
            rubric = json.loads((part / "tests" / "rubric.json").read_text())
            params = (part / "solution" / "params.json").read_text()
            for key, value in rubric["gold"].items():
                if isinstance(value, int | float) and not isinstance(value, bool) and value > 1e3:
                    assert str(value) not in params, (task.name, part.name, key)


def test_same_seed_same_bytes_whatever_the_worker_count(tmp_path: Path) -> None:
    build_split(BuildConfig("eval", 3, 9, 5, tmp_path / "a", files_per_world=20, jobs=1))
    build_split(BuildConfig("eval", 3, 9, 5, tmp_path / "b", files_per_world=20, jobs=2))
    build_split(BuildConfig("eval", 3, 9, 6, tmp_path / "c", files_per_world=20, jobs=2))
    a, b, c = (_tree_hashes(tmp_path / x) for x in "abc")
    assert a == b
    assert a != c


def test_starter_worlds_are_small(tmp_path: Path) -> None:
    report = build_split(BuildConfig("train", 3, 9, 3, tmp_path / "s", difficulty="starter"))
    manifest = json.loads((tmp_path / "s" / MANIFEST).read_text())
    assert all(5 <= w["n_files"] <= 10 for w in manifest["worlds"])
    assert report["tasks"] == 9
    outcomes = check_tasks(sorted(p for p in (tmp_path / "s").iterdir() if p.is_dir()), "oracle")
    assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok]


def test_templates_per_domain_and_deliverables() -> None:
    for domain in DOMAINS:
        templates = domain_module(domain).TEMPLATES
        standard = [t for t in templates if "standard" in t.difficulties]
        assert len(standard) >= 8, domain
        assert sum(t.kind == "deliverable" for t in standard) >= 2, domain
        assert {"fact", "multi_hop", "compute", "reconcile", "deliverable"} <= {
            t.kind for t in standard
        }
        assert sum("starter" in t.difficulties for t in templates) >= 3, domain


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"worlds": 0, "tasks": 5}, "--worlds"),
        ({"worlds": 4, "tasks": 3}, "--tasks"),
        ({"worlds": 1, "tasks": 5, "files_per_world": 500}, "--files"),
        ({"worlds": 1, "tasks": 5, "files_per_world": 12, "difficulty": "starter"}, "--files"),
    ],
)
def test_bad_build_configs_name_the_option(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BuildConfig(split="train", seed=0, out=tmp_path, **kwargs)  # type: ignore[arg-type]


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="--force"):
        build_split(BuildConfig("train", 1, 1, 0, tmp_path / "x"))
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


def test_every_generated_file_opens_with_its_library(small_sets: dict[str, Path]) -> None:
    manifest = json.loads((small_sets["train"] / MANIFEST).read_text())
    seen_types: set[str] = set()
    for world in manifest["worlds"][:3]:  # one world of each domain
        task = next(t["path"] for t in manifest["tasks"] if t["world_id"] == world["world_id"])
        files = [p for p in (small_sets["train"] / task).rglob("workspace/**/*") if p.is_file()]
        assert len(files) == world["n_files"]
        for path in files:
            open_with_library(path)
            seen_types.add(path.suffix)
    assert seen_types == {".pdf", ".xlsx", ".docx", ".pptx", ".eml", ".json", ".ics"}


def test_judge_criteria_are_added_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deal memos offer an LLM-judge criterion on the memo's text; a build adds it (and says so
    in task.toml) only with judge_criteria, and the grader then leaves it to the judge."""
    import bureau.worlds.builder as builder_module
    from bureau.grading import grade, load_rubric
    from bureau.tasks.taskdir import load_task_dir

    monkeypatch.setattr(builder_module, "DOMAINS", ("banking",))
    found = {}
    for judged in (False, True):
        out = tmp_path / str(judged)
        # As many tasks as banking has standard templates: each template once, the memo too.
        cfg = BuildConfig("eval", 1, 13, 0, out, files_per_world=20, jobs=1, judge_criteria=judged)
        build_split(cfg)
        memos = [
            p for p in out.iterdir()
            if (p / "task.toml").exists() and "deal_memo" in (p / "task.toml").read_text()
        ]  # fmt: skip
        assert memos, "every template gives a task, the deal memo too"
        rubric = json.loads((memos[0] / "tests" / "rubric.json").read_text())
        found[judged] = [c for c in rubric["criteria"] if c["type"] == "judge"]
        metadata = load_task_dir(memos[0]).config.metadata
        assert metadata.get("judge_criteria") == (1 if judged else None)
        if judged:
            (criterion,) = found[judged]
            assert criterion["path"].endswith(".docx") and criterion["reference"]
            empty = tmp_path / "empty"
            empty.mkdir()
            report = grade(load_rubric(memos[0] / "tests" / "rubric.json"), empty)
            assert report.pending == []  # no memo to judge: the criterion fails here
            assert not next(r for r in report.results if r.type == "judge").passed
    assert found[False] == []
