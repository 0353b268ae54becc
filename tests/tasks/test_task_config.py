"""task.toml parsing: defaults, lossless round trips, and errors that name file, field and fix."""

from __future__ import annotations

import datetime
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from bureau.tasks import (
    AgentConfig,
    EnvironmentConfig,
    TaskConfig,
    TaskFormatError,
    TaskFormatErrors,
    TaskInfo,
    VerifierConfig,
)

SOURCE = "tasks/foo/task.toml"


def problems(text: str) -> list[str]:
    with pytest.raises(TaskFormatErrors) as caught:
        TaskConfig.loads(text, source=SOURCE)
    return [str(error) for error in caught.value]


def test_empty_file_takes_every_default() -> None:
    config = TaskConfig.loads("")
    assert config.version == "1.0"
    assert config.task is None
    assert config.metadata == {} and config.solution == {}
    assert config.verifier.timeout_sec == 600.0 and config.verifier.env == {}
    assert config.agent.timeout_sec == 600.0
    env = config.environment
    assert env.docker_image is None
    assert (env.cpus, env.memory_mb, env.storage_mb) == (1, 2048, 10240)
    assert env.network_mode == "none"
    assert env.workdir == "/workspace"
    assert env.build_timeout_sec == 600.0


def test_integers_are_accepted_as_seconds() -> None:
    config = TaskConfig.loads("[agent]\ntimeout_sec = 60\n")
    assert config.agent.timeout_sec == 60.0
    assert isinstance(config.agent.timeout_sec, float)


def test_round_trip_keeps_unknown_fields_everywhere() -> None:
    text = """\
version = "1.3"
source = "harbor-registry"
schema_flavour = { a = 1 }

[task]
name = "acme/expenses"
keywords = ["finance"]
authors = [{ name = "Ada" }]

[metadata]
difficulty = "hard"
created = 2024-05-01

[verifier]
timeout_sec = 90
user = "root"
env = { GRADER_MODE = "strict" }

[agent]
max_turns = 40

[environment]
cpus = 4
gpus = 0
gpu_types = ["H100"]

[environment.healthcheck]
command = "true"

[solution]
env = { SEED = "7" }
"""
    config = TaskConfig.loads(text)
    assert config.model_extra == {"source": "harbor-registry", "schema_flavour": {"a": 1}}
    assert config.task is not None and config.task.model_extra == {"authors": [{"name": "Ada"}]}
    assert config.verifier.model_extra == {"user": "root"}
    assert config.agent.model_extra == {"max_turns": 40}
    assert config.environment.model_extra == {
        "gpus": 0,
        "gpu_types": ["H100"],
        "healthcheck": {"command": "true"},
    }
    assert config.metadata["created"] == datetime.date(2024, 5, 1)

    again = TaskConfig.loads(config.dumps())
    assert again == config
    assert again.dumps() == config.dumps()


def test_dumps_writes_resolved_values_and_omits_none() -> None:
    text = TaskConfig().dumps()
    assert "docker_image" not in text
    assert 'network_mode = "none"' in text
    assert "[metadata]" not in text and "[solution]" not in text
    with_image = TaskConfig(environment=EnvironmentConfig(docker_image="python:3.11"))
    assert 'docker_image = "python:3.11"' in with_image.dumps()


def test_dump_and_load_through_a_file(tmp_path: Path) -> None:
    config = TaskConfig(
        task=TaskInfo(name="acme/a", keywords=["x"]),
        verifier=VerifierConfig(timeout_sec=30.0, env={"K": "v"}),
        agent=AgentConfig(timeout_sec=5.5),
        metadata={"kind": "lookup"},
    )
    path = tmp_path / "task.toml"
    config.dump(path)
    assert TaskConfig.load(path) == config


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[environment]\ncpus = -2\n",
            f"{SOURCE}: environment.cpus: expected an integer >= 1, got -2",
        ),
        (
            '[environment]\ncpus = "2"\n',
            f'{SOURCE}: environment.cpus: expected an integer >= 1, got "2"',
        ),
        (
            "[environment]\ncpus = true\n",
            f"{SOURCE}: environment.cpus: expected an integer >= 1, got true",
        ),
        (
            "[environment]\nmemory_mb = 2048.0\n",
            f"{SOURCE}: environment.memory_mb: expected an integer > 0, got 2048.0",
        ),
        (
            '[environment]\nworkdir = "workspace"\n',
            f"{SOURCE}: environment.workdir: expected an absolute path (starting with /), "
            'got "workspace"',
        ),
        (
            '[environment]\nnetwork_mode = "public"\n',
            f'{SOURCE}: environment.network_mode: expected one of "bridge", "none", "host", '
            'got "public"',
        ),
        (
            '[environment]\ndocker_image = ""\n',
            f'{SOURCE}: environment.docker_image: expected a string (non-empty), got ""',
        ),
        (
            'version = "2.0"\n',
            f'{SOURCE}: version: expected a task format version "1.<minor>", such as "1.0", '
            'got "2.0"',
        ),
        ("version = 1.0\n", f"{SOURCE}: version: expected a string, got 1.0"),
        (
            "[verifier]\ntimeout_sec = 0\n",
            f"{SOURCE}: verifier.timeout_sec: expected a finite number > 0, got 0",
        ),
        (
            "[agent]\ntimeout_sec = inf\n",
            f"{SOURCE}: agent.timeout_sec: expected a finite number > 0, got inf",
        ),
        (
            '[agent]\ntimeout_sec = "10m"\n',
            f'{SOURCE}: agent.timeout_sec: expected a finite number > 0, got "10m"',
        ),
        (
            "[verifier]\nenv = { MODE = 1 }\n",
            f"{SOURCE}: verifier.env.MODE: expected a string, got 1",
        ),
        (
            '[verifier.env]\n"MY VAR" = false\n',
            f'{SOURCE}: verifier.env."MY VAR": expected a string, got false',
        ),
        (
            '[task]\nname = "a"\nkeywords = ["x", 3]\n',
            f"{SOURCE}: task.keywords[1]: expected a string, got 3",
        ),
        (
            '[task]\ndescription = "no name"\n',
            f"{SOURCE}: task.name: expected a string (non-empty), "
            "got nothing (the field is required)",
        ),
        ("metadata = 3\n", f"{SOURCE}: metadata: expected a table, got 3"),
        ('environment = "big"\n', f'{SOURCE}: environment: expected a table, got "big"'),
        ("solution = [1]\n", f"{SOURCE}: solution: expected a table, got an array"),
    ],
)
def test_each_malformed_field_names_file_field_and_expectation(text: str, message: str) -> None:
    assert problems(text) == [message]


