"""Writes one Harbor task directory from a `TaskSpec`.

Layout (Harbor reads it unchanged):

    instruction.md            question, answer keys, deliverables, the answer convention
    task.toml                 [task] [metadata] [verifier] [agent] [environment] [solution]
    environment/Dockerfile    python + document libraries (pinned); copies workspace/ to /workspace
    environment/workspace/    the world's files (hard links: one copy per world on disk)
    tests/Dockerfile          the separate verifier's image: the same libraries and the tests
    tests/test.sh             runs the grader zipapp against /workspace (which holds output/)
    tests/rubric.json         criteria and gold answer (never visible to the agent)
    tests/grader.pyz          bureau.grading, self-contained
    solution/solve.sh         runs solve.py, which reads the files (never the rubric)
    solution/solve.py         the domain's oracle program; params.json says which template
    solution/oracle_lib.py
    solution/params.json

Scripts take their paths from environment variables with Harbor's defaults, so the same task
runs in Docker, in a bubblewrap sandbox, or in-process against a temporary workspace.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import tomli_w

from .spec import ANSWER_FILE, UNSUPPORTED_REASON, TaskSpec, WorldContext

WORKDIR = "/workspace"

ANSWER_CONVENTION = f"""## How to answer

The company's files are in your working directory (`{WORKDIR}`). Answer from those files only.

When you are done, write your final answer to `{ANSWER_FILE}` (relative to the working
directory): one JSON object with exactly the answer keys listed above.
- Numbers are plain JSON numbers: no currency symbols, units or thousands separators, and
  percentages as written (12.5 for 12.5%), unless a key says otherwise.
- Dates are strings in `YYYY-MM-DD` form.
- Lists are JSON arrays of strings.
- Files you are asked to produce go in the `output/` folder under the exact names given.
  Spreadsheet cells that hold results must hold values, not formulas: a formula written by a
  library has no computed value until a spreadsheet application opens the file.
"""

IMAGE_PACKAGES = (
    "pydantic", "pdfplumber", "pypdf", "openpyxl", "python-pptx", "python-docx", "pandas", "numpy",
)  # fmt: skip
"""The Python packages of a task's images: the document libraries the agent and the grader use."""


@functools.cache
def image_requirements() -> str:
    """Each of `IMAGE_PACKAGES` pinned to the version installed where the world is built, the
    versions its oracle was verified with (`harbor lint` wants exact pins). The local runtime
    runs a task only where the sandbox's Python has exactly these. Read once a process: each
    lookup parses a package's metadata, a quarter of a world's build time when it was per task."""
    from importlib import metadata

    pins = []
    for name in IMAGE_PACKAGES:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)  # refused by the local runtime and by harbor lint: install it
    return " \\\n    ".join(pins)


def dockerfile() -> str:
    """The agent's image: Python, the document libraries and the company's files."""
    return f"""# Environment of a bureau task: Python with the document libraries an agent needs.
# The workspace files live in workspace/ next to this file.
FROM python:3.11-slim
RUN pip install --no-cache-dir \\
    {image_requirements()}
COPY workspace/ {WORKDIR}/
RUN mkdir -p {WORKDIR}/output /logs/agent /logs/verifier
WORKDIR {WORKDIR}
"""


def verifier_dockerfile() -> str:
    """The verifier's own image (Harbor's separate-verifier mode): it gets the agent's output/
    folder as an artifact, and nothing else the agent wrote."""
    return f"""# The verifier's environment: the grader's libraries and the tests, not the agent's.
FROM python:3.11-slim
RUN pip install --no-cache-dir \\
    {image_requirements()}
WORKDIR {WORKDIR}
COPY . /tests/
"""


TEST_SH = f"""#!/usr/bin/env bash
# Verifier entry point: grades {ANSWER_FILE} and output/ against rubric.json.
# Writes reward.json (flat numbers) and grading.json (reasons) to the verifier log folder.
set -uo pipefail
TESTS_DIR="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
WORKSPACE="${{BUREAU_WORKSPACE:-{WORKDIR}}}"
VERIFIER_DIR="${{BUREAU_VERIFIER_DIR:-/logs/verifier}}"
mkdir -p "$VERIFIER_DIR"
exec python3 "$TESTS_DIR/grader.pyz" --rubric "$TESTS_DIR/rubric.json" \\
    --workspace "$WORKSPACE" --out "$VERIFIER_DIR"
"""

SOLVE_SH = f"""#!/usr/bin/env bash
# Oracle solution: solve.py reads the workspace files and writes the answer and deliverables.
set -euo pipefail
SOLUTION_DIR="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
exec python3 "$SOLUTION_DIR/solve.py" --params "$SOLUTION_DIR/params.json" \\
    --workspace "${{BUREAU_WORKSPACE:-{WORKDIR}}}"
"""


ABSTAIN = f"""- If the files cannot support the answer to a key (what it needs is not in them), do
  not guess: set that key to `null` and add the key `{UNSUPPORTED_REASON}`, one sentence of at
  most 300 characters naming what is missing. A value the files do not support scores nothing,
  and so does `null` where they do.
"""
"""Part of every standard and hard instruction, whether or not its task is answerable."""


def render_instruction(spec: TaskSpec, *, starter: bool = False) -> str:
    parts = [f"# {spec.title}\n", spec.question.strip() + "\n", "## Answer keys\n"]
    parts.append(f"Write `{ANSWER_FILE}` with these keys:\n")
    parts.extend(f"- `{key}`: {desc}" for key, desc in spec.answer_keys.items())
    parts.append("")
    if spec.deliverables:
        parts.append("## Deliverables\n")
        parts.extend(f"- `{path}`: {desc}" for path, desc in spec.deliverables.items())
        parts.append("")
    parts.append(ANSWER_CONVENTION if starter else ANSWER_CONVENTION + ABSTAIN)
    return "\n".join(parts)


