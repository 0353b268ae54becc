"""What every bureau tool shares: workspace paths, readable errors, truncation and timeouts.

A tool is a plain function `fn(ws, **arguments) -> str` whose first parameter is the `Workspace`
it works in; the other parameters (typed, with `Field` descriptions) become the tool's input
schema and its docstring becomes the description the model reads. A `ToolSet` collects the tools
of one group, and `ToolSet.register` wraps each one for an `MCPServer`:

- the call runs on a worker thread under a deadline (`ToolSettings.call_timeout_s`). When the
  deadline passes, the model gets a `timeout` error at once and the thread is abandoned: Python
  cannot kill a thread, so long loops call `check_deadline()`, which raises as soon as the call
  was given up, and writes go through `Workspace.atomic_save`, which checks the deadline before
  the final rename. A write that times out has therefore most likely not been applied, but the
  model is told to re-read rather than assume;
- every failure becomes a `ToolFailure` (an SDK `ToolError`, so the result has `isError` set)
  whose text is `kind: message`, with workspace-relative paths and no traceback;
- the text result is cut to `ToolSettings.max_output_chars`, keeping its head and tail and
  saying how much was cut.

Paths are resolved by `Workspace.resolve`: relative to the root, or absolute inside it; `..`
that leaves the root and symlinks whose target is outside it are refused. The checks are made on
the real path just before use; agent code running at the same time could swap a folder for a
symlink in between, which is why the sandbox, not this check, is the security boundary.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import stat
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools.base import Tool

ToolFn = TypeVar("ToolFn", bound=Callable[..., str])

PathArg = Annotated[
    str,
    Field(
        description="Path relative to the workspace root, e.g. 'reports/q3.pdf' "
        "(an absolute path inside the workspace also works)."
    ),
]

Overwrite = Annotated[bool, Field(description="Replace the file if it already exists.")]


class ToolSettings(BaseModel):
    """Limits shared by every tool of one server process."""

    # Strict like `bureau.config.StrictModel`, restated because the sandbox exposes only
    # `bureau.tools` and `bureau.errors` of the package (`SANDBOX_PACKAGE_ENTRIES`).
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_output_chars: int = Field(default=20_000, ge=200)
    """A longer text result keeps its head and tail and says how much was cut."""
    call_timeout_s: float = Field(default=60.0, gt=0)
    """Deadline of one tool call; the code tools get their own `timeout_s` plus a grace."""
    code_default_timeout_s: float = 60.0
    """Timeout of a code run when the model does not pass one."""
    code_max_timeout_s: float = 600.0
    """The largest timeout a code run may ask for."""
    code_uid: int | None = 65534
    """Unprivileged uid (and gid) that code runs as when the server runs as root; None keeps the
    server's uid (weaker: the code can then signal the server)."""
    code_memory_mb: int | None = 4096
    """Address-space limit of each process of a code run (None: inherit the sandbox's)."""
    code_max_processes: int = 256
    """RLIMIT_NPROC of the code uid, only applied when the code runs as its own uid."""
    code_max_file_mb: int = 1024
    """Largest file a code run may write (RLIMIT_FSIZE)."""
    code_python: str = ""
    """Interpreter for `code_run_python` (empty: the server's own, which has the document
    libraries, pandas and numpy)."""


class FailureKind(StrEnum):
    not_found = "not_found"
    path_outside_workspace = "path_outside_workspace"
    invalid_argument = "invalid_argument"
    wrong_file_type = "wrong_file_type"
    already_exists = "already_exists"
    unreadable_file = "unreadable_file"
    file_too_large = "file_too_large"
    permission_denied = "permission_denied"
    timeout = "timeout"
    code_runner_failed = "code_runner_failed"
    internal_error = "internal_error"


def printable(text: str) -> str:
    """`text` as valid UTF-8 for the model: bytes of a file name that is not UTF-8 (which
    Python keeps as lone surrogates, and which no JSON encoder accepts) shown as `\\xNN`."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


MAX_READ_BYTES = 64 * 1024 * 1024
"""The most a tool reads of one file at once (a larger or sparse file is refused or skipped)."""


class ToolFailure(ToolError):
    """A failure the model should read: `kind: message`. Becomes an `isError` result."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        message = printable(message)
        super().__init__(f"{kind.value}: {message}")
        self.kind = kind
        self.message = message


