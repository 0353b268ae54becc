"""How much two datasets share in their instructions: exact, name-masked and near duplicates.

A held-out claim is only as good as the split: an evaluation prompt that is word for word a
training prompt measures recall, not skill. `find_overlap(train, eval)` compares every
instruction of the second dataset with every instruction of the first at three levels:

- **exact**: the same text, whitespace aside.
- **same but for names**: the same text once each world's own names are masked (its company,
  people, counterparties, project code names: the words the generator lists under the
  manifest's `worlds[].names`; for other datasets, the company in task.toml's metadata). The
  same question about another company's people.
- **near**: word 3-gram Jaccard similarity of the masked texts at or above a threshold (0.8 by
  default): a rephrasing that keeps most of the wording.

Paragraphs that more than half of all instructions share (the answer convention every bureau
task ends with) are left out of the masked and near comparisons, so they measure the part of
an instruction that is the task's own. Candidates for the near level come from an inverted
index of 3-grams, so the full default splits (1928 x 480 tasks) compare in seconds.

`planned_instructions(cfg)` gives the instructions a `bureau worlds build` with that config
would write, without writing the worlds: the generator runs as in a build (the same draws, so
the same tasks) but does not serialise workbooks, documents and decks, which is most of a
build's time.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bureau.tasks.dataset import load_dataset
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.worlds.builder import BuildConfig, WorldPlan, plan_split, task_id, world_names
from bureau.worlds.builder import world_tasks as generate_world_tasks
from bureau.worlds.spec import TaskSpec, WorldContext
from bureau.worlds.taskwriter import task_instruction

NEAR_THRESHOLD = 0.8
SHINGLE = 3
MASK = "<name>"
T = TypeVar("T")
_WORD = re.compile(r"\d[\d,.]*\d|\w[\w'-]*|[^\w\s]")
"""A word: a number (1,250.5 whole), a word with its hyphens and apostrophes, or a sign."""


@dataclass(frozen=True)
class Instruction:
    task: str
    template: str
    text: str
    names: tuple[str, ...]
    """The world's own names, masked in the name-masked and near comparisons."""


@dataclass
class Pair:
    task: str
    other: str
    """The first dataset's task it overlaps with."""
    similarity: float


@dataclass
class TemplateOverlap:
    tasks: int = 0
    exact: int = 0
    masked: int = 0
    near: int = 0


@dataclass
class OverlapReport:
    first: str
    second: str
    first_tasks: int
    second_tasks: int
    threshold: float
    exact: list[Pair] = field(default_factory=list)
    masked: list[Pair] = field(default_factory=list)
    """Second-dataset tasks equal to a first-dataset task once names are masked (the exact
    ones included)."""
    near: list[Pair] = field(default_factory=list)
    """Second-dataset tasks whose best match is at or above the threshold (all of the above
    included), with that match."""
    templates: dict[str, TemplateOverlap] = field(default_factory=dict)

    def to_dict(self, examples: int = 10) -> dict[str, Any]:
        def pairs(found: list[Pair]) -> list[dict[str, Any]]:
            return [vars(p) for p in found[:examples]]

        return {
            "first": self.first,
            "second": self.second,
            "first_tasks": self.first_tasks,
            "second_tasks": self.second_tasks,
            "threshold": self.threshold,
            "exact": len(self.exact),
            "masked": len(self.masked),
            "near": len(self.near),
            "examples": {
                "exact": pairs(self.exact),
                "masked": pairs(self.masked),
                "near": pairs(self.near),
            },
            "templates": {name: vars(t) for name, t in sorted(self.templates.items())},
        }


def load_instructions(root: Path) -> list[Instruction]:
    """Every task's instruction, template and world names (a dataset folder or one task)."""
    return [instruction_of(task, names) for task, names in load_tasks(root)]


def load_tasks(root: Path) -> list[tuple[TaskDir, tuple[str, ...]]]:
    """Every task of a dataset folder (or the one task folder), loaded once, with its world's
    names from the manifest (none for a lone task or a world that lists none)."""
    if (root / "task.toml").is_file():
        paths: list[tuple[Path, tuple[str, ...]]] = [(root, ())]
    else:
        dataset = load_dataset(root)
        world_names: dict[str, tuple[str, ...]] = {}
        for world in dataset.manifest.worlds:
            listed = world.get("names")
            if isinstance(listed, list):
                world_names[str(world.get("world_id"))] = tuple(str(n) for n in listed)
        paths = [(dataset.root / e.path, world_names.get(e.world_id, ())) for e in dataset.entries]
    return [(load_task_dir(path), names) for path, names in paths]


def instruction_of(task: TaskDir, names: tuple[str, ...]) -> Instruction:
    """A loaded task's instruction; without its world's `names`, the company's words are the
    names masked."""
    meta = task.config.metadata
    company = meta.get("company")
    extra = tuple(str(company).split()) if isinstance(company, str) and not names else ()
    return Instruction(task.name, template_of(task), task.prompt, names + extra)


