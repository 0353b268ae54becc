"""Weights through a folder: the trainer writes safetensors files, each engine loads them.

`DiskTransport` gives each version its own folder under `root` and, once a newer version is
loaded everywhere, removes the older folders (the newest `keep` stay), so a long run does not
fill the disk with one copy of the model per step. Every engine must read the folder under the
same path: one machine, or a filesystem the trainer's and the engines' nodes share.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

_STEP = re.compile(r"step-(\d+)")


class DiskTransport:
    """Folders `root/step-<version>`; see the module docstring."""

    def __init__(self, root: Path, *, keep: int = 1) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self.root = Path(root)
        self.keep = keep

    def folder(self, version: int) -> Path:
        return self.root / f"step-{version}"

    def versions(self) -> list[int]:
        """The versions with a folder, oldest first."""
        if not self.root.is_dir():
            return []
        found = (_STEP.fullmatch(p.name) for p in self.root.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def prune(self, loaded: int) -> list[int]:
        """Remove the folders older than `loaded` (every engine holds it) beyond the newest
        `keep`; the versions removed."""
        older = [v for v in self.versions() if v < loaded]
        spare = self.keep - 1
        doomed = older[: len(older) - spare] if spare else older
        for version in doomed:
            shutil.rmtree(self.folder(version), ignore_errors=True)
        return doomed