def test_every_problem_in_a_file_is_reported_at_once() -> None:
    text = '[environment]\ncpus = 0\nworkdir = "rel"\n[agent]\ntimeout_sec = -1\n'
    fields = [error.split(": ")[1] for error in problems(text)]
    assert sorted(fields) == ["agent.timeout_sec", "environment.cpus", "environment.workdir"]


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("[environment]\ncpus = \n", 2, 8),
        ('version = "1.0"\n[environment\ncpus = 1\n', 2, 13),
        ('a = 1\nb = "unterminated', 2, 18),
    ],
)
def test_toml_syntax_error_names_file_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(TaskFormatErrors) as caught:
        TaskConfig.loads(text, source=SOURCE)
    (error,) = caught.value.errors
    assert (error.line, error.column) == (line, column)
    assert str(error).startswith(f"{SOURCE}: line {line}, column {column}: expected valid TOML")


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatErrors) as caught:
        TaskConfig.load(tmp_path / "task.toml")
    assert (
        str(caught.value)
        == f"{tmp_path / 'task.toml'}: expected a task.toml file, got no such file"
    )


def test_errors_survive_pickling() -> None:
    error = TaskFormatError(SOURCE, "an integer", field="environment.cpus", got="-2", line=3)
    copy = pickle.loads(pickle.dumps(TaskFormatErrors([error])))
    assert [str(e) for e in copy] == [str(error)]
    assert copy.errors[0].line == 3


# Hypothesis: any valid config, including unknown keys of any TOML type, survives dumps -> loads.

_KNOWN_KEYS: dict[type[BaseModel], set[str]] = {
    TaskConfig: set(TaskConfig.model_fields),
    TaskInfo: set(TaskInfo.model_fields),
    VerifierConfig: set(VerifierConfig.model_fields),
    AgentConfig: set(AgentConfig.model_fields),
    EnvironmentConfig: set(EnvironmentConfig.model_fields),
}
_keys = st.text(max_size=8)
_scalars = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.dates(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)
_tables = st.dictionaries(_keys, _values, max_size=3)
_seconds = st.floats(min_value=0, exclude_min=True, allow_nan=False, allow_infinity=False)


def _extras(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    def unknown(key: str) -> bool:
        return key not in _KNOWN_KEYS[model]

    return st.dictionaries(_keys.filter(unknown), _values, max_size=2)


@st.composite
def task_configs(draw: st.DrawFn) -> TaskConfig:
    task: dict[str, Any] | None = draw(
        st.none()
        | st.builds(
            dict,
            name=st.text(min_size=1, max_size=10),
            description=st.text(max_size=10),
            keywords=st.lists(st.text(max_size=5), max_size=3),
        )
    )
    if task is not None:
        task |= draw(_extras(TaskInfo))
    environment = {
        "cpus": draw(st.integers(min_value=1, max_value=512)),
        "memory_mb": draw(st.integers(min_value=1, max_value=2**40)),
        "storage_mb": draw(st.integers(min_value=1, max_value=2**40)),
        "network_mode": draw(st.sampled_from(["bridge", "none", "host"])),
        "workdir": "/" + draw(st.text(max_size=10)),
        "build_timeout_sec": draw(_seconds),
        **draw(_extras(EnvironmentConfig)),
    }
    image = draw(st.none() | st.text(min_size=1, max_size=10))
    if image is not None:
        environment["docker_image"] = image
    data = {
        "version": f"1.{draw(st.integers(min_value=0, max_value=99))}",
        "metadata": draw(_tables),
        "verifier": {
            "timeout_sec": draw(_seconds),
            "env": draw(st.dictionaries(_keys, st.text(max_size=8), max_size=3)),
            **draw(_extras(VerifierConfig)),
        },
        "agent": {"timeout_sec": draw(_seconds), **draw(_extras(AgentConfig))},
        "environment": environment,
        "solution": draw(_tables),
        **draw(_extras(TaskConfig)),
    }
    if task is not None:
        data["task"] = task
    return TaskConfig.model_validate(data)


@settings(max_examples=200, deadline=None)
@given(task_configs())
def test_dumps_then_loads_is_identity(config: TaskConfig) -> None:
    text = config.dumps()
    again = TaskConfig.loads(text)
    assert again == config
    assert again.dumps() == text
