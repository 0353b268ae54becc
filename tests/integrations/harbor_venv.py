"""A Python 3.12 virtual environment with Harbor and bureau, for the interop test.

bureau comes with its `tools` extra: bureau's tasks promise pandas and numpy in their image
(environment/Dockerfile), and the local runtime refuses a task whose promised packages the
sandbox's Python (this venv's, in Harbor) lacks.

Harbor needs Python >= 3.12 while bureau's own venv is 3.11, so the Harbor test runs Harbor in a
second venv, `.venv-harbor/venv` at the repository root. It is reused while pyproject.toml is
unchanged (a hash of it is stamped into the venv) and rebuilt when it changes; a file lock keeps
two test processes from building it at once. Building it takes about three minutes.

`find_python312` looks for an interpreter that actually runs: on machines with pyenv,
`python3.12` is often a shim that is on PATH but fails unless a 3.12 version is selected, so a
bare `command -v` would find it and the test would then fail (or skip) for the wrong reason.

Run as a script to build the venv ahead of time: `python tests/integrations/harbor_venv.py`.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOME = REPO / ".venv-harbor"
VENV = HOME / "venv"
STAMP = VENV / ".bureau-stamp"
HARBOR_REQUIREMENT = "harbor>=0.26,<0.27"
INSTALL_TIMEOUT_S = 900
# Installed without bytecode (13,308 files, LiteLLM's 3,133 and OpenAI's 2,102 among them): the
# test's own processes (Harbor's CLI) write what they import as they go, but processes in a
# sandbox may not, so what they run is compiled once by `bureau.bytecode`, with Harbor's
# CLI and bureau's plugin for it.
WARM_IMPORTS = ("harbor.cli.main", "bureau.integrations.harbor")


def _runs_312(command: list[str], env: dict[str, str] | None = None) -> bool:
    probe = "import sys; sys.exit(0 if sys.version_info[:2] >= (3, 12) else 1)"
    try:
        done = subprocess.run(
            [*command, "-c", probe], env=env, capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_python312() -> str | None:
    """The path of a Python >= 3.12 interpreter that starts, or None."""
    candidates: list[str] = []
    if override := os.environ.get("BUREAU_PYTHON312"):
        candidates.append(override)
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            pyenv_root = subprocess.run(
                ["pyenv", "root"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
    # Real interpreters before shims; 3.12 (Harbor's minimum, the version it is tested on)
    # before newer ones, and the newest patch release of each first.
    for minor in ("3.12", "3.13"):
        candidates += sorted(
            glob.glob(f"{pyenv_root}/versions/{minor}.*/bin/python3"), reverse=True
        )
        candidates += [p for p in (shutil.which(f"python{minor}"),) if p]
    for candidate in candidates:
        if _runs_312([candidate]):
            return str(Path(candidate).resolve()) if "/shims/" not in candidate else candidate
    return None


def _wanted_stamp(python: str) -> str:
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes())
    digest.update(f"{python}\n{HARBOR_REQUIREMENT}\ntools".encode())
    return digest.hexdigest()


def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_harbor_venv(python: str, *, log: Path | None = None) -> Path:
    """Create or reuse `.venv-harbor` with Harbor and bureau; returns its bin/ folder."""
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = _wanted_stamp(python)
        if STAMP.exists() and STAMP.read_text() == wanted and _runs_312([str(venv_python())]):
            return VENV / "bin"
        if not _runs_312([str(venv_python())]):
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(VENV)], check=True, timeout=300)
        STAMP.unlink(missing_ok=True)
        writing_bytecode = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        with open(log or os.devnull, "w") as output:
            for args in (
                ["-m", "pip", "install", "-q", "--no-compile", "--upgrade", "pip"],
                ["-m", "pip", "install", "-q", "--no-compile", HARBOR_REQUIREMENT,
                 "-e", f"{REPO}[tools]"],
                ["-m", "bureau.bytecode", *WARM_IMPORTS],
            ):  # fmt: skip
                subprocess.run(
                    [str(venv_python()), *args],
                    check=True,
                    timeout=INSTALL_TIMEOUT_S,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    env=writing_bytecode,
                )
        STAMP.write_text(wanted)
        return VENV / "bin"


if __name__ == "__main__":
    found = find_python312()
    if found is None:
        sys.exit("no working Python >= 3.12 found (set BUREAU_PYTHON312 to one)")
    print(ensure_harbor_venv(found))
