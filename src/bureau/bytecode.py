"""`python -m bureau.bytecode [MODULE...]`: write the bytecode of what bureau's processes import.

`make` installs the venvs without bytecode (`pip install --no-compile`): pip compiles every file
it installs (17,900 in `.venv`; `make venv` took 99 CPU s with that, 46-52 with this instead),
where bureau's processes import about a quarter of them. This imports what they import at start
and writes that: every bureau module (so its commands, Ray actors and tool servers start from
bytecode even where PYTHONDONTWRITEBYTECODE is set, as in many container images), and whole, but
for their tests, the data and document libraries that sandboxed processes use, which import
parts of themselves lazily (`DataFrame.to_excel`'s writer for one). Sandboxes need it most: the
venv is bound read-only there and PYTHONDONTWRITEBYTECODE=1 is set, so a module without bytecode
would be compiled in memory at every start of every tool server, verifier and run of an agent's
code. What is imported later and lazily is written by the first process that imports it
outside a sandbox (`make test` and `make demo` unset PYTHONDONTWRITEBYTECODE). Extra module names
on the command line are imported too (Harbor's CLI, in Harbor's venv).
"""

from __future__ import annotations

import compileall
import importlib
import importlib.util
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import bureau

# Standalone scripts that run inside a task's sandbox (`solution/solve.py` imports
# `oracle_lib`), and entry points that would run when imported.
_NOT_IMPORTED = re.compile(r"^bureau\.worlds\.oracles\.|\.__main__$")
PACKAGES = (
    "numpy", "pandas", "pyarrow", "dateutil", "openpyxl", "docx", "pptx", "pdfplumber",
    "pdfminer", "pypdf", "reportlab", "icalendar", "recurring_ical_events", "et_xmlfile",
)  # fmt: skip
"""Compiled whole but for their own tests."""
_LIBRARY_TESTS = re.compile(r"[/\\]tests?[/\\]")


def bureau_modules() -> list[str]:
    """Every module of bureau but the oracles' scripts and `__main__`s, read from its folders
    (importing a package to list it would run it)."""
    names = []
    for root in map(Path, bureau.__path__):
        for path in sorted(root.rglob("*.py")):
            parts = ("bureau", *path.relative_to(root).with_suffix("").parts)
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if not _NOT_IMPORTED.search(name):
                names.append(name)
    return names


def write_bytecode(
    modules: Sequence[str], packages: Sequence[str] = PACKAGES
) -> tuple[int, list[str]]:
    """Import `modules` and compile `packages` whole, writing bytecode beside the sources (or
    under PYTHONPYCACHEPREFIX); returns how many modules this process has imported and the
    names of those it could not import (an extra that this venv lacks: Harbor in `.venv`, torch
    in Harbor's)."""
    if sys.dont_write_bytecode:
        raise RuntimeError("PYTHONDONTWRITEBYTECODE is set: unset it to write bytecode")
    missing: list[str] = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    for name in packages:
        spec = importlib.util.find_spec(name)
        for folder in (spec and spec.submodule_search_locations) or ():
            if not compileall.compile_dir(Path(folder), quiet=1, rx=_LIBRARY_TESTS):
                raise RuntimeError(f"{folder}: some modules did not compile")
    return len(sys.modules), missing


def main(argv: Sequence[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    try:
        imported, missing = write_bytecode([*bureau_modules(), *extra])
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"bytecode written: {imported} modules imported; not importable here: "
          f"{', '.join(missing) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
