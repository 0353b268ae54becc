"""Errors for malformed task directories, task.toml files, dataset manifests and reward files.

A `TaskFormatError` is one problem in one file: the file, the dotted field inside it (when the
problem is in a field), what was expected and what was found. Loaders that can see several
problems in one pass (`TaskConfig.loads`, `load_task_dir`, `load_dataset`) raise a
`TaskFormatErrors` group holding every problem, never just the first; the `validate_*` functions
return the same problems as a list instead of raising. `read_reward` raises a single
`RewardFileError`, because a reward file is either readable or not.

Pydantic's `ValidationError` is translated here, so that callers see "expected an integer > 0,
got -2" for `environment.memory_mb` rather than pydantic's internal error codes.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MAX_SHOWN = 60


class TaskFormatError(Exception):
    """One problem in one file: `<path>[: line L[, column C]][: <field>]: expected X[, got Y]`."""

    def __init__(
        self,
        path: Path | str,
        expected: str,
        field: str | None = None,
        got: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        # Every argument goes to Exception.args so that instances survive pickling (the
        # default reduce calls cls(*args)), e.g. when sent back from a worker process.
        super().__init__(path, expected, field, got, line, column)
        self.path = Path(path)
        self.expected = expected
        self.field = field
        self.got = got
        self.line = line
        self.column = column

    def __str__(self) -> str:
        parts = [str(self.path)]
        if self.line is not None:
            column = f", column {self.column}" if self.column is not None else ""
            parts.append(f"line {self.line}{column}")
        if self.field:
            parts.append(self.field)
        message = f"expected {self.expected}"
        if self.got is not None:
            message += f", got {self.got}"
        parts.append(message)
        return ": ".join(parts)


class RewardFileError(TaskFormatError):
    """The verifier's reward file is missing or malformed: a verifier error, never a zero."""


class TaskFormatErrors(Exception):
    """Every problem a loader found (at least one); iterate it or read `.errors`."""

    def __init__(self, errors: Iterable[TaskFormatError]) -> None:
        self.errors: tuple[TaskFormatError, ...] = tuple(errors)
        if not self.errors:
            raise ValueError("TaskFormatErrors needs at least one error")
        super().__init__(self.errors)

    def __iter__(self) -> typing.Iterator[TaskFormatError]:
        return iter(self.errors)

    def __len__(self) -> int:
        return len(self.errors)

    def __str__(self) -> str:
        if len(self.errors) == 1:
            return str(self.errors[0])
        lines = "\n".join(f"  {error}" for error in self.errors)
        return f"{len(self.errors)} problems:\n{lines}"


def show_value(value: object) -> str:
    """Render a value found in a file the way the file would spell it, truncated."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 3] + "..."
    return text


def format_loc(loc: Sequence[int | str]) -> str | None:
    """Dotted field name for a pydantic location: `("tasks", 2, "path")` -> `tasks[2].path`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
            text += f".{key}" if text else key
    return text or None


def errors_from_validation(
    exc: ValidationError,
    path: Path | str,
    model: type[BaseModel],
    mapping_word: str = "a table",
) -> list[TaskFormatError]:
    """One `TaskFormatError` per pydantic error, with the expectation taken from the model.

    `mapping_word` names a nested mapping in the file's own vocabulary ("a table" for TOML,
    "an object" for JSON).
    """
    errors = []
    for detail in exc.errors():
        loc = detail["loc"]
        ctx = detail.get("ctx") or {}
        expected = ctx.get("expected") if detail["type"].startswith("bureau_") else None
        if expected is None:
            expected = _expected_at(model, loc, mapping_word) or _expected_from_type(
                detail["type"], mapping_word
            )
        got = "nothing (the field is required)" if detail["type"] == "missing" else None
        if got is None:
            got = show_value(detail["input"])
        errors.append(TaskFormatError(path, expected, field=format_loc(loc), got=got))
    return errors


def _expected_at(model: type[BaseModel], loc: Sequence[int | str], mapping_word: str) -> str | None:
    """Describe the type declared at `loc`, or None when `loc` leaves the declared schema."""
    annotation: Any = model
    metadata: list[Any] = []
    for part in loc:
        annotation = _strip_optional(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation, metadata = field.annotation, list(field.metadata)
        elif origin is dict and isinstance(part, str):
            annotation, metadata = typing.get_args(annotation)[1], []
        elif origin is list and isinstance(part, int):
            annotation, metadata = typing.get_args(annotation)[0], []
        else:
            return None
    return _describe(annotation, mapping_word) + _constraints(metadata)


def _strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _describe(annotation: Any, mapping_word: str) -> str:
    annotation = _strip_optional(annotation)
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer"
    if annotation is float:
        return "a finite number"
    if annotation is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(arg) for arg in typing.get_args(annotation))
    if origin is list:
        item = typing.get_args(annotation)[0]
        return "an array" if item is Any else f"an array of {_plural(item, mapping_word)}"
    if origin is dict:
        value = typing.get_args(annotation)[1]
        return mapping_word if value is Any else f"{mapping_word} of {_plural(value, mapping_word)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return mapping_word
    return "a value of the right type"


def _plural(annotation: Any, mapping_word: str) -> str:
    plurals = {str: "strings", int: "integers", float: "numbers", bool: "booleans"}
    return plurals.get(annotation, mapping_word.split()[-1] + "s")


def _constraints(metadata: Sequence[Any]) -> str:
    # Pydantic stores bounds as annotated_types objects (Ge, Gt, MinLen); reading their
    # attributes avoids importing a package that bureau does not depend on directly.
    suffix = ""
    for item in metadata:
        if (bound := getattr(item, "ge", None)) is not None:
            suffix += f" >= {bound}"
        elif (bound := getattr(item, "gt", None)) is not None:
            suffix += f" > {bound}"
        elif getattr(item, "min_length", None) == 1:
            suffix += " (non-empty)"
    return suffix


def _expected_from_type(error_type: str, mapping_word: str) -> str:
    """Fallback for locations outside the declared schema."""
    by_type = {
        "int_type": "an integer",
        "float_type": "a number",
        "finite_number": "a finite number",
        "string_type": "a string",
        "bool_type": "true or false",
        "list_type": "an array",
        "dict_type": mapping_word,
        "model_type": mapping_word,
        "model_attributes_type": mapping_word,
    }
    return by_type.get(error_type, "a valid value")