def task_instruction(spec: TaskSpec, *, starter: bool = False) -> str:
    """What the agent is told over the whole task: the instruction, or each step's in order
    (blank-line separated) for a multi-step task, as `checks.overlap` reads a built one."""
    parts = [part for _, part in spec.steps] or [spec]
    return "\n\n".join(render_instruction(part, starter=starter) for part in parts)


def task_toml(task_id: str, spec: TaskSpec, ctx: WorldContext) -> dict[str, Any]:
    starter = ctx.difficulty == "starter"
    return {
        "schema_version": "1.4",
        # The separate verifier gets the agent's deliverables and answer, nothing else.
        "artifacts": [f"{WORKDIR}/{Path(ANSWER_FILE).parent}"],
        "task": {
            "name": f"bureau/{task_id}",
            "description": spec.title,
            "keywords": [ctx.domain, spec.kind, spec.template],
        },
        "metadata": {
            "world_id": ctx.world_id,
            "domain": ctx.domain,
            "split": ctx.split,
            "company": ctx.company,
            "template": spec.template,
            "kind": spec.kind,
            "difficulty": ctx.difficulty,
            "held_out_kind": spec.held_out_kind,
            "infeasible": spec.infeasible,
            "generator": "bureau.worlds",
        },
        "verifier": {"timeout_sec": 120.0, "environment_mode": "separate", "env": {}},
        "agent": {"timeout_sec": 600.0 if starter else 1800.0},
        "environment": {
            "cpus": 1,
            "memory_mb": 2048,
            "storage_mb": 2048,
            "network_mode": "no-network",
            "workdir": WORKDIR,
            "build_timeout_sec": 900.0,
        },
        "solution": {"env": {}},
    }


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link when possible: every task of a world shares one copy of its files."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_text(path: Path, text: str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)


def write_task_dir(
    task_dir: Path,
    task_id: str,
    spec: TaskSpec,
    ctx: WorldContext,
    shared: dict[str, Path],
    *,
    judged: bool = False,
) -> None:
    """`shared` maps 'grader.pyz', 'oracle_lib.py' and 'solve.py' to files to link; `judged`
    adds the template's LLM-judge criteria (and says so in task.toml's metadata)."""
    config = task_toml(task_id, spec, ctx)
    judges = sum(len(part.judged) for part in [spec, *(p for _, p in spec.steps)])
    if judged and judges:
        config["metadata"]["judge_criteria"] = judges
    starter = ctx.difficulty == "starter"
    if spec.steps:
        config["steps"] = [{"name": name} for name, _ in spec.steps]
    write_text(task_dir / "task.toml", tomli_w.dumps(config))
    write_text(task_dir / "environment" / "Dockerfile", dockerfile())
    for rel in ctx.files:
        link_or_copy(ctx.workspace / rel, task_dir / "environment" / "workspace" / rel)
    # A multi-step task: each step's prompt, verifier and oracle under steps/<name>/.
    parts = [(task_dir / "steps" / name, part) for name, part in spec.steps] or [(task_dir, spec)]
    for root, part in parts:
        oracle = {"template": spec.template, **part.oracle}
        if part is not spec:
            oracle["step"] = root.name
        offered = part.judged if judged else []
        _write_part(root, task_id, part, oracle, shared, offered, starter=starter)


def _write_part(
    root: Path,
    task_id: str,
    spec: TaskSpec,
    oracle: dict[str, Any],
    shared: dict[str, Path],
    judge_criteria: list[dict[str, Any]],
    *,
    starter: bool,
) -> None:
    """A task's (or one step's) instruction.md, tests/ and solution/ under `root`."""
    write_text(root / "instruction.md", render_instruction(spec, starter=starter))
    write_text(root / "tests" / "Dockerfile", verifier_dockerfile())
    all_criteria = [*spec.criteria, *judge_criteria]
    criteria = [_with_ids(f"c{i}", c) for i, c in enumerate(all_criteria, start=1)]
    rubric = {
        "format": "bureau-rubric/1",
        "task_id": task_id,
        "answer_file": ANSWER_FILE,
        "gold": spec.gold,
        "criteria": criteria,
    }
    write_text(root / "tests" / "rubric.json", json.dumps(rubric, indent=2) + "\n")
    write_text(root / "tests" / "test.sh", TEST_SH, executable=True)
    link_or_copy(shared["grader.pyz"], root / "tests" / "grader.pyz")
    write_text(root / "solution" / "solve.sh", SOLVE_SH, executable=True)
    link_or_copy(shared["solve.py"], root / "solution" / "solve.py")
    link_or_copy(shared["oracle_lib.py"], root / "solution" / "oracle_lib.py")
    write_text(root / "solution" / "params.json", json.dumps(oracle, indent=2) + "\n")


def _with_ids(cid: str, criterion: dict[str, Any]) -> dict[str, Any]:
    """`criterion` with id `cid` first, and an `all_of`'s parts `cid.1`, `cid.2`, ..."""
    out: dict[str, Any] = {"id": cid, **criterion}
    if criterion.get("type") == "all_of":
        out["criteria"] = [
            _with_ids(f"{cid}.{j}", part) for j, part in enumerate(criterion["criteria"], start=1)
        ]
    return out
