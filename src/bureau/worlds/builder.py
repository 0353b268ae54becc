"""Builds a split of simulated companies and their Harbor tasks.

`build_split` plans every world up front (id, domain, company, task count, seed) in the parent
process, so the output depends only on the seed and not on how worlds are scheduled across
worker processes. Each worker writes one world's files into a staging folder, asks the domain's
templates for tasks, and writes the task directories with hard links back to the staged files.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .domains.banking_files import CODENAMES
from .fabric import FIRST, LAST, PREFIX, company_name
from .filler import fill_world
from .naive import naive_probe_ok
from .spec import DOMAINS, Difficulty, Domain, TaskSpec, Template, WorldContext
from .taskwriter import write_task_dir

MANIFEST = "bureau-dataset.json"
NAME_WORDS = frozenset((*FIRST, *LAST, *PREFIX, *CODENAMES))
_WORD = re.compile(r"[A-Z][a-z]+")
REPORT = "build-report.json"
STAGING = ".staging"
ORACLE_DIR = Path(__file__).parent / "oracles"
FILES_PER_WORLD: dict[Difficulty, tuple[int, int]] = {
    "starter": (5, 10),
    "standard": (150, 250),
    "hard": (500, 700),
}
"""A world's file count is drawn from its difficulty's range (`--files` fixes it instead)."""


@dataclass(frozen=True)
class BuildConfig:
    split: str
    worlds: int
    tasks: int
    seed: int
    out: Path
    difficulty: Difficulty = "standard"
    files_per_world: int | None = None
    jobs: int = 2
    force: bool = False
    judge_criteria: bool = False
    """Add the LLM-judge criteria templates offer (grading them then needs a judge)."""

    def __post_init__(self) -> None:
        if self.worlds < 1:
            raise ValueError("--worlds must be at least 1")
        if self.tasks < self.worlds:
            raise ValueError(f"--tasks ({self.tasks}) must be at least --worlds ({self.worlds})")
        if self.files_per_world is not None:
            lo, hi = FILES_PER_WORLD[self.difficulty]
            lo, hi = (lo, hi) if self.difficulty == "starter" else (20, hi)
            if not lo <= self.files_per_world <= hi:
                raise ValueError(
                    f"--files must be within {lo}..{hi} for {self.difficulty} worlds, "
                    f"got {self.files_per_world}"
                )


@dataclass(frozen=True)
class WorldPlan:
    index: int
    world_id: str
    domain: Domain
    company: str
    n_tasks: int
    n_files: int
    seed: str


@dataclass
class WorldResult:
    world: dict[str, Any]
    tasks: list[dict[str, Any]] = field(default_factory=list)


def domain_module(domain: str) -> ModuleType:
    return importlib.import_module(f"bureau.worlds.domains.{domain}")


def plan_split(cfg: BuildConfig) -> list[WorldPlan]:
    rng = random.Random(f"bureau:{cfg.seed}:{cfg.split}")
    taken: set[str] = set()
    plans = []
    base, extra = divmod(cfg.tasks, cfg.worlds)
    order: list[Domain] = []
    for i in range(cfg.worlds):
        if i % len(DOMAINS) == 0:
            order = list(DOMAINS)
            rng.shuffle(order)
        domain = order[i % len(DOMAINS)]
        if cfg.files_per_world is not None:
            n_files = cfg.files_per_world
        else:
            n_files = rng.randint(*FILES_PER_WORLD[cfg.difficulty])
        plans.append(
            WorldPlan(
                index=i,
                world_id=f"{cfg.split}-{domain}-{i:03d}",
                domain=domain,
                company=company_name(rng, cfg.split, domain, taken),
                n_tasks=base + (1 if i < extra else 0),
                n_files=n_files,
                seed=f"{cfg.seed}:{cfg.split}:{i}",
            )
        )
    return plans


def offered(template: Template, difficulty: Difficulty) -> bool:
    """A hard world offers the standard templates as well as any marked hard."""
    levels = template.difficulties
    return difficulty in levels or (difficulty == "hard" and "standard" in levels)


def choose_tasks(module: ModuleType, facts: Any, ctx: WorldContext, n_tasks: int) -> list[TaskSpec]:
    """Cycle through the domain's templates (shuffled, each `Template.weight` times) until
    `n_tasks` distinct tasks exist. A training split never gets a held-out kind
    (`Template.held_out`)."""
    templates = [
        t
        for t in module.TEMPLATES
        if offered(t, ctx.difficulty) and not (t.held_out and ctx.split == "train")
        for _ in range(t.weight)
    ]
    rng = random.Random(f"{ctx.rng.random()}:tasks")
    rng.shuffle(templates)
    specs: list[TaskSpec] = []
    seen: set[str] = set()
    attempt = 0
    while len(specs) < n_tasks:
        if attempt > n_tasks * 20 + 50:
            raise RuntimeError(
                f"world {ctx.world_id}: only {len(specs)} distinct tasks for {n_tasks} requested"
            )
        template = templates[attempt % len(templates)]
        spec = template.make(facts, rng, attempt // len(templates))
        attempt += 1
        if spec is None or spec.signature in seen:
            continue
        seen.add(spec.signature)
        spec.held_out_kind = template.held_out
        specs.append(spec)
    return specs


def world_tasks(
    plan: WorldPlan, cfg: BuildConfig, workspace: Path, *, render: bool = True
) -> tuple[WorldContext, list[TaskSpec]]:
    """Generate the world's files into `workspace` and choose its tasks. With `render` false
    the workbooks, documents and decks are not written (see `WorldContext.render`): the tasks
    are the same, in a fraction of the time."""
    ctx = WorldContext(
        world_id=plan.world_id,
        domain=plan.domain,
        split=cfg.split,
        difficulty=cfg.difficulty,
        company=plan.company,
        workspace=workspace,
        rng=random.Random(plan.seed),
        n_files=plan.n_files,
        render=render,
    )
    module = domain_module(plan.domain)
    facts = module.build(ctx)
    fill_world(ctx)
    return ctx, choose_tasks(module, facts, ctx, plan.n_tasks)


def task_id(plan: WorldPlan, j: int) -> str:
    return f"{plan.world_id}-t{j:02d}"


def build_world(plan: WorldPlan, cfg: BuildConfig, shared: dict[str, Path]) -> WorldResult:
    staging = cfg.out / STAGING / plan.world_id / "workspace"
    staging.mkdir(parents=True)
    ctx, specs = world_tasks(plan, cfg, staging)
    solve = shared[f"{plan.domain}.py"]
    result = WorldResult(world=world_entry(plan, ctx, specs))
    for j, spec in enumerate(specs):
        name = task_id(plan, j)
        files = {**shared, "solve.py": solve}
        write_task_dir(cfg.out / name, name, spec, ctx, files, judged=cfg.judge_criteria)
        probe = spec.pdf_probe
        result.tasks.append(
            {
                "task_id": name,
                "world_id": plan.world_id,
                "domain": plan.domain,
                "split": cfg.split,
                "path": name,
                "template": spec.template,
                "kind": spec.kind,
                "difficulty": cfg.difficulty,
                "n_criteria": sum(len(p.criteria) for p in [spec, *(p for _, p in spec.steps)]),
                "deliverable": bool(spec.deliverables),
                "held_out_kind": spec.held_out_kind,
                "evidence": spec.evidence,
                "infeasible": spec.infeasible,
                "steps": [name for name, _ in spec.steps],
                "pdf_layout": probe.layout if probe else None,
                "naive_pdf_ok": naive_probe_ok(staging / probe.file, probe) if probe else None,
            }
        )
    return result


def world_entry(plan: WorldPlan, ctx: WorldContext, specs: list[TaskSpec]) -> dict[str, Any]:
    by_type: dict[str, int] = {}
    size = chat = 0
    for rel in ctx.files:
        ext = Path(rel).suffix.lstrip(".") or "none"
        by_type[ext] = by_type.get(ext, 0) + 1
        size += (ctx.workspace / rel).stat().st_size
        if rel.startswith("chat/") and ext == "json":
            chat += len(json.loads((ctx.workspace / rel).read_text(encoding="utf-8"))["messages"])
    return {
        "world_id": plan.world_id,
        "domain": plan.domain,
        "company": plan.company,
        "n_files": len(ctx.files),
        "bytes": size,
        "files_by_type": dict(sorted(by_type.items())),
        "messages": {"mail": by_type.get("eml", 0), "chat": chat},
        "file_notes": dict(sorted(ctx.file_notes.items())),
        "names": world_names(plan.company, specs),
    }


def world_names(company: str, specs: list[TaskSpec]) -> list[str]:
    """The world's own names that its instructions use: the company's words and every first
    name, surname, company stem and project code name of the generator's pools that a title or
    question holds. `bureau tasks overlap` masks them to see whether two tasks are the same
    question about different people and companies."""
    words = {word for spec in specs for word in _WORD.findall(f"{spec.title} {spec.question}")}
    return sorted(set(company.split()) | (words & NAME_WORDS))


def _stage_shared(out: Path) -> dict[str, Path]:
    from bureau.grading.zipapp import build_zipapp

    shared_dir = out / STAGING / "shared"
    shared_dir.mkdir(parents=True)
    files = {"grader.pyz": build_zipapp(shared_dir / "grader.pyz")}
    for name in ["oracle_lib.py", *(f"{d}.py" for d in DOMAINS)]:
        if not (ORACLE_DIR / name).exists():
            continue
        shutil.copyfile(ORACLE_DIR / name, shared_dir / name)
        files[name] = shared_dir / name
    return files


def _build_one(args: tuple[WorldPlan, BuildConfig, dict[str, Path]]) -> WorldResult:
    return build_world(*args)


def build_split(
    cfg: BuildConfig, on_world: Callable[[WorldResult], None] | None = None
) -> dict[str, Any]:
    """Build every world of the split into `cfg.out`; returns the build report."""
    if cfg.out.exists() and any(cfg.out.iterdir()):
        if not cfg.force:
            raise FileExistsError(f"{cfg.out} is not empty (pass --force to replace it)")
        shutil.rmtree(cfg.out)
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    plans = plan_split(cfg)
    shared = _stage_shared(cfg.out)
    results: list[WorldResult] = []
    jobs = max(1, min(cfg.jobs, len(plans)))
    work = [(plan, cfg, shared) for plan in plans]
    if jobs == 1:
        for item in work:
            results.append(_build_one(item))
            if on_world:
                on_world(results[-1])
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for result in pool.map(_build_one, work):
                results.append(result)
                if on_world:
                    on_world(result)
    shutil.rmtree(cfg.out / STAGING)
    tasks = [t for r in results for t in r.tasks]
    manifest = {
        "format": "bureau-dataset/1",
        "name": f"bureau-{cfg.split}-{cfg.difficulty}",
        "split": cfg.split,
        "seed": cfg.seed,
        "difficulty": cfg.difficulty,
        "tasks": tasks,
        "worlds": [r.world for r in results],
    }
    (cfg.out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    report = summarize(manifest, time.perf_counter() - started, cfg)
    (cfg.out / REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def disk_usage(root: Path) -> int:
    """Bytes on disk (files and folders), counting each hard-linked file once, like `du`."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _, filenames in os.walk(root):
        total += os.lstat(dirpath).st_blocks * 512
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                total += st.st_blocks * 512
    return total


