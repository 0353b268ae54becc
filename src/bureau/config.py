"""One config layer for every component: a strict pydantic base, TOML files, `--set` overrides.

Each component keeps its own config class next to its code (`HarnessConfig` in the harness,
`TrainerConfig` in the trainer, ...) and derives it from `StrictModel`, so an unknown key is an
error instead of being silently ignored. Entry points compose them into one run config and load
it with `load_config`: a TOML file, then `a.b.c=value` overrides from the command line, each
value read as a TOML literal (`0.2`, `true`, `"text"`, `[1, 2]`) or, when it is not one, as a
plain string. Errors name the file and the dotted key. `dump_resolved_config` writes the config
that actually ran (defaults filled in) into the run folder.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import tomli_w
from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T", bound=BaseModel)

RESOLVED_CONFIG = "config.resolved.toml"


class StrictModel(BaseModel):
    """Base of every bureau config: unknown keys are errors; attribute docstrings document."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ConfigError(ValueError):
    """A config file or override that does not validate; the message names file and key."""


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], value); the value is a TOML literal or a string."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r}: expected KEY=VALUE with a dotted KEY, like a.b=1")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def apply_overrides(tree: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of `tree` with each `a.b=value` override set (tables are created as needed)."""
    result: dict[str, Any] = _deep_copy(tree)
    for item in overrides:
        path, value = parse_override(item)
        node = result
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise ConfigError(f"override {item!r}: {where} is a value, not a table")
            node = child
        node[path[-1]] = value
    return result


def _deep_copy(tree: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in tree.items()}


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict; a missing or malformed file is a `ConfigError` naming it."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def validate_config(model: type[T], tree: Mapping[str, Any], source: str = "config") -> T:
    """`model` from a dict; every validation error is listed as `source: dotted.key: why`."""
    try:
        return model.model_validate(tree)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(top level)"
            lines.append(f"{source}: {key}: {error['msg']}")
        raise ConfigError("\n".join(lines)) from None


def load_config(model: type[T], path: Path | None = None, overrides: Sequence[str] = ()) -> T:
    """`model` from a TOML file (optional) with `--set`-style overrides applied on top."""
    tree = read_toml(path) if path is not None else {}
    source = str(path) if path is not None else "config"
    if overrides:
        source += " + overrides"
    return validate_config(model, apply_overrides(tree, overrides), source)


def to_toml_tree(config: BaseModel) -> dict[str, Any]:
    """The config as a TOML-ready dict: JSON types, unset optional values (None) left out."""
    return _drop_none(config.model_dump(mode="json"))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def dump_resolved_config(config: BaseModel, run_dir: Path, name: str = RESOLVED_CONFIG) -> Path:
    """Write the resolved config (defaults included) into `run_dir`; returns the file.

    Fields left at None are omitted (TOML has no null), so reading the file back with
    `load_config` gives the same config.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / name
    path.write_text(tomli_w.dumps(to_toml_tree(config)))
    return path
