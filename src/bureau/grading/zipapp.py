"""A self-contained, reproducible zipapp of the grader for task verifiers.

Each generated task ships `tests/grader.pyz` so that its verifier grades with exactly the code
the task was built with, independent of whatever bureau version (if any) the verifier image has.
The archive holds `bureau/__init__.py`, every module of `bureau/grading/` and a `__main__.py`
that runs the grading CLI; it needs only pydantic, openpyxl, python-docx and python-pptx at run
time. Entries are sorted, dated 1980-01-01 with fixed permissions and deflated at a fixed
level, so identical sources give byte-identical archives and regenerating a dataset does not
churn every task's checksum.
"""

from __future__ import annotations

import io
import zipfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

ZIPAPP_NAME = "grader.pyz"
DEBUG_ENV_VAR = "BUREAU_GRADER_DEBUG"
_SHEBANG = b"#!/usr/bin/env python3\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_MAIN = f'''"""Entry point of grader.pyz: the bureau rubric grader, self-contained."""

import os
import sys

import bureau.grading
from bureau.grading.cli import main

if os.environ.get("{DEBUG_ENV_VAR}") == "1":
    print(f"bureau.grading loaded from {{bureau.grading.__file__}}", file=sys.stderr)
sys.exit(main())
'''


def zipapp_entries() -> dict[str, bytes]:
    """The archive's contents: member name -> bytes, read from the installed package."""
    package = resources.files("bureau")
    entries = {"__main__.py": _MAIN.encode(), "bureau/__init__.py": _read(package, "__init__.py")}
    _collect(package.joinpath("grading"), "bureau/grading", entries)
    return entries


def build_zipapp(dest: Path) -> Path:
    """Write the grader zipapp to `dest` (a file path, or a directory to hold grader.pyz).

    Returns the path written. Run it with `python grader.pyz --rubric R --workspace W --out V`.
    """
    dest = Path(dest)
    if dest.is_dir():
        dest = dest / ZIPAPP_NAME
    buffer = io.BytesIO()
    buffer.write(_SHEBANG)
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in sorted(zipapp_entries().items()):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(buffer.getvalue())
    dest.chmod(0o755)
    return dest


def _read(package: Traversable, name: str) -> bytes:
    return package.joinpath(name).read_bytes()


def _collect(folder: Traversable, prefix: str, entries: dict[str, bytes]) -> None:
    for child in folder.iterdir():
        if child.is_dir():
            if child.name != "__pycache__":
                _collect(child, f"{prefix}/{child.name}", entries)
        elif child.name.endswith(".py"):
            entries[f"{prefix}/{child.name}"] = child.read_bytes()
