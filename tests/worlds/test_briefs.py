"""Briefs: several of a domain's questions in one task, each item's keys, criteria and gold
under its prefix, answered by the items' own oracles; an item wrong fails the brief's reward
of 1.0; the held-out brief is evaluation-only and holds a held-out kind."""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bureau.checks.offline import check_tasks, grade_workspace, run_oracle
from bureau.worlds.briefs import ITEMS, compose
from bureau.worlds.builder import MANIFEST, BuildConfig, build_split, domain_module, plan_split
from bureau.worlds.builder import world_tasks as generate_world_tasks
from bureau.worlds.spec import DOMAINS, TaskSpec, numeric, text


def _item(template: str, key: str, value: Any, evidence: list[str]) -> TaskSpec:
    check = (
        numeric(key, value, "States it")
        if isinstance(value, float)
        else text(key, value, "Names it")
    )
    return TaskSpec(
        template=template, kind="fact", title=f"{template} title", question=f"Ask {template}?",
        answer_keys={key: "what it is"}, criteria=[check], gold={key: value},
        oracle={"who": template}, signature=f"sig-{template}", evidence=evidence,
    )  # fmt: skip


def test_compose_puts_every_item_under_its_prefix() -> None:
    items = [
        _item("law.b", "cap_usd", 5.0, ["a.pdf", "r.xlsx"]),
        _item("law.a", "contract_id", "C-1", ["r.xlsx", "m.eml"]),
    ]
    items[1].answer_keys["party"] = "who it is"
    items[1].criteria.append(text("party", "Acme", "Names the party"))
    items[1].gold["party"] = "Acme"
    brief = compose("law.brief", items, random.Random(0), "Dana Reyes")
    assert brief.answer_keys == {
        "q1_cap_usd": "what it is", "q2_contract_id": "what it is", "q2_party": "who it is"
    }  # fmt: skip
    # One criterion per item: the one check of item 1, all of item 2's checks together.
    one, two = brief.criteria
    assert one["field"] == "q1_cap_usd" and one["description"] == "Item 1: States it"
    assert two["type"] == "all_of" and two["description"].startswith("Item 2 (law.a title)")
    assert [(c["field"], c["description"]) for c in two["criteria"]] == [
        ("q2_contract_id", "Names it"), ("q2_party", "Names the party")
    ]  # fmt: skip
    assert brief.gold == {"q1_cap_usd": 5.0, "q2_contract_id": "C-1", "q2_party": "Acme"}
    assert brief.oracle == {
        "items": [
            {"prefix": "q1_", "template": "law.b", "who": "law.b"},
            {"prefix": "q2_", "template": "law.a", "who": "law.a"},
        ]
    }
    assert brief.evidence == ["a.pdf", "r.xlsx", "m.eml"]
    assert "Dana Reyes" in brief.question and "Item 2 (law.a title). Ask law.a?" in brief.question
    # The same items in another order are the same brief.
    again = compose("law.brief", items[::-1], random.Random(1), "Dana Reyes")
    assert again.signature == brief.signature
    with pytest.raises(ValueError, match="distinct templates"):
        compose("law.brief", [items[0], items[0]], random.Random(0), "Dana Reyes")


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One world per domain in each split, enough tasks that every domain has briefs."""
    root = tmp_path_factory.mktemp("briefs")
    build_split(BuildConfig("train", 3, 24, 5, root / "train", files_per_world=20, jobs=1))
    build_split(BuildConfig("eval", 3, 30, 5, root / "eval", files_per_world=20, jobs=1))
    return {"train": root / "train", "eval": root / "eval"}


def _tasks(root: Path) -> list[dict[str, Any]]:
    return list(json.loads((root / MANIFEST).read_text())["tasks"])


def test_briefs_are_answered_by_their_items_oracles(sets: dict[str, Path]) -> None:
    held_out = {t.name for d in DOMAINS for t in domain_module(d).TEMPLATES if t.held_out}
    for split, root in sets.items():
        briefs = [t for t in _tasks(root) if ".brief" in t["template"]]
        assert {t["domain"] for t in briefs} == set(DOMAINS), split
        for task in briefs:
            params = json.loads((root / task["path"] / "solution" / "params.json").read_text())
            items = [item["template"] for item in params["items"]]
            assert len(items) == ITEMS["standard"] == len(set(items)), items
            assert not {".brief", "_unsupported"} & {i[i.index(".") :] for i in items}
            unseen = task["template"].endswith(".brief_unseen")
            meta = tomllib.loads((root / task["path"] / "task.toml").read_text())["metadata"]
            assert meta["held_out_kind"] is unseen
            assert bool(held_out & set(items)) is unseen, (split, items)
            assert not (split == "train" and unseen)
            prompt = (root / task["path"] / "instruction.md").read_text()
            assert [int(n) for n in re.findall(r"^Item (\d+) \(", prompt, re.M)] == [1, 2, 3, 4]
        dirs = [root / t["path"] for t in briefs]
        for mode, reward in (("oracle", 1.0), ("empty", 0.0)):
            outcomes = check_tasks(dirs, mode, jobs=1)
            assert [(o.task_id, o.reward, o.error) for o in outcomes if o.reward != reward] == []
    assert any(t["template"].endswith(".brief_unseen") for t in _tasks(sets["eval"]))


def test_one_item_wrong_fails_the_brief(sets: dict[str, Path]) -> None:
    task = next(t for t in _tasks(sets["eval"]) if t["template"].endswith(".brief"))
    task_dir = sets["eval"] / task["path"]
    with tempfile.TemporaryDirectory() as scratch:
        workspace, verifier = Path(scratch) / "ws", Path(scratch) / "verifier"
        shutil.copytree(task_dir / "environment" / "workspace", workspace)
        verifier.mkdir()
        run_oracle(task_dir, workspace, verifier)
        answer_file = workspace / "output" / "answer.json"
        answer = json.loads(answer_file.read_text())
        assert grade_workspace(task_dir, workspace, verifier)[1]
        key = next(k for k in answer if k.startswith("q3_"))
        answer[key] = "not the answer" if isinstance(answer[key], str) else -1
        answer_file.write_text(json.dumps(answer))
        reward, passed, failed = grade_workspace(task_dir, workspace, verifier)
    # One criterion per item: the brief's reward is the share of items answered in full.
    assert not passed and reward == 1 - 1 / ITEMS["standard"]
    assert len(failed) == 1 and failed[0].startswith("c3: "), failed
    rubric = json.loads((task_dir / "tests" / "rubric.json").read_text())
    assert len(rubric["criteria"]) == ITEMS["standard"]


def test_a_hard_world_asks_more_items() -> None:
    cfg = BuildConfig("eval", 1, 40, 2, Path("/nonexistent"), "hard", jobs=1)
    with tempfile.TemporaryDirectory() as scratch:
        _, specs = generate_world_tasks(plan_split(cfg)[0], cfg, Path(scratch), render=False)
    briefs = [s for s in specs if ".brief" in s.template]
    assert briefs and all(len(s.oracle["items"]) == ITEMS["hard"] for s in briefs)
