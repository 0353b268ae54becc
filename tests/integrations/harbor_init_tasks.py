"""Tasks scaffolded by `harbor init` (each variant), filled in the way a task author would.

`harbor init` writes empty prompts, a solve.sh with no commands and a verifier that checks
nothing. `fill` gives every task (or each step of a multi-step task) one job: write a word to a
file under /app, the image's WORKDIR. The oracle writes it, nop does not; the verifier checks
it with the template's own tool (pytest in `test_outputs.py`, or bash in `test.sh` when the
task was made with `--no-pytest`). In separate-verifier mode the file is declared an artifact,
since that verifier sees nothing else of the agent's environment.

Run as a script to scaffold and fill every variant under a folder:
`python harbor_init_tasks.py HARBOR_BIN_DIR OUT_DIR`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import tomli_w

VARIANTS: dict[str, list[str]] = {
    "separate": [],  # Harbor 0.26's default: a separate verifier with pytest in its image
    "shared": ["--verifier-mode", "shared"],
    "steps": ["--steps", "2"],
    "separate-nopytest": ["--no-pytest"],
    "shared-nopytest": ["--no-pytest", "--verifier-mode", "shared"],
    "steps-nopytest": ["--steps", "2", "--no-pytest"],
}

PYTEST_CHECK = """from pathlib import Path


def test_outputs():
    assert Path("/app/{name}.txt").read_text().strip() == "{name}"
"""
BASH_CHECK = """#!/bin/bash
if [ "$(cat /app/{name}.txt 2>/dev/null)" = "{name}" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def scaffold(harbor_bin: Path, out: Path, org: str = "init") -> dict[str, Path]:
    """`harbor init` every variant into `out`; returns variant -> task folder."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    tasks: dict[str, Path] = {}
    for variant, flags in VARIANTS.items():
        command = [str(harbor_bin / "harbor"), "init", f"{org}/{variant}", "-t", *flags]
        subprocess.run(
            command, cwd=out, env=env, check=True, capture_output=True, timeout=120
        )  # fmt: skip
        tasks[variant] = out / variant
        fill(out / variant)
    return tasks


def fill(task: Path) -> None:
    """Give the scaffolded task (every step of it) something to do and to check."""
    config = tomllib.loads((task / "task.toml").read_text())
    steps = config.get("steps") or []
    parts = [(task / "steps" / step["name"], step) for step in steps] or [(task, config)]
    separate = config.get("verifier", {}).get("environment_mode") == "separate"
    for folder, table in parts:
        name = folder.name
        (folder / "instruction.md").write_text(f"Write the word {name} to /app/{name}.txt.\n")
        (folder / "solution").mkdir(exist_ok=True)
        (folder / "solution" / "solve.sh").write_text(
            f"#!/bin/bash\necho {name} > /app/{name}.txt\n"
        )
        shutil.rmtree(folder / "tests" / "__pycache__", ignore_errors=True)
        outputs = folder / "tests" / "test_outputs.py"
        if outputs.exists():
            outputs.write_text(PYTEST_CHECK.format(name=name))
        else:
            (folder / "tests" / "test.sh").write_text(BASH_CHECK.format(name=name))
        if separate:
            table["artifacts"] = [f"/app/{name}.txt"]
    (task / "task.toml").write_text(tomli_w.dumps(config))


if __name__ == "__main__":
    made = scaffold(Path(sys.argv[1]), Path(sys.argv[2]))
    print("\n".join(str(path) for path in made.values()))
