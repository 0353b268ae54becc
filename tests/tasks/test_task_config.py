"""task.toml parsing: defaults, lossless round trips, and errors that name file, field and fix."""

from __future__ import annotations

import datetime
import json
import pickle
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
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
    assert (config.schema_version, config.version) == ("1.4", None)
    assert config.format_version == "1.4"
    assert config.task is None
    assert config.metadata == {} and config.solution == {}
    assert config.verifier.timeout_sec == 600.0 and config.verifier.env == {}
    assert config.agent.timeout_sec == 600.0
    env = config.environment
    assert env.docker_image is None
    assert (env.cpus, env.memory_mb, env.storage_mb) == (1, 2048, 10240)
    assert env.network_mode == "public"
    assert env.allowed_hosts is None and env.allow_internet is None
    assert env.memory is None and env.storage is None
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
    # The legacy version key is kept, and schema_version is not added next to it.
    assert (again.version, again.schema_version, again.format_version) == ("1.3", None, "1.3")
    assert 'version = "1.3"' in again.dumps() and "schema_version" not in again.dumps()


def test_dumps_writes_resolved_values_and_omits_none() -> None:
    text = TaskConfig().dumps()
    assert text.startswith('schema_version = "1.4"\n')
    assert "\nversion" not in text
    assert "docker_image" not in text and "allowed_hosts" not in text
    # Defaults are not written: a Harbor task that leaves workdir or network_mode unset keeps
    # Harbor's meaning of "unset" after a round trip through bureau.
    assert "network_mode" not in text and "workdir" not in text
    assert "[metadata]" not in text and "[solution]" not in text
    minimal = TaskConfig.loads('version = "1.0"\n[agent]\ntimeout_sec = 60.0\n')
    assert minimal.environment.workdir == "/workspace"
    assert minimal.dumps() == 'version = "1.0"\n\n[agent]\ntimeout_sec = 60.0\n'
    with_image = TaskConfig(environment=EnvironmentConfig(docker_image="python:3.11"))
    assert 'docker_image = "python:3.11"' in with_image.dumps()


