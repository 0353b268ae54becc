"""`python -m bureau.bytecode`: what `make` runs after installing the venv without bytecode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bureau.bytecode import bureau_modules


def _env(**changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in changes}
    return env | {k: v for k, v in changes.items() if v is not None}


def test_every_bureau_module_is_listed_but_the_oracles_scripts_and_entry_points() -> None:
    modules = bureau_modules()
    assert {"bureau.tools.server", "bureau.sandbox.zygote", "bureau.loop.actors"} <= set(modules)
    assert "bureau.grading.cli" in modules and "bureau.grading.__main__" not in modules
    assert not [m for m in modules if m.startswith("bureau.worlds.oracles.")]
    oracles = Path(__file__).parents[1] / "src" / "bureau" / "worlds" / "oracles"
    assert (oracles / "oracle_lib.py").exists()  # a script there, not a module of bureau


def test_imported_modules_and_whole_packages_get_bytecode_but_not_the_packages_tests(
    tmp_path: Path,
) -> None:
    """Under PYTHONPYCACHEPREFIX the bytecode lands in an empty folder of the test's own, which
    shows what was written: the imported module, every module of the compiled package (none of
    them imported), none of that package's tests; a module that cannot be imported is named."""
    package = tmp_path / "src" / "docs_lib"
    (package / "tests").mkdir(parents=True)
    for name in ("__init__.py", "lazy_writer.py", "tests/__init__.py", "tests/test_it.py"):
        (package / name).write_text("VALUE = 1\n")
    code = (
        "from bureau.bytecode import write_bytecode; "
        "print(write_bytecode(['bureau.errors', 'no_such_module_here'], ['docs_lib'])[1])"
    )
    cache = tmp_path / "pycache"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(PYTHONDONTWRITEBYTECODE=None, PYTHONPYCACHEPREFIX=str(cache),
                 PYTHONPATH=str(tmp_path / "src")),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "['no_such_module_here']"
    written = {p.relative_to(cache).as_posix() for p in cache.rglob("*.pyc")}
    tag = sys.implementation.cache_tag
    assert any(p.endswith(f"bureau/errors.{tag}.pyc") for p in written), written
    ours = sorted(p.split("/docs_lib/", 1)[1] for p in written if "/docs_lib/" in p)
    assert ours == [f"__init__.{tag}.pyc", f"lazy_writer.{tag}.pyc"]


def test_with_bytecode_writing_off_it_says_so_and_fails() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bureau.bytecode"],
        env=_env(PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("error: PYTHONDONTWRITEBYTECODE is set"), done.stderr
