"""Command-line options that map onto config fields, so the CLI never restates a config.

A flag such as `--loss ppo` is only a short name for the override `loss.kind="ppo"`: its value
is checked against the config field's own `Literal` (read with `typing.get_args` when the command
runs, so `bureau --help` imports no torch), and it reaches the config as one more override for
`bureau.config.load_config`, after the TOML file and before the `--set` overrides.
"""

from __future__ import annotations

import importlib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import tomli_w
import typer
from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)

SetOverrides = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a config key, e.g. --set trainer.optimizer.lr=3e-6 (repeatable; the value "
        "is a TOML literal or a plain string).",
    ),
]


def field_choices(model: type[BaseModel], dotted: str) -> tuple[str, ...]:
    """The values the `Literal` at `dotted` (e.g. `loss.kind`) of `model` allows, in order.

    Through a union of models (a discriminated union such as the policy losses), the choices of
    every member that has the field are collected.
    """
    head, _, rest = dotted.partition(".")
    if head not in model.model_fields:
        raise KeyError(f"{model.__name__} has no field {head!r}")
    members = _members(model.model_fields[head].annotation)
    choices: list[str] = []
    if rest:
        for member in members:
            if isinstance(member, type) and issubclass(member, BaseModel):
                choices += [c for c in field_choices(member, rest) if c not in choices]
    else:
        for member in members:
            if typing.get_origin(member) is typing.Literal:
                choices += [str(v) for v in typing.get_args(member) if str(v) not in choices]
    if not choices:
        raise KeyError(f"{model.__name__}.{dotted} is not a Literal field")
    return tuple(choices)


def _members(annotation: Any) -> list[Any]:
    """The alternatives of an annotation: unions and `Annotated` unwrapped, None dropped."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [] if annotation is type(None) else [annotation]


def config_choice(target: str, dotted: str) -> Callable[[str | None], str | None]:
    """A typer callback: the flag's value must be one `field_choices` allows.

    `target` is `module:Class`, imported only when the command runs.
    """

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        module, _, name = target.partition(":")
        model = getattr(importlib.import_module(module), name)
        allowed = field_choices(model, dotted)
        if value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)} ({dotted})")
        return value

    return check


FaultsOption = Annotated[
    str | None,
    typer.Option(
        "--faults",
        help="Drills: inject faults at these rates, e.g. tool_hang=0.05,engine_error=0.05 "
        "(switches: tool_hang, tool_server_kill, sandbox_kill, engine_error, engine_stall, "
        "judge_error, verifier_crash, disk_full; also engine_stall_s, seed).",
    ),
]


def fault_overrides(spec: str | None) -> list[str]:
    """`--faults a=0.1,b=0.2` as `faults.a=0.1` overrides; a bad entry is a usage error."""
    if not spec:
        return []
    from bureau.trials.faults import FaultConfig

    try:
        config = FaultConfig.parse(spec)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise typer.BadParameter(str(exc), param_hint="--faults") from None
    given = config.model_dump(exclude_unset=True)
    return flag_overrides({f"faults.{key}": value for key, value in given.items()})


def flag_overrides(flags: Mapping[str, Any]) -> list[str]:
    """`{"a.b": value}` -> `["a.b=<value as a TOML literal>"]`, leaving out flags not given."""
    overrides = []
    for dotted, value in flags.items():
        if value is None:
            continue
        literal = tomli_w.dumps({"v": str(value) if isinstance(value, Path) else value})
        overrides.append(f"{dotted}={literal.strip().removeprefix('v = ')}")
    return overrides


def load_or_exit(
    model: type[T], path: Path | None, overrides: Sequence[str], echo: Callable[[str], Any]
) -> T:
    """`load_config`, printing a `ConfigError` (it names the file and key) and exiting 2."""
    from bureau.config import ConfigError, load_config

    try:
        return load_config(model, path, overrides)
    except ConfigError as error:
        echo(f"error: {error}")
        raise typer.Exit(2) from None
