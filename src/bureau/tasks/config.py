"""The task.toml of a Harbor task directory (schema 1.x), as typed pydantic models.

One model per section, composed by `TaskConfig`. Every model keeps fields it does not know
(`extra="allow"`), at the top level and in every section, so that loading and dumping a task
written for a newer Harbor, or carrying another tool's settings, loses nothing. Validation is
strict: TOML already has typed values, so `cpus = "2"` or `cpus = true` is a mistake to report,
not a value to coerce (integers are still accepted where a number of seconds is expected).

`TaskConfig.loads` raises `TaskFormatErrors` listing every problem in the file, each naming the
file, the dotted field and what was expected.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from bureau.tasks.errors import TaskFormatError, TaskFormatErrors, errors_from_validation

NetworkMode = Literal["bridge", "none", "host"]

_SECTION_CONFIG = ConfigDict(extra="allow", strict=True)
_VERSION = re.compile(r"1\.\d+")
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_AT_END = " (at end of document)"


def _expected(expected: str) -> PydanticCustomError:
    # The "bureau_" error type tells errors_from_validation to use this text verbatim.
    return PydanticCustomError("bureau_expected", "expected {expected}", {"expected": expected})


class TaskInfo(BaseModel):
    """The [task] section: the task's identity, as Harbor's registry names it."""

    model_config = _SECTION_CONFIG

    name: str = Field(min_length=1, description="Task name, e.g. 'bureau/acme-q3-expenses'.")
    description: str = Field(default="", description="One-line human description.")
    keywords: list[str] = Field(default_factory=list, description="Search keywords.")


class VerifierConfig(BaseModel):
    """The [verifier] section: how tests/test.sh is run."""

    model_config = _SECTION_CONFIG

    timeout_sec: float = Field(
        default=600.0, gt=0, allow_inf_nan=False, description="Wall-clock limit for test.sh."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables set for test.sh."
    )


class AgentConfig(BaseModel):
    """The [agent] section: limits on the agent's attempt."""

    model_config = _SECTION_CONFIG

    timeout_sec: float = Field(
        default=600.0, gt=0, allow_inf_nan=False, description="Wall-clock limit for the agent."
    )


class EnvironmentConfig(BaseModel):
    """The [environment] section: the container the agent and the verifier run in."""

    model_config = _SECTION_CONFIG

    docker_image: str | None = Field(
        default=None,
        min_length=1,
        description="Prebuilt image to use instead of building environment/Dockerfile.",
    )
    cpus: int = Field(default=1, ge=1, description="CPU cores available to the container.")
    memory_mb: int = Field(default=2048, gt=0, description="Memory limit in MiB.")
    storage_mb: int = Field(default=10240, gt=0, description="Disk limit in MiB.")
    network_mode: NetworkMode = Field(
        default="none", description="Container network: no network unless the task needs it."
    )
    workdir: str = Field(
        default="/workspace", description="Absolute path of the agent's working directory."
    )
    build_timeout_sec: float = Field(
        default=600.0, gt=0, allow_inf_nan=False, description="Wall-clock limit for the build."
    )

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        if not PurePosixPath(value).is_absolute():
            raise _expected("an absolute path (starting with /)")
        return value


class TaskConfig(BaseModel):
    """A whole task.toml; sections missing from the file take their defaults."""

    model_config = _SECTION_CONFIG

    version: str = Field(default="1.0", description='Task format version; must be "1.<minor>".')
    task: TaskInfo | None = Field(default=None, description="The [task] section, if present.")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Free-form metadata (author, difficulty, tags, ...)."
    )
    verifier: VerifierConfig = Field(
        default_factory=VerifierConfig, description="The [verifier] section."
    )
    agent: AgentConfig = Field(default_factory=AgentConfig, description="The [agent] section.")
    environment: EnvironmentConfig = Field(
        default_factory=EnvironmentConfig, description="The [environment] section."
    )
    solution: dict[str, Any] = Field(
        default_factory=dict, description="Free-form settings for solution/solve.sh (e.g. env)."
    )

    @field_validator("version")
    @classmethod
    def _schema_one(cls, value: str) -> str:
        if not _VERSION.fullmatch(value):
            raise _expected('a task format version "1.<minor>", such as "1.0"')
        return value

    @classmethod
    def loads(cls, text: str, source: Path | str = "task.toml") -> TaskConfig:
        """Parse task.toml text; `source` names the file in errors. Raises TaskFormatErrors."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TaskFormatErrors([_toml_error(source, text, exc)]) from None
        return cls.from_data(data, source)

    @classmethod
    def from_data(cls, data: dict[str, Any], source: Path | str = "task.toml") -> TaskConfig:
        """Validate an already parsed task.toml. Raises TaskFormatErrors."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise TaskFormatErrors(errors_from_validation(exc, source, cls)) from None

    @classmethod
    def load(cls, path: Path | str) -> TaskConfig:
        """Read and parse a task.toml file. Raises TaskFormatErrors."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise TaskFormatErrors(
                [TaskFormatError(path, "a task.toml file", got="no such file")]
            ) from None
        except IsADirectoryError:
            raise TaskFormatErrors(
                [TaskFormatError(path, "a task.toml file", got="a directory")]
            ) from None
        except UnicodeDecodeError as exc:
            raise TaskFormatErrors(
                [TaskFormatError(path, "UTF-8 text", got=f"invalid byte at offset {exc.start}")]
            ) from None
        return cls.loads(text, source=path)

    def to_data(self) -> dict[str, Any]:
        """Plain TOML-ready data: every field and unknown key, with None values left out."""
        data: dict[str, Any] = _drop_none(self.model_dump(mode="python"))
        _drop_empty_tables(self, data)
        return data

    def dumps(self) -> str:
        """TOML text with every field (defaults included) and every unknown key.

        Empty free-form tables ([metadata], [solution], [verifier.env]) are left out: they read
        back as the same empty default, and a human reading the file has less to skip.
        """
        return tomli_w.dumps(self.to_data())

    def dump(self, path: Path | str) -> None:
        """Write `dumps()` to `path`."""
        Path(path).write_text(self.dumps(), encoding="utf-8")


def _drop_none(value: Any) -> Any:
    # TOML has no null; a None that reached a model (only possible from Python code) means
    # "not set", so leaving the key out reads back the same.
    if isinstance(value, dict):
        return {key: _drop_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_drop_none(item) for item in value if item is not None]
    return value


def _drop_empty_tables(model: BaseModel, data: dict[str, Any]) -> None:
    """Remove declared (not unknown) fields whose value is an empty table, recursively."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel) and isinstance(data.get(name), dict):
            _drop_empty_tables(value, data[name])
        elif data.get(name) == {}:
            del data[name]


def _toml_error(source: Path | str, text: str, exc: tomllib.TOMLDecodeError) -> TaskFormatError:
    # Python 3.11's TOMLDecodeError only carries the position inside its message.
    message = str(exc)
    line = column = None
    if match := _TOML_POSITION.search(message):
        line, column = int(match.group(1)), int(match.group(2))
        message = message[: match.start()]
    elif message.endswith(_AT_END):
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
        message = message.removesuffix(_AT_END)
    return TaskFormatError(
        source, "valid TOML", got=f"a syntax error ({message})", line=line, column=column
    )
