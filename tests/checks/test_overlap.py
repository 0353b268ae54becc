"""`bureau tasks overlap`: hand-made instructions at each level, then the real splits.

The last tests plan the full default train, validation and eval splits, build the demo's
starter sets and fail on any exact duplicate: the splits are disjoint by construction (each
split draws the names and ids its instructions mention from its own part of every pool, by a
hash of the value), and this is the check.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bureau.checks.overlap import (
    Instruction,
    find_overlap,
    load_instructions,
    planned_instructions,
)
from bureau.cli.demo_rl import DemoSizes
from bureau.worlds.builder import DOMAINS, BuildConfig, build_split, domain_module

CONVENTION = "## How to answer\n\nWrite output/answer.json with the keys above."


def instruction(
    task: str, text: str, names: tuple[str, ...] = (), template: str = "t"
) -> Instruction:
    return Instruction(task, template, f"# Title\n\n{text}\n\n{CONVENTION}\n", names)


def test_levels_of_overlap() -> None:
    train = [
        instruction("a", "Look up contract C-101 for Ana Weber at Cobalt Energy."),
        instruction("b", "What is the 2027 TAM of the Enterprise segment, and its SAM?", (), "u"),
        instruction("c", "Which directors voted against resolution 2?"),
    ]
    evaluation = [
        # word for word (whitespace aside)
        instruction(
            "x", "Look up contract  C-101 for Ana Weber\nat Cobalt Energy.", ("Ana", "Cobalt")
        ),
        # the same question about another world's people and company
        instruction(
            "y", "Look up contract C-101 for Ben Osei at Amber Energy.", ("Ben", "Osei", "Amber")
        ),
        # one word changed in a long question: near, not exact
        instruction("z", "What is the 2028 TAM of the Enterprise segment, and its SAM?", (), "u"),
        instruction("w", "Summarise the indemnity clause of the supply agreement in a memo."),
    ]
    # Masking needs the train task's names too: "Ana", "Weber", "Cobalt" are world names there.
    train[0] = instruction("a", train[0].text.split("\n\n")[1], ("Ana", "Weber", "Cobalt"))
    evaluation[0] = instruction("x", evaluation[0].text.split("\n\n")[1], train[0].names)
    found = find_overlap(train, evaluation, threshold=0.5)
    assert [(p.task, p.other) for p in found.exact] == [("x", "a")]
    assert [(p.task, p.other) for p in found.masked] == [("x", "a"), ("y", "a")]
    # The title and the answer convention are in every text, so left out. The question is 14
    # words ("segment" "," ... "sam" "?"), 12 3-grams; 2027 -> 2028 changes the 3 that hold
    # the year: 9 shared of 15 in all, 0.6.
    near = {p.task: (p.other, p.similarity) for p in found.near}
    assert near == {"x": ("a", 1.0), "y": ("a", 1.0), "z": ("b", 0.6)}
    assert (found.templates["t"].tasks, found.templates["t"].exact) == (3, 1)
    assert found.templates["u"].near == 1
    assert find_overlap(train, evaluation, threshold=0.7).to_dict()["near"] == 2


def test_the_shared_answer_convention_does_not_make_tasks_alike() -> None:
    """Without leaving out the paragraph every task shares, two unrelated short questions
    would look alike through it."""
    train = [instruction(f"t{i}", f"Question number {i} about file {i}.") for i in range(3)]
    evaluation = [instruction("e", "An unrelated request about a merger model.")]
    assert find_overlap(train, evaluation).near == []
    with pytest.raises(ValueError):
        find_overlap(train, evaluation, threshold=0)


@pytest.mark.parametrize("difficulty", ["standard", "starter"])
def test_planned_instructions_are_the_built_ones(tmp_path: Path, difficulty: str) -> None:
    """Planning a split without writing its files gives the instructions, templates and names
    that building it writes: the test below checks the full default splits that way."""
    cfg = BuildConfig("eval", 4, 30, 3, tmp_path / "built", difficulty, jobs=1)  # type: ignore[arg-type]
    build_split(cfg)
    planned = planned_instructions(dataclasses.replace(cfg, jobs=2))
    assert planned == load_instructions(cfg.out)
    assert len(planned) == 30 and all(i.names for i in planned)
    assert not (tmp_path / "built" / ".staging").exists()


@pytest.mark.slow
def test_default_splits_and_demo_sets_share_no_instruction(tmp_path: Path) -> None:
    """The full default splits (`bureau worlds build --split train|validation|eval`) and the
    demo's starter sets: no held-out instruction is word for word a training one. The default
    splits (2,888 tasks) are planned, not built (the test above ties the two); the demo's sets
    are built and compared through the command a user runs, which also reports what their
    held-out tasks copy that training never showed."""
    train = planned_instructions(BuildConfig("train", 112, 1928, 0, tmp_path / "train", jobs=2))
    held_out = {
        split: planned_instructions(BuildConfig(split, 33, 480, 0, tmp_path / split, jobs=2))
        for split in ("validation", "eval")
    }
    assert (len(train), *map(len, held_out.values())) == (1928, 480, 480)
    for tasks in held_out.values():
        found = find_overlap(train, tasks)
        assert found.exact == [], found.to_dict()["examples"]
    assert find_overlap(held_out["validation"], held_out["eval"]).exact == []
    assert not (tmp_path / "train").exists()
    # Kinds of task no training split has: none in train, at least a fifth of eval.
    unseen = {t.name for d in DOMAINS for t in domain_module(d).TEMPLATES if t.held_out}
    assert not [i for i in train if i.template in unseen]
    assert sum(i.template in unseen for i in held_out["eval"]) >= 0.2 * len(held_out["eval"])

    sizes = DemoSizes()
    configs = {
        split: BuildConfig(split, worlds, worlds * 8, 0, tmp_path / f"demo-{split}", "starter")
        for split, worlds in (
            ("train", sizes.train_worlds),
            ("validation", sizes.validation_worlds),
            ("eval", sizes.eval_worlds),
        )
    }
    for cfg in configs.values():
        build_split(cfg)
    loaded = {split: load_instructions(cfg.out) for split, cfg in configs.items()}
    assert find_overlap(loaded["train"], loaded["validation"]).exact == []
    report = tmp_path / "demo.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "bureau.cli.main", "tasks", "overlap",
            str(configs["train"].out), str(configs["eval"].out), "--report", str(report),
            "--vocab", "none",
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print(done.stdout[-6000:])
    found_demo = json.loads(report.read_text())
    assert (found_demo["first_tasks"], found_demo["second_tasks"]) == (
        configs["train"].tasks,
        configs["eval"].tasks,
    )
    assert found_demo["exact"] == 0, found_demo["examples"]["exact"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # What the demo's trained templates copy: the register lookups a contract id (from the
    # prompt, or from a folder's listing) and the banking named ranges a file name, never seen
    # in training; the consulting named ranges nothing new (the same three names in every
    # world), which the report says.
    novelty = found_demo["novelty"]["templates"]
    for name in ("law.starter_register_value", "law.starter_executed_lookup"):
        assert novelty[name]["novel_tasks_share"] == 1.0, (name, novelty[name])
    assert novelty["banking.starter_named_range"]["novel_tasks_share"] == 1.0
    assert novelty["consulting.starter_named_range"]["needs_nothing_new"] is True
    assert "consulting.starter_named_range" in found_demo["novelty"]["needs_nothing_new"]
    # Every world lists its own names for the masked comparison.
    manifest = json.loads((configs["eval"].out / "bureau-dataset.json").read_text())
    assert all(world["names"] for world in manifest["worlds"])