def test_dump_and_load_through_a_file(tmp_path: Path) -> None:
    config = TaskConfig(
        task=TaskInfo(name="acme/a", keywords=["x"]),
        environment=EnvironmentConfig(cpus=1.5, network_mode="no-network"),
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
            f"{SOURCE}: environment.cpus: expected a finite number > 0, got -2",
        ),
        (
            "[environment]\ncpus = 0.0\n",
            f"{SOURCE}: environment.cpus: expected a finite number > 0, got 0.0",
        ),
        (
            "[environment]\ncpus = nan\n",
            f"{SOURCE}: environment.cpus: expected a finite number > 0, got nan",
        ),
        (
            '[environment]\ncpus = "2"\n',
            f'{SOURCE}: environment.cpus: expected a finite number > 0, got "2"',
        ),
        (
            "[environment]\ncpus = true\n",
            f"{SOURCE}: environment.cpus: expected a finite number > 0, got true",
        ),
        (
            "[environment]\nmemory_mb = 2048.0\n",
            f"{SOURCE}: environment.memory_mb: expected an integer > 0, got 2048.0",
        ),
        (
            '[environment]\nworkdir = "workspace"\n',
            f"{SOURCE}: environment.workdir: expected an absolute path "
            '(such as /workspace, or C:\\workspace on Windows), got "workspace"',
        ),
        (
            '[environment]\nnetwork_mode = "none"\n',
            f'{SOURCE}: environment.network_mode: expected one of "public", "no-network", '
            '"allowlist", got "none"',
        ),
        (
            '[environment]\nallowed_hosts = ["example.com"]\n',
            f"{SOURCE}: environment.allowed_hosts: "
            'expected no hosts unless network_mode = "allowlist", got an array',
        ),
        (
            '[environment]\nnetwork_mode = "no-network"\nallowed_hosts = ["example.com"]\n',
            f"{SOURCE}: environment.allowed_hosts: "
            'expected no hosts unless network_mode = "allowlist", got an array',
        ),
        (
            '[environment]\nnetwork_mode = "allowlist"\n'
            'allowed_hosts = ["example.com", "https://example.com/x"]\n',
            f'{SOURCE}: environment.allowed_hosts[1]: expected a hostname, a "*." wildcard '
            "hostname, an IP address or an IP CIDR range (not a URL, port or path), "
            'got "https://example.com/x"',
        ),
        (
            '[environment]\nallow_internet = "yes"\n',
            f'{SOURCE}: environment.allow_internet: expected true or false, got "yes"',
        ),
        (
            '[environment]\nmemory = "4GB"\n',
            f"{SOURCE}: environment.memory: expected a size: a number and G, M or K, "
            'such as "4G" or "512M", got "4GB"',
        ),
        (
            '[environment]\nstorage = "10G"\nstorage_mb = 1024\n',
            f'{SOURCE}: environment.storage_mb: expected 10240, the same as storage = "10G", '
            "got 1024",
        ),
        (
            '[environment]\ndocker_image = ""\n',
            f'{SOURCE}: environment.docker_image: expected a string (non-empty), got ""',
        ),
        (
            'version = "2.0"\n',
            f'{SOURCE}: version: expected a task format version "1.<minor>", such as "1.4", '
            'got "2.0"',
        ),
        ("version = 1.0\n", f"{SOURCE}: version: expected a string, got 1.0"),
        (
            'schema_version = "1"\n',
            f'{SOURCE}: schema_version: expected a task format version "1.<minor>", '
            'such as "1.4", got "1"',
        ),
        ("schema_version = 1.4\n", f"{SOURCE}: schema_version: expected a string, got 1.4"),
        (
            '[task]\nname = "foo"\n',
            f"{SOURCE}: task.name: expected 'org/name' (letters, digits, '-', '_', '.'), "
            'got "foo"',
        ),
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
            '[task]\nname = "acme/a"\nkeywords = ["x", 3]\n',
            f"{SOURCE}: task.keywords[1]: expected a string, got 3",
        ),
        (
            '[task]\ndescription = "no name"\n',
            f"{SOURCE}: task.name: expected a string, got nothing (the field is required)",
        ),
        ("metadata = 3\n", f"{SOURCE}: metadata: expected a table, got 3"),
        ('environment = "big"\n', f'{SOURCE}: environment: expected a table, got "big"'),
        ("solution = [1]\n", f"{SOURCE}: solution: expected a table, got an array"),
    ],
)
def test_each_malformed_field_names_file_field_and_expectation(text: str, message: str) -> None:
    assert problems(text) == [message]


HARBOR_TASK_TOML = """\
schema_version = "1.4"
source = "registry"
artifacts = ["/logs/out.txt"]

[task]
name = "harbor/hello-world"
version = "0.2.0"
description = "Say hello"
authors = [{ name = "Ada", email = "ada@example.com" }]
keywords = ["demo"]

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 120.0
user = 1000
network_mode = "no-network"

[agent]
timeout_sec = 300.0
network_mode = "allowlist"
allowed_hosts = ["api.example.com"]

[environment]
network_mode = "allowlist"
allowed_hosts = ["pypi.org", "*.pythonhosted.org", "10.0.0.0/8", "2001:db8::1"]
build_timeout_sec = 600.0
os = "linux"
cpus = 0.5
memory_mb = 4096
storage_mb = 10240
gpus = 0
workdir = "/app"

[solution.env]
SEED = "7"
"""