def template_of(task: TaskDir) -> str:
    """The template in task.toml's metadata ("" where there is none)."""
    template = task.config.metadata.get("template")
    return template if isinstance(template, str) else ""


def planned_instructions(cfg: BuildConfig) -> list[Instruction]:
    """The instructions, templates and world names that building `cfg` would write, in the
    dataset's order, generated `cfg.jobs` worlds at a time (`cfg.out` is not touched)."""
    return plan_worlds(cfg, _world_instructions)


def plan_worlds(cfg: BuildConfig, per_world: Callable[[PlannedWorld], list[T]]) -> list[T]:
    """`per_world` of each world that building `cfg` would write, in the dataset's order, the
    worlds generated `cfg.jobs` at a time without rendering their files (`cfg.out` is not
    touched). `per_world` must be a module-level function: it runs in worker processes."""
    plans = plan_split(cfg)
    jobs = max(1, min(cfg.jobs, len(plans)))
    work = [(plan, cfg, per_world) for plan in plans]
    if jobs == 1:
        return [x for item in work for x in _plan_world(item)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return [x for world in pool.map(_plan_world, work) for x in world]


@dataclass(frozen=True)
class PlannedWorld:
    """One world of a planned build: its tasks' specs as a build would write them."""

    plan: WorldPlan
    ctx: WorldContext
    specs: list[TaskSpec]

    def task_name(self, j: int) -> str:
        """The j-th task's [task].name in the built dataset."""
        return f"bureau/{task_id(self.plan, j)}"


def _plan_world(item: tuple[WorldPlan, BuildConfig, Callable[[PlannedWorld], list[T]]]) -> list[T]:
    plan, cfg, per_world = item
    with tempfile.TemporaryDirectory(prefix="bureau-plan-") as scratch:
        ctx, specs = generate_world_tasks(plan, cfg, Path(scratch), render=False)
    return per_world(PlannedWorld(plan, ctx, specs))


def _world_instructions(world: PlannedWorld) -> list[Instruction]:
    names = tuple(world_names(world.ctx.company, world.specs))
    starter = world.ctx.difficulty == "starter"
    return [
        Instruction(
            world.task_name(j), spec.template, task_instruction(spec, starter=starter), names
        )
        for j, spec in enumerate(world.specs)
    ]


def find_overlap(
    first: list[Instruction],
    second: list[Instruction],
    *,
    threshold: float = NEAR_THRESHOLD,
    first_label: str = "first",
    second_label: str = "second",
) -> OverlapReport:
    """Each of `second`'s instructions against all of `first`'s (see the module docstring)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    common = _common_paragraphs([i.text for i in first + second])
    exact_index = {_normalized(i.text): i.task for i in first}
    masked_first = [_masked(i, common) for i in first]
    masked_index = {text: i.task for text, i in zip(masked_first, first, strict=True)}
    shingles_first = [_shingles(text) for text in masked_first]
    postings: dict[tuple[str, ...], list[int]] = {}
    for n, grams in enumerate(shingles_first):
        for gram in grams:
            postings.setdefault(gram, []).append(n)
    report = OverlapReport(first_label, second_label, len(first), len(second), threshold)
    for item in second:
        row = report.templates.setdefault(item.template or "(none)", TemplateOverlap())
        row.tasks += 1
        other = exact_index.get(_normalized(item.text))
        if other is not None:
            report.exact.append(Pair(item.task, other, 1.0))
            row.exact += 1
        masked = _masked(item, common)
        other = masked_index.get(masked)
        if other is not None:
            report.masked.append(Pair(item.task, other, 1.0))
            row.masked += 1
        best = _best_match(_shingles(masked), shingles_first, postings)
        if best is not None and best[1] >= threshold:
            report.near.append(Pair(item.task, first[best[0]].task, round(best[1], 4)))
            row.near += 1
    return report


def _normalized(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(text: str) -> list[str]:
    return [_normalized(p) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _common_paragraphs(texts: list[str]) -> set[str]:
    counts = Counter(p for text in texts for p in set(_paragraphs(text)))
    return {p for p, n in counts.items() if n > len(texts) / 2}


def _masked(item: Instruction, common: set[str]) -> str:
    text = "\n".join(p for p in _paragraphs(item.text) if p not in common)
    for name in sorted(set(item.names), key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", MASK, text)
    return text


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    if len(words) < SHINGLE:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def _best_match(
    grams: set[tuple[str, ...]],
    first: list[set[tuple[str, ...]]],
    postings: dict[tuple[str, ...], list[int]],
) -> tuple[int, float] | None:
    shared: Counter[int] = Counter()
    for gram in grams:
        shared.update(postings.get(gram, ()))
    best: tuple[int, float] | None = None
    for n, common in shared.items():
        similarity = common / (len(grams) + len(first[n]) - common)
        if best is None or similarity > best[1]:
            best = (n, similarity)
    return best
