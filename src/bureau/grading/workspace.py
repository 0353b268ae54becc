"""The agent's workspace as the grader sees it: contained paths and opened deliverables.

Every path a rubric names is resolved against the workspace root with symlinks followed, and
refused if the result lies outside the root, so an agent cannot make the grader read files
elsewhere on the machine. Office deliverables are opened with their libraries (imported lazily,
so a rubric without such criteria needs none of them) and cached for the criteria that share a
file. A deliverable that is missing, empty or corrupt raises `DeliverableError`, whose message is
the reason the criterion fails: a broken deliverable is the agent's failure, not a grader error.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from .values import Outcome, clip

if TYPE_CHECKING:
    from docx.document import Document
    from openpyxl.workbook.workbook import Workbook
    from pptx.presentation import Presentation

# Beyond these a file is not a plausible answer and could stall or exhaust the verifier, whose
# time and memory an agent must not be able to spend (a timed-out or crashed verifier is a
# system error, masked from training; an oversized answer is the agent's failure).
MAX_FILE_BYTES = 100 * 1024 * 1024
MAX_ANSWER_BYTES = 1024 * 1024
"""The answer file: a JSON object of a few keys."""
MAX_UNZIPPED_BYTES = 64 * 1024 * 1024
"""An office file's parts, uncompressed (what its library parses)."""
MAX_ZIP_ENTRIES = 10_000
MAX_OPEN_SECONDS = 30.0
"""Parsing one deliverable: a file under the size caps can still be slow to parse (millions of
tiny cells); past this it fails its criteria instead of running the verifier out of time."""
T = TypeVar("T")
_OFFICE_KINDS = {".xlsx": "workbook", ".xlsm": "workbook", ".docx": "document", ".pptx": "deck"}


class DeliverableError(Exception):
    """A file the rubric names cannot be used; the message is the criterion's failure reason."""


class Workspace:
    """Read-only access to the files under one workspace root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(f"workspace {root} is not a directory")
        self._opened: dict[tuple[str, str], object] = {}

    def resolve(self, relative: str) -> Path:
        """The absolute path of `relative`, symlinks resolved, guaranteed inside the root."""
        try:
            candidate = (self.root / relative).resolve()
        except (OSError, RuntimeError) as exc:
            raise DeliverableError(clip(f"cannot resolve {relative}: {exc}")) from exc
        if not candidate.is_relative_to(self.root):
            raise DeliverableError(f"{relative} resolves outside the workspace")
        return candidate

    def regular_file(self, relative: str, max_bytes: int = MAX_FILE_BYTES) -> Path:
        """The path of a non-empty regular file inside the workspace, or `DeliverableError`."""
        path = self.resolve(relative)
        try:
            if not path.exists():
                raise DeliverableError(f"{relative} missing")
            if not path.is_file():
                raise DeliverableError(f"{relative} is not a regular file")
            size = path.stat().st_size
        except OSError as exc:
            raise DeliverableError(clip(f"cannot read {relative}: {exc}")) from exc
        if size == 0:
            raise DeliverableError(f"{relative} is empty")
        if size > max_bytes:
            raise DeliverableError(
                f"{relative} is too large to grade ({size} bytes, the limit is {max_bytes})"
            )
        return path

    def read_json(self, relative: str, max_bytes: int = MAX_ANSWER_BYTES) -> object:
        """Parse a JSON file; reasons name the file and, for bad JSON, the line."""
        path = self.regular_file(relative, max_bytes)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise DeliverableError(clip(f"cannot read {relative}: {exc}")) from exc
        except UnicodeDecodeError as exc:
            raise DeliverableError(f"{relative} is not valid UTF-8") from exc
        except json.JSONDecodeError as exc:
            raise DeliverableError(f"{relative} is not valid JSON at line {exc.lineno}") from exc
        except (RecursionError, ValueError) as exc:
            raise DeliverableError(f"{relative} is not valid JSON: {type(exc).__name__}") from exc
        except MemoryError as exc:
            raise DeliverableError(f"{relative} does not fit in the grader's memory") from exc

    def workbook(self, relative: str, *, data_only: bool = False) -> Workbook:
        """The workbook at `relative`; `data_only` gives cached formula values instead."""
        from openpyxl import load_workbook

        kind = "workbook-values" if data_only else "workbook"
        return self._open(relative, kind, lambda path: load_workbook(path, data_only=data_only))

    def document(self, relative: str) -> Document:
        """The Word document at `relative`."""
        import docx

        return self._open(relative, "document", lambda path: docx.Document(str(path)))

    def deck(self, relative: str) -> Presentation:
        """The PowerPoint deck at `relative`."""
        import pptx

        return self._open(relative, "deck", lambda path: pptx.Presentation(str(path)))

    def _open(self, relative: str, kind: str, opener: Callable[[Path], T]) -> T:
        key = (relative, kind)
        if key not in self._opened:
            path = self.regular_file(relative)
            _check_zip(relative, path)
            try:
                with time_limit(MAX_OPEN_SECONDS):
                    self._opened[key] = opener(path)
            except ParseTimeout as exc:
                raise DeliverableError(
                    f"{relative} took longer than {MAX_OPEN_SECONDS:g} s to read; not graded"
                ) from exc
            except Exception as exc:  # MemoryError and RecursionError included
                # Any failure of the library on the agent's file is a property of that file.
                raise DeliverableError(
                    clip(f"could not open {relative}: {type(exc).__name__}: {exc}")
                ) from exc
        return cast(T, self._opened[key])


class ParseTimeout(Exception):
    """Raised in the grader's main thread when reading a deliverable runs out of time."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `ParseTimeout` in the block after `seconds` (SIGALRM: the main thread only; other
    threads run without a limit, bounded by the verifier's own timeout)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    expired = False

    def expire(_signum: int, _frame: object) -> None:
        nonlocal expired
        expired = True
        raise ParseTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    # The alarm repeats: an exception raised while the main thread runs a garbage-collector
    # callback or a __del__ is swallowed by the interpreter, and the next alarm raises again.
    signal.setitimer(signal.ITIMER_REAL, seconds, min(seconds, 0.1))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if expired:  # every alarm was swallowed, yet the time ran out
        raise ParseTimeout


def _check_zip(relative: str, path: Path) -> None:
    """Refuse an office file whose parts would take the grader too long or too much memory to
    parse (a zip bomb, or millions of parts), before its library reads it. A file that is not
    a zip is left to the library, which reports it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    if len(infos) > MAX_ZIP_ENTRIES:
        raise DeliverableError(f"{relative} has {len(infos)} parts, too many to grade")
    unzipped = sum(info.file_size for info in infos)
    if unzipped > MAX_UNZIPPED_BYTES:
        raise DeliverableError(
            f"{relative} is too large to grade ({unzipped} bytes uncompressed, "
            f"the limit is {MAX_UNZIPPED_BYTES})"
        )


def check_file_exists(workspace: Workspace, relative: str) -> Outcome:
    """Pass iff `relative` is a non-empty regular file inside the workspace and, for
    .xlsx/.xlsm/.docx/.pptx, opens with its library."""
    try:
        size = workspace.regular_file(relative).stat().st_size
        kind = _OFFICE_KINDS.get(Path(relative).suffix.lower())
        if kind == "workbook":
            workspace.workbook(relative)
        elif kind == "document":
            workspace.document(relative)
        elif kind == "deck":
            workspace.deck(relative)
    except DeliverableError as exc:
        return Outcome(False, str(exc))
    opens = f" and opens as a {kind}" if kind else ""
    return Outcome(True, f"{relative} exists ({size} bytes){opens}")