def test_a_task_written_by_harbor_loads_and_round_trips() -> None:
    config = TaskConfig.loads(HARBOR_TASK_TOML)
    assert config.format_version == "1.4" and config.version is None
    assert config.task is not None and config.task.name == "harbor/hello-world"
    assert config.task.model_extra == {
        "version": "0.2.0",
        "authors": [{"name": "Ada", "email": "ada@example.com"}],
    }
    env = config.environment
    assert (env.network_mode, env.cpus, env.workdir) == ("allowlist", 0.5, "/app")
    assert env.allowed_hosts == ["pypi.org", "*.pythonhosted.org", "10.0.0.0/8", "2001:db8::1"]
    assert config.agent.model_extra == {
        "network_mode": "allowlist",
        "allowed_hosts": ["api.example.com"],
    }
    text = config.dumps()
    assert TaskConfig.loads(text) == config
    assert "cpus = 0.5" in text and "version" not in tomllib.loads(text)


@pytest.mark.parametrize(
    ("text", "schema_version", "version"),
    [
        ("", "1.4", None),
        ('schema_version = "1.2"\n', "1.2", None),
        ('version = "1.0"\n', None, "1.0"),
        ('schema_version = "1.4"\nversion = "1.0"\n', "1.4", "1.0"),
    ],
)
def test_either_version_key_is_read_and_kept_as_given(
    text: str, schema_version: str | None, version: str | None
) -> None:
    config = TaskConfig.loads(text)
    assert (config.schema_version, config.version) == (schema_version, version)
    # Harbor's precedence: schema_version wins over the legacy key.
    assert config.format_version == (schema_version or version)
    dumped = tomllib.loads(config.dumps())
    assert (dumped.get("schema_version"), dumped.get("version")) == (schema_version, version)


def test_configs_made_in_code_get_the_current_schema_version() -> None:
    assert TaskConfig().schema_version == "1.4"
    legacy = TaskConfig(version="1.1")
    assert (legacy.schema_version, legacy.format_version) == (None, "1.1")
    assert "schema_version" not in legacy.dumps()


@pytest.mark.parametrize(
    "name", ["acme/q3", "bureau/acme-q3-expenses", "A.b_c-1/x", "0/1", "org/name.v2"]
)
def test_org_slash_name_is_accepted(name: str) -> None:
    config = TaskConfig.loads(f'[task]\nname = "{name}"\n')
    assert config.task is not None and config.task.name == name


@pytest.mark.parametrize(
    "name",
    ["foo", "", "/x", "a/", "a/b/c", ".a/b", "a/-b", "a/b..c", "a b/c", "a/b\\n", "ä/b"],
)
def test_names_outside_org_slash_name_are_rejected(name: str) -> None:
    text = tomli_w.dumps({"task": {"name": name}})
    assert problems(text) == [
        f"{SOURCE}: task.name: expected 'org/name' (letters, digits, '-', '_', '.'), "
        f"got {json.dumps(name, ensure_ascii=False)}"
    ]


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "EXAMPLE.com.",
        " example.com ",
        "*.example.com",
        "localhost",
        "192.0.2.1",
        "192.0.2.0/24",
        "2001:db8::1",
        "2001:db8::/32",
    ],
)
def test_allowed_hosts_take_what_harbor_takes(host: str) -> None:
    config = TaskConfig.from_data(
        {"environment": {"network_mode": "allowlist", "allowed_hosts": [host]}}
    )
    assert config.environment.allowed_hosts == [host]  # kept as written


@pytest.mark.parametrize(
    "host",
    [
        "",
        "https://example.com",
        "example.com:443",
        "example.com/path",
        "[2001:db8::1]",
        "*.",
        "*.192.0.2.1",
        "a.*.example.com",
        "under_score.com",
        "192.0.2.1/24",
        "fe80::1%eth0",
    ],
)
def test_allowed_hosts_refuse_what_harbor_refuses(host: str) -> None:
    with pytest.raises(TaskFormatErrors) as caught:
        TaskConfig.from_data(
            {"environment": {"network_mode": "allowlist", "allowed_hosts": [host]}}
        )
    assert [error.field for error in caught.value] == ["environment.allowed_hosts[0]"]


def test_empty_allowed_hosts_are_fine_in_any_mode() -> None:
    config = TaskConfig.loads('[environment]\nnetwork_mode = "no-network"\nallowed_hosts = []\n')
    assert config.environment.allowed_hosts == []


