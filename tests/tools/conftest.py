"""Fixtures for the tool tests: a fixture workspace, copied fresh for every test."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_helpers import build_workspace, code_python

from bureau.tools.core import ToolSettings, Workspace


def _searchable_tmpdir(prefix: str) -> Path:
    # Code runs as another uid: the workspace and its parents must be searchable by it, which
    # pytest's private tmp_path (mode 0700) is not.
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session")
def template_root() -> Iterator[Path]:
    parent = _searchable_tmpdir("bureau-tools-template-")
    root = parent / "workspace"
    root.mkdir()
    build_workspace(root)
    yield root
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def ws_root(template_root: Path) -> Iterator[Path]:
    parent = _searchable_tmpdir("bureau-tools-ws-")
    root = parent / "workspace"
    shutil.copytree(template_root, root, symlinks=True)
    yield root
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def ws(ws_root: Path) -> Workspace:
    return Workspace(ws_root, ToolSettings(code_python=code_python()))
