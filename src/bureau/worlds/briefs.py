"""Briefs: one request that bundles several of a domain's questions, each answered from its own
files, the way a partner asks an associate for everything a meeting needs in one go.

A brief's items are the domain's own single-answer tasks (a fact, a computation, a
reconciliation), drawn from distinct templates, so its answer needs the union of their
evidence: a contract PDF, the register, the minutes and an amendment email; a model, the
comps, a term sheet and the deal timetable. Each item keeps its own question (and its own rules
for conflicting sources) and its answer keys under the item's prefix (`q1_`, `q2_`, ...). The
rubric has one criterion per item (`all_of` the item's own checks, or the one check of an item
that has one), so a brief of four items has four criteria, its reward is the share of items
answered in full, and it passes only when every item does.

Items are never deliverables, multi-step tasks or questions the files cannot support (those
have one answer file, one `unsupported_reason` key or steps of their own), and no two items
declare the same evidence file (`TaskSpec.evidence`: two questions about the statement of work
would ask for one file less). A standard world's
briefs have `ITEMS["standard"]` items, a hard world's `ITEMS["hard"]`.

Two brief templates per domain: `<domain>.brief` draws items only from kinds a training split
has; `<domain>.brief_unseen` is itself a held-out kind (evaluation only) with at least one
item of a held-out kind, so that an evaluation still reports seen and unseen kinds apart.

The oracle (`oracle_lib.solve_items`) runs each item's solver in turn and prefixes its keys.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from .spec import Difficulty, TaskSpec, Template, phrasing

ITEMS: dict[Difficulty, int] = {"starter": 2, "standard": 4, "hard": 6}
"""Items per brief, by the world's difficulty (starter worlds offer no brief)."""

WEIGHT = 12
"""How often a world draws `<domain>.brief` against once for each single template: about half
of a standard world's tasks are briefs (`builder.choose_tasks`)."""
UNSEEN_WEIGHT = 6


def prefix(index: int) -> str:
    return f"q{index + 1}_"


def _usable(spec: TaskSpec | None) -> bool:
    return (
        spec is not None
        and not spec.deliverables
        and not spec.steps
        and not spec.infeasible
        and not spec.judged
        and all("field" in c for c in spec.criteria)
    )


def compose(name: str, items: Sequence[TaskSpec], rng: random.Random, whom: str) -> TaskSpec:
    """One task asking every item's question, its keys, criteria and gold under the item's
    prefix; the oracle runs the items' solvers (`oracle_lib.solve_items`)."""
    if len({item.template for item in items}) != len(items):
        raise ValueError(f"{name}: a brief's items come from distinct templates")
    intro = phrasing(
        rng,
        [
            f"{whom} needs {len(items)} answers before a meeting, one per item below. Each item "
            "is a question of its own, with its own rules for conflicting sources; answer item "
            "N under the keys that start with `qN_`.",
            f"Before the meeting, {whom} asks you for the {len(items)} items below in one "
            "answer. Treat each item as a separate question (its rules apply to it alone) and "
            "give item N's answers under the keys beginning `qN_`.",
        ],
    )
    body = [intro]
    keys: dict[str, str] = {}
    criteria: list[dict[str, Any]] = []
    gold: dict[str, Any] = {}
    solvers: list[dict[str, Any]] = []
    evidence: list[str] = []
    for index, item in enumerate(items):
        head = prefix(index)
        body.append(f"Item {index + 1} ({item.title}). {item.question}")
        keys.update({head + key: desc for key, desc in item.answer_keys.items()})
        parts = [{**c, "field": head + c["field"]} for c in item.criteria]
        criteria.append(
            {**parts[0], "description": f"Item {index + 1}: {parts[0]['description']}"}
            if len(parts) == 1
            else {
                "type": "all_of",
                "description": f"Item {index + 1} ({item.title}): all {len(parts)} of its checks",
                "criteria": parts,
            }
        )
        gold.update({head + key: value for key, value in item.gold.items()})
        solvers.append({"prefix": head, "template": item.template, **item.oracle})
        evidence.extend(f for f in item.evidence if f and f not in evidence)
    return TaskSpec(
        template=name,
        kind="multi_hop",
        title=phrasing(rng, [f"Brief: {len(items)} questions", f"{len(items)} items for {whom}"]),
        question="\n\n".join(body),
        answer_keys=keys,
        criteria=criteria,
        gold=gold,
        oracle={"items": solvers},
        signature="brief:" + "+".join(sorted(item.signature for item in items)),
        evidence=evidence,
    )


def brief_templates(
    domain: str, singles: Sequence[Template], whom: Callable[[Any], str]
) -> list[Template]:
    """`<domain>.brief` and `<domain>.brief_unseen` over the domain's `singles` (its other
    templates offered in standard worlds); `whom(facts)` names who asks."""
    pool = [t for t in singles if "standard" in t.difficulties and t.kind != "deliverable"]
    seen = [t for t in pool if not t.held_out]
    held = [t for t in pool if t.held_out]
    unseen_names = {t.name for t in held}

    def maker(name: str, unseen: bool) -> Callable[[Any, random.Random, int], TaskSpec | None]:
        def make(facts: Any, rng: random.Random, variant: int) -> TaskSpec | None:
            n = ITEMS[facts.ctx.difficulty]
            if unseen:
                if not held:
                    return None
                order = [rng.choice(held)]
                rest = [t for t in pool if t is not order[0]]
                rng.shuffle(rest)
                order += rest
            else:
                order = list(seen)
                rng.shuffle(order)
            items: list[TaskSpec] = []
            declared: set[str] = set()  # files the items so far say they need
            for template in order:
                spec = template.make(facts, rng, rng.randrange(4))
                if _usable(spec):
                    assert spec is not None
                    if declared & set(spec.evidence):
                        continue  # two items about one file would ask for fewer files
                    declared.update(spec.evidence)
                    items.append(spec)
                if len(items) == n:
                    break
            if len(items) < n or (unseen and not {i.template for i in items} & unseen_names):
                return None
            rng.shuffle(items)
            return compose(name, items, rng, whom(facts))

        return make

    return [
        Template(f"{domain}.brief", "multi_hop", maker(f"{domain}.brief", False), weight=WEIGHT),
        Template(
            f"{domain}.brief_unseen",
            "multi_hop",
            maker(f"{domain}.brief_unseen", True),
            held_out=True,
            weight=UNSEEN_WEIGHT,
        ),
    ]
