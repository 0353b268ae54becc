"""The task.toml of a Harbor task directory (schema 1.x), as typed pydantic models.

The fields, their types and their allowed values follow Harbor's own `TaskConfig` (Harbor 0.26,
`harbor.models.task.config`), so that a task.toml Harbor accepts loads here (within the fields
modelled here) and every task.toml written here loads in Harbor. The exceptions are deliberate:
bureau does not coerce types, and refuses values that cannot work (a timeout or size of zero, a
relative workdir, a format version other than 1.x). Harbor's legacy spellings are read the way
Harbor reads them: a top-level `version` instead of `schema_version`,
`[environment].allow_internet` instead of `network_mode`, and `memory` / `storage` size strings
("4G") instead of `memory_mb` / `storage_mb`; each is written back as it was given.

One model per section, composed by `TaskConfig`. Every model keeps fields it does not know
(`extra="allow"`), at the top level and in every section, so that loading and dumping a task
written for a newer Harbor, or carrying another tool's settings, loses nothing. Validation is
strict: TOML already has typed values, so `cpus = "2"` or `cpus = true` is a mistake to report,
not a value to coerce (integers are still accepted where a number of seconds is expected).

`TaskConfig.loads` raises `TaskFormatErrors` listing every problem in the file, each naming the
file, the dotted field and what was expected.
"""

from __future__ import annotations

import math
import re
import tomllib
from ipaddress import ip_address, ip_network
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bureau.tasks.errors import (
    TaskFormatError,
    TaskFormatErrors,
    errors_from_validation,
    show_value,
)

NetworkMode = Literal["public", "no-network", "allowlist"]
"""Harbor's `NetworkMode`: open internet, no network at all, or only `allowed_hosts`."""

SCHEMA_VERSION = "1.4"
"""The task format version Harbor 0.26 writes, and the one new configs get."""

_SECTION_CONFIG = ConfigDict(extra="allow", strict=True)
_VERSION = re.compile(r"1\.\d+")
# Harbor's ORG_NAME_PATTERN (harbor.constants), plus its separate ban on "..".
_ORG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_HOST_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_SIZE_UNITS = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_AT_END = " (at end of document)"


def _expected(expected: str) -> PydanticCustomError:
    # The "bureau_" error type tells errors_from_validation to use this text verbatim.
    return PydanticCustomError("bureau_expected", "expected {expected}", {"expected": expected})


def _check_host(entry: str) -> str:
    """One `allowed_hosts` entry, accepted exactly when Harbor accepts it (kept as written).

    Harbor compares entries lower-cased, stripped and without a trailing dot; it takes exact
    hostnames, leading "*." wildcards, IPv4/IPv6 addresses and IP CIDR ranges, and refuses URLs,
    ports and paths.
    """
    host = entry.strip().lower().rstrip(".")
    if "/" in host:
        ok = "%" not in host and _is_network(host)
    elif ":" in host:
        ok = "%" not in host and _is_ipv6(host)
    elif "[" in host or "]" in host:
        ok = False
    else:
        name = host.removeprefix("*.")
        ok = (
            bool(name)
            and "*" not in name
            and not (name != host and _is_ip(name))
            and all(_HOST_LABEL.fullmatch(label) for label in name.split("."))
        )
    if not ok:
        raise _expected(
            'a hostname, a "*." wildcard hostname, an IP address or an IP CIDR range '
            "(not a URL, port or path)"
        )
    return entry


def _is_network(text: str) -> bool:
    try:
        ip_network(text, strict=True)
    except ValueError:
        return False
    return True


def _is_ip(text: str) -> bool:
    try:
        ip_address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    return _is_ip(text) and ip_address(text).version == 6


def _size_mb(size: str) -> int | None:
    """Harbor's reading of a legacy `memory` / `storage` size ("4G", "512M"), or None if invalid."""
    size = size.strip().upper()
    factor = _SIZE_UNITS.get(size[-1:])
    if factor is None:
        return None
    try:
        number = float(size[:-1]) * factor
    except ValueError:
        return None
    return int(number) if math.isfinite(number) else None


AllowedHost = Annotated[str, AfterValidator(_check_host)]