@pytest.mark.parametrize(
    ("environment", "network_mode"),
    [
        ("allow_internet = false\n", "no-network"),
        ("allow_internet = true\n", "public"),
        # As in Harbor, an explicit network_mode or allowed_hosts makes allow_internet moot.
        ('allow_internet = false\nnetwork_mode = "public"\n', "public"),
        ('allow_internet = true\nnetwork_mode = "no-network"\n', "no-network"),
        (
            'allow_internet = false\nnetwork_mode = "allowlist"\nallowed_hosts = ["a.io"]\n',
            "allowlist",
        ),
        ("", "public"),
    ],
)
def test_legacy_allow_internet_is_read_as_harbor_reads_it(
    environment: str, network_mode: str
) -> None:
    config = TaskConfig.loads("[environment]\n" + environment)
    assert config.environment.network_mode == network_mode
    # Written back with the resolved network_mode, which Harbor then takes over allow_internet.
    text = config.dumps()
    assert (f'network_mode = "{network_mode}"' in text) == bool(environment)
    assert ("allow_internet" in text) == ("allow_internet" in environment)
    assert TaskConfig.loads(text) == config


def test_legacy_size_strings_set_memory_and_storage() -> None:
    config = TaskConfig.loads('[environment]\nmemory = "4G"\nstorage = "512M"\n')
    env = config.environment
    assert (env.memory, env.memory_mb, env.storage, env.storage_mb) == ("4G", 4096, "512M", 512)
    again = TaskConfig.loads(config.dumps())
    assert again == config
    dumped = tomllib.loads(config.dumps())["environment"]
    assert (dumped["memory"], dumped["memory_mb"]) == ("4G", 4096)


def test_legacy_sizes_agreeing_with_the_new_fields_or_not_strings_are_accepted() -> None:
    config = TaskConfig.loads('[environment]\nmemory = "2G"\nmemory_mb = 2048\nstorage = 5\n')
    env = config.environment
    assert (env.memory_mb, env.storage, env.storage_mb) == (2048, 5, 10240)


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
_name_part = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,6}", fullmatch=True).filter(
    lambda part: ".." not in part
)
_org_names = st.builds("{}/{}".format, _name_part, _name_part)
_versions = st.integers(min_value=0, max_value=99).map("1.{}".format)
_hosts = st.sampled_from(
    ["example.com", "*.example.com", "API.Example.org.", "192.0.2.1", "2001:db8::1", "10.0.0.0/8"]
)


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
            name=_org_names,
            description=st.text(max_size=10),
            keywords=st.lists(st.text(max_size=5), max_size=3),
        )
    )
    if task is not None:
        task |= draw(_extras(TaskInfo))
    network_mode = draw(st.sampled_from(["public", "no-network", "allowlist"]))
    environment = {
        "cpus": draw(st.integers(min_value=1, max_value=512) | _seconds),
        "memory_mb": draw(st.integers(min_value=1, max_value=2**40)),
        "storage_mb": draw(st.integers(min_value=1, max_value=2**40)),
        "network_mode": network_mode,
        "workdir": draw(st.sampled_from(["/", "C:\\"])) + draw(st.text(max_size=10)),
        "build_timeout_sec": draw(_seconds),
        **draw(_extras(EnvironmentConfig)),
    }
    image = draw(st.none() | st.text(min_size=1, max_size=10))
    if image is not None:
        environment["docker_image"] = image
    if network_mode == "allowlist" and draw(st.booleans()):
        environment["allowed_hosts"] = draw(st.lists(_hosts, max_size=3))
    allow_internet = draw(st.none() | st.booleans())
    if allow_internet is not None:
        environment["allow_internet"] = allow_internet
    if draw(st.booleans()):
        environment["memory"] = f"{environment['memory_mb']}M"
    version_keys = draw(
        st.sampled_from([(), ("version",), ("schema_version",), ("version", "schema_version")])
    )
    data = {
        **{key: draw(_versions) for key in version_keys},
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