# -- deadlines -------------------------------------------------------------------------------
@dataclass
class _CallBudget:
    deadline: float
    abandoned: bool = False


_BUDGET: contextvars.ContextVar[_CallBudget | None] = contextvars.ContextVar(
    "bureau_tool_budget", default=None
)


class DeadlineExceeded(ToolFailure):
    """Raised inside a call that ran out of time; the wrapper words it for the model."""

    def __init__(self) -> None:
        super().__init__(FailureKind.timeout, "the call ran out of time")


def check_deadline() -> None:
    """Raise `DeadlineExceeded` if the current call ran out of time or was abandoned; a no-op
    outside a server call (unit tests call tools directly)."""
    budget = _BUDGET.get()
    if budget is not None and (budget.abandoned or time.monotonic() > budget.deadline):
        raise DeadlineExceeded()


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 formula', '3 formulas'."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


# -- truncation ------------------------------------------------------------------------------
def truncate(text: str, limit: int) -> str:
    """`text` if it fits, else its head and tail around a note saying how much was cut."""
    if len(text) <= limit:
        return text
    head_len = limit * 2 // 3
    tail_len = limit - head_len
    # Prefer cutting at line ends when one is close, so rows and lines stay whole.
    newline = text.rfind("\n", head_len * 4 // 5, head_len)
    if newline > 0:
        head_len = newline
    tail_start = len(text) - tail_len
    newline = text.find("\n", tail_start, tail_start + tail_len // 5)
    if newline > 0:
        tail_start = newline + 1
    cut = tail_start - head_len
    note = (
        f"\n[... {cut:,} of {len(text):,} characters cut here; ask for a smaller part "
        "(an offset/limit, a page or cell range, a narrower query) to see them ...]\n"
    )
    return text[:head_len] + note + text[tail_start:]


# -- the workspace ---------------------------------------------------------------------------
@dataclass
class Workspace:
    """The folder tools may touch, and the settings of the server that serves them.

    The root need not exist when the server starts (a warm pool fills it later); it must when a
    tool is called. Paths handed back to the model are relative to the root.
    """

    root: Path
    settings: ToolSettings = field(default_factory=ToolSettings)

    def real_root(self) -> Path:
        real = Path(os.path.realpath(self.root))
        if not real.is_dir():
            raise ToolFailure(FailureKind.not_found, f"the workspace folder {self.root} is missing")
        return real

    def resolve(self, path: str, *, must_exist: bool = True) -> Path:
        """The real path of `path` inside the workspace, or a `ToolFailure` saying why not."""
        root = self.real_root()
        raw = path.strip() or "."
        if "\x00" in raw:
            raise ToolFailure(FailureKind.invalid_argument, "the path contains a NUL byte")
        given = Path(raw)
        if given.is_absolute():
            for base in (Path(os.path.abspath(self.root)), root):
                if given == base or base in given.parents:
                    given = given.relative_to(base)
                    break
            else:
                raise ToolFailure(
                    FailureKind.path_outside_workspace,
                    f"{raw} is outside the workspace; use a path relative to the workspace root",
                )
        lexical = Path(os.path.normpath(root / given))
        if lexical != root and root not in lexical.parents:
            raise ToolFailure(FailureKind.path_outside_workspace, f"{raw} leaves the workspace")
        real = Path(os.path.realpath(lexical))
        if real != root and root not in real.parents:
            raise ToolFailure(
                FailureKind.path_outside_workspace,
                f"{raw} goes through a symlink that points outside the workspace",
            )
        if must_exist and not real.exists():
            raise ToolFailure(FailureKind.not_found, f"no file or folder {self.rel(lexical)}")
        return real

    def file(self, path: str, suffixes: tuple[str, ...] = ()) -> Path:
        """An existing regular file, of one of `suffixes` when given."""
        real = self.resolve(path)
        if real.is_dir():
            raise ToolFailure(FailureKind.wrong_file_type, f"{path} is a folder, not a file")
        kind = special_kind(real)
        if kind is not None:
            # Opening a FIFO blocks until a writer comes, a device may never end.
            raise ToolFailure(FailureKind.wrong_file_type, f"{path} is a {kind}, not a file")
        if suffixes and real.suffix.lower() not in suffixes:
            raise ToolFailure(
                FailureKind.wrong_file_type,
                f"{path} is not a {' or '.join(suffixes)} file{suggest_tool(real)}",
            )
        return real

    def folder(self, path: str) -> Path:
        real = self.resolve(path)
        if not real.is_dir():
            raise ToolFailure(FailureKind.wrong_file_type, f"{path} is a file, not a folder")
        return real

    def target(self, path: str, suffixes: tuple[str, ...] = (), *, overwrite: bool) -> Path:
        """Where a write to `path` lands; refuses to replace a file unless `overwrite`."""
        real = self.resolve(path, must_exist=False)
        if suffixes and real.suffix.lower() not in suffixes:
            raise ToolFailure(
                FailureKind.invalid_argument, f"{path} must end in {' or '.join(suffixes)}"
            )
        if real.is_dir():
            raise ToolFailure(FailureKind.wrong_file_type, f"{path} is a folder")
        if real.exists() and not overwrite:
            raise ToolFailure(
                FailureKind.already_exists, f"{path} exists; pass overwrite=true to replace it"
            )
        return real

    def rel(self, path: Path) -> str:
        """`path` as the model should see it: relative to the root, '.' for the root."""
        root = self.real_root()
        try:
            rel = Path(path).relative_to(root)
        except ValueError:
            try:
                rel = Path(path).relative_to(os.path.abspath(self.root))
            except ValueError:
                return Path(path).name
        return rel.as_posix() or "."

    def atomic_save(self, dest: Path, save: Callable[[Path], object]) -> None:
        """Write `dest` through a temporary sibling and a rename, so a reader never sees a half
        written file and a call abandoned by its deadline leaves the old file in place."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{dest.name}.", suffix=f".tmp{dest.suffix}", dir=dest.parent
        )
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            save(tmp)
            check_deadline()
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)


SUGGESTED_TOOLS = {
    ".pdf": "pdf_read_pages",
    ".xlsx": "sheet_read",
    ".xlsm": "sheet_read",
    ".pptx": "slides_read",
    ".docx": "docx_read",
    ".eml": "mail_read",
}


def special_kind(path: Path) -> str | None:
    """What `path` is when it is neither a regular file nor a folder (a FIFO, a device, a
    socket); None otherwise."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def suggest_tool(path: Path) -> str:
    tool = SUGGESTED_TOOLS.get(path.suffix.lower())
    return f"; read it with {tool}" if tool else ""


# -- errors ----------------------------------------------------------------------------------
def _as_failure(ws: Workspace, exc: BaseException) -> ToolFailure:
    """The failure the model reads for an exception a tool did not anticipate."""
    if isinstance(exc, ToolFailure):
        return exc
    if isinstance(exc, OSError):
        where = f": {ws.rel(Path(exc.filename))}" if exc.filename else ""
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError):
            return ToolFailure(FailureKind.not_found, f"{reason}{where}")
        if isinstance(exc, PermissionError):
            return ToolFailure(FailureKind.permission_denied, f"{reason}{where}")
        if isinstance(exc, IsADirectoryError | NotADirectoryError):
            return ToolFailure(FailureKind.wrong_file_type, f"{reason}{where}")
        return ToolFailure(FailureKind.internal_error, f"{type(exc).__name__}: {reason}{where}")
    if isinstance(exc, zipfile.BadZipFile | UnicodeDecodeError):
        return ToolFailure(
            FailureKind.unreadable_file, f"the file is damaged or not that type: {exc}"
        )
    if isinstance(exc, ValueError | KeyError | IndexError):
        return ToolFailure(FailureKind.invalid_argument, str(exc).strip("'\""))
    return ToolFailure(FailureKind.internal_error, f"{type(exc).__name__}: {exc}")


def _run_tool(fn: Callable[..., str], ws: Workspace, arguments: dict[str, Any]) -> str:
    try:
        result = fn(ws, **arguments)
    except Exception as exc:
        raise _as_failure(ws, exc) from exc
    return result if result.strip() else "(the tool produced no text)"


# -- registration ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolSpec:
    fn: Callable[..., str]
    read_only: bool
    timeout_arg: str | None


class ToolSet:
    """The tools of one group, collected by a decorator and registered together."""

    def __init__(self, group: str, prefix: str) -> None:
        self.group = group
        self.prefix = prefix
        self.specs: list[ToolSpec] = []

    def tool(
        self, *, read_only: bool, timeout_arg: str | None = None
    ) -> Callable[[ToolFn], ToolFn]:
        """Mark a function as a tool; `timeout_arg` names an argument that extends the deadline
        (the code tools' own timeout)."""

        def mark(fn: ToolFn) -> ToolFn:
            if not fn.__name__.startswith(self.prefix):
                raise ValueError(f"tool {fn.__name__} must start with {self.prefix!r}")
            self.specs.append(ToolSpec(fn, read_only, timeout_arg))
            return fn

        return mark

    @property
    def names(self) -> list[str]:
        return [spec.fn.__name__ for spec in self.specs]

    def register(self, server: MCPServer[Any], ws: Workspace) -> list[str]:
        for spec in self.specs:
            server.add_tool(**_tool_arguments(ws, spec))
        return self.names

    def tools(self, ws: Workspace) -> list[Tool]:
        """The group's tools for `ws`, as `MCPServer(tools=...)` takes them.

        What the SDK derives from a tool's signature and docstring (its argument model and JSON
        schema: about 0.1 s of CPU for the 43 tools, most of a forked tool server's start) is
        the same for every workspace, so it is derived once per process and copied with this
        workspace's call: a zygote derives it before it forks (`bureau.tools.zygote_warm`),
        and each server it forks only copies."""
        made = []
        for spec in self.specs:
            arguments = _tool_arguments(ws, spec)
            template = _TEMPLATES.get(spec.fn)
            if template is None:
                from mcp.server.mcpserver.tools.base import Tool

                template = _TEMPLATES[spec.fn] = Tool.from_function(**arguments)
            made.append(template.model_copy(update={"fn": arguments["fn"]}))
        return made


_TEMPLATES: dict[Callable[..., str], Tool] = {}


_TIMEOUT_GRACE_S = 10.0


def _description(doc: str) -> str:
    """A docstring as the model reads it: paragraphs kept, source line breaks removed."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _tool_arguments(ws: Workspace, spec: ToolSpec) -> dict[str, Any]:
    """`add_tool`'s (and `Tool.from_function`'s) arguments for `spec` served on `ws`."""
    fn = spec.fn
    signature = inspect.signature(fn, eval_str=True)
    params = list(signature.parameters.values())
    if not params or params[0].name != "ws":
        raise TypeError(f"tool {fn.__name__} must take the workspace as its first parameter")

    async def call(**arguments: Any) -> str:
        limit = ws.settings.call_timeout_s
        if spec.timeout_arg is not None:
            asked = arguments.get(spec.timeout_arg) or ws.settings.code_default_timeout_s
            limit = max(limit, min(float(asked), ws.settings.code_max_timeout_s) + _TIMEOUT_GRACE_S)
        budget = _CallBudget(deadline=time.monotonic() + limit)
        token = _BUDGET.set(budget)
        try:
            with anyio.fail_after(limit):
                text = await anyio.to_thread.run_sync(
                    functools.partial(_run_tool, fn, ws, arguments), abandon_on_cancel=True
                )
        except (TimeoutError, DeadlineExceeded):
            # Either the deadline fired here first, or the thread noticed it first.
            budget.abandoned = True
            raise ToolFailure(
                FailureKind.timeout,
                f"{fn.__name__} did not finish within {limit:g} s and was abandoned; a write it "
                "was making may or may not have been applied (read the file to check). Ask for "
                "less at once (fewer pages, a smaller range, a narrower folder).",
            ) from None
        finally:
            _BUDGET.reset(token)
        return truncate(printable(text), ws.settings.max_output_chars)

    # The SDK builds the input schema from the signature: the tool's, without the workspace.
    call.__name__ = fn.__name__
    call.__doc__ = fn.__doc__
    call.__signature__ = signature.replace(parameters=params[1:])  # type: ignore[attr-defined]
    return {
        "fn": call,
        "name": fn.__name__,
        "description": _description(fn.__doc__ or fn.__name__),
        "annotations": ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=False if spec.read_only else None,
            open_world_hint=False,
        ),
        "structured_output": False,
    }