class TaskInfo(BaseModel):
    """The [task] section: the task's identity, as Harbor's registry names it."""

    model_config = _SECTION_CONFIG

    name: str = Field(description="Task name in 'org/name' form, e.g. 'bureau/acme-q3-expenses'.")
    description: str = Field(default="", description="One-line human description.")
    keywords: list[str] = Field(default_factory=list, description="Search keywords.")

    @field_validator("name")
    @classmethod
    def _org_slash_name(cls, value: str) -> str:
        # Harbor's rule: two parts, each starting with a letter or digit, then letters, digits,
        # "-", "_" or "."; ".." nowhere.
        if not _ORG_NAME.fullmatch(value) or ".." in value:
            raise _expected("'org/name' (letters, digits, '-', '_', '.')")
        return value


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
    cpus: int | float = Field(
        default=1, description="CPU cores available to the container (fractions allowed)."
    )
    memory: Any = Field(
        default=None,
        description='Harbor\'s legacy memory limit, a size string such as "4G" or "512M"; '
        "it sets memory_mb when that is not given (Harbor ignores a non-string).",
    )
    memory_mb: int = Field(default=2048, gt=0, description="Memory limit in MiB.")
    storage: Any = Field(
        default=None,
        description='Harbor\'s legacy disk limit, a size string such as "20G"; it sets '
        "storage_mb when that is not given (Harbor ignores a non-string).",
    )
    storage_mb: int = Field(default=10240, gt=0, description="Disk limit in MiB.")
    network_mode: NetworkMode = Field(
        default="public",
        description="Network access: open internet, none, or only `allowed_hosts`.",
    )
    allowed_hosts: list[AllowedHost] | None = Field(
        default=None,
        description="Hosts reachable when network_mode is 'allowlist' (hostnames, '*.' "
        "wildcards, IP addresses, CIDR ranges).",
    )
    allow_internet: bool | None = Field(
        default=None,
        description="Harbor's legacy switch, read as network_mode 'public' (true) or "
        "'no-network' (false) when neither network_mode nor allowed_hosts is given.",
    )
    workdir: str = Field(
        default="/workspace", description="Absolute path of the agent's working directory."
    )
    build_timeout_sec: float = Field(
        default=600.0, gt=0, allow_inf_nan=False, description="Wall-clock limit for the build."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables of every command in the environment; a value "
        "'${VAR}' or '${VAR:-default}' is read from the host's environment at start.",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_sizes(cls, data: Any) -> Any:
        # Harbor reads a legacy `memory = "4G"` / `storage = "20G"` string as memory_mb /
        # storage_mb (and ignores a non-string). The legacy key is kept too, so that the file
        # is written back as it was given; Harbor accepts both when they agree.
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for legacy, field in (("memory", "memory_mb"), ("storage", "storage_mb")):
            size = data.get(legacy)
            if isinstance(size, str) and field not in data:
                megabytes = _size_mb(size)
                if megabytes is not None:
                    data[field] = megabytes
        return data

    @field_validator("cpus", mode="before")
    @classmethod
    def _positive_cpus(cls, value: Any) -> Any:
        # Harbor takes an int or a float (2.5 cores); the value is kept as written.
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise _expected("a finite number > 0")
        return value

    @field_validator("memory", "storage")
    @classmethod
    def _legacy_size(cls, value: Any) -> Any:
        if isinstance(value, str) and _size_mb(value) is None:
            raise _expected('a size: a number and G, M or K, such as "4G" or "512M"')
        return value

    @field_validator("memory_mb", "storage_mb")
    @classmethod
    def _matches_legacy_size(cls, value: int, info: ValidationInfo) -> int:
        legacy = "memory" if info.field_name == "memory_mb" else "storage"
        size = info.data.get(legacy)
        megabytes = _size_mb(size) if isinstance(size, str) else None
        if megabytes is not None and megabytes != value:
            raise _expected(f"{megabytes}, the same as {legacy} = {show_value(size)}")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_need_allowlist(
        cls, value: list[str] | None, info: ValidationInfo
    ) -> list[str] | None:
        mode = info.data.get("network_mode")
        if value and mode is not None and mode != "allowlist":
            raise _expected('no hosts unless network_mode = "allowlist"')
        return value

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        # Windows paths (C:\\work) are absolute too: Harbor runs Windows containers.
        if not (PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute()):
            raise _expected("an absolute path (such as /workspace, or C:\\workspace on Windows)")
        return value

    @model_validator(mode="after")
    def _legacy_allow_internet(self) -> EnvironmentConfig:
        # Harbor's rule: allow_internet decides only when network_mode and allowed_hosts are unset.
        if (
            self.allow_internet is not None
            and "network_mode" not in self.model_fields_set
            and self.allowed_hosts is None
        ):
            self.network_mode = "public" if self.allow_internet else "no-network"
        return self


class TaskConfig(BaseModel):
    """A whole task.toml; sections missing from the file take their defaults."""

    model_config = _SECTION_CONFIG

    schema_version: str | None = Field(
        default=None,
        description=f'Task format version, "1.<minor>"; "{SCHEMA_VERSION}" when neither this '
        "nor `version` is given.",
    )
    version: str | None = Field(
        default=None,
        description="Harbor's legacy name for schema_version, kept when a file uses it.",
    )
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

    @field_validator("schema_version", "version")
    @classmethod
    def _schema_one(cls, value: str | None) -> str | None:
        if value is not None and not _VERSION.fullmatch(value):
            raise _expected('a task format version "1.<minor>", such as "1.4"')
        return value

    @model_validator(mode="after")
    def _default_schema_version(self) -> TaskConfig:
        # Only when neither key was given: a file that uses `version` keeps it, alone.
        if self.schema_version is None and self.version is None:
            self.schema_version = SCHEMA_VERSION
        return self

    @property
    def format_version(self) -> str:
        """The task format version, whichever key gave it (`schema_version` wins, as in Harbor)."""
        version = self.schema_version or self.version
        assert version is not None  # _default_schema_version leaves one of the two set
        return version

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
        """Plain TOML-ready data: the fields that were set and every unknown key.

        Defaults that were never set are left out, so a task that leaves a field unset (Harbor
        gives "unset" its own meaning, e.g. the image's working directory) keeps it unset.
        """
        data: dict[str, Any] = _drop_none(self.model_dump(mode="python", exclude_unset=True))
        _drop_empty_tables(self, data)
        return data

    def dumps(self) -> str:
        """TOML text with every field that was set and every unknown key.

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