def _failure_rate(probes: list[dict[str, Any]]) -> float | None:
    return sum(1 for t in probes if not t["naive_pdf_ok"]) / len(probes) if probes else None


def _spread(values: list[int]) -> dict[str, float]:
    return {"mean": round(sum(values) / len(values), 1), "min": min(values), "max": max(values)}


def _evidence(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Files per answer and their kinds (suffixes), over the tasks whose template says which
    files hold its facts (`TaskSpec.evidence`), overall and per template."""
    said = [t for t in tasks if t.get("evidence")]
    per: dict[str, list[int]] = {}
    for t in said:
        per.setdefault(t["template"], []).append(len(t["evidence"]))
    kinds = [len({Path(f).suffix for f in t["evidence"]}) for t in said]
    return {
        "tasks": len(said),
        "files": _spread([len(t["evidence"]) for t in said]) if said else None,
        "kinds": _spread(kinds) if said else None,
        "by_template": {k: _spread(v) for k, v in sorted(per.items())},
    }


def summarize(manifest: dict[str, Any], seconds: float, cfg: BuildConfig) -> dict[str, Any]:
    tasks = manifest["tasks"]
    templates: dict[str, set[str]] = {d: set() for d in DOMAINS}
    for t in tasks:
        templates[t["domain"]].add(t["template"])
    probes = [t for t in tasks if t["naive_pdf_ok"] is not None]
    kinds: dict[str, int] = {}
    for t in tasks:
        kinds[t["kind"]] = kinds.get(t["kind"], 0) + 1
    n = max(1, len(tasks))
    return {
        "split": cfg.split,
        "difficulty": cfg.difficulty,
        "seed": cfg.seed,
        "worlds": len(manifest["worlds"]),
        "tasks": len(tasks),
        "worlds_by_domain": {
            d: sum(1 for w in manifest["worlds"] if w["domain"] == d) for d in DOMAINS
        },
        "files": sum(w["n_files"] for w in manifest["worlds"]),
        "files_per_world": _spread([w["n_files"] for w in manifest["worlds"]]),
        "messages_per_world": _spread(
            [w["messages"]["mail"] + w["messages"]["chat"] for w in manifest["worlds"]]
        ),
        "scanned_pdfs": sum(len(w["file_notes"]) for w in manifest["worlds"]),
        "templates_used": {d: len(s) for d, s in templates.items()},
        "templates_available": {
            d: {
                level: sum(offered(t, level) for t in domain_module(d).TEMPLATES)
                for level in ("starter", "standard", "hard")
            }
            for d in DOMAINS
        },
        "tasks_by_kind": dict(sorted(kinds.items())),
        "avg_criteria": sum(t["n_criteria"] for t in tasks) / n,
        "deliverable_fraction": sum(1 for t in tasks if t["deliverable"]) / n,
        "held_out_kind_fraction": sum(1 for t in tasks if t.get("held_out_kind")) / n,
        "infeasible_fraction": sum(1 for t in tasks if t.get("infeasible")) / n,
        "multi_step_fraction": sum(1 for t in tasks if t.get("steps")) / n,
        "evidence_files": _evidence(tasks),
        "pdf_layout_tasks": len(probes),
        "naive_pdf_failure_rate": _failure_rate(probes),
        "naive_pdf_failure_rate_by_layout": {
            layout: _failure_rate([t for t in probes if t["pdf_layout"] == layout])
            for layout in ("table", "two_column")
        },
        "seconds": round(seconds, 1),
        "disk_bytes": disk_usage(cfg.out),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
    }
