"""The Dockerfile as the local runtime reads it: emulated, ignored with a note, or refused with
the line named (`bureau.tasks.image`), and what a loaded task takes from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bureau.tasks.config import TaskConfig
from bureau.tasks.errors import TaskFormatErrors
from bureau.tasks.image import read_image_plan, resolve_env_templates
from bureau.tasks.support import ignored_settings, network_request, runner_problems
from bureau.tasks.taskdir import load_task_dir


def write_task(root: Path, dockerfile: str, toml: str = "") -> Path:
    for sub in ("environment/data", "tests"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "instruction.md").write_text("Do it.\n")
    (root / "environment" / "Dockerfile").write_text(dockerfile)
    (root / "environment" / "data" / "in.csv").write_text("a,b\n")
    (root / "environment" / "config.json").write_text("{}\n")
    (root / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (root / "task.toml").write_text(toml)
    return root


HARBOR_STYLE = """FROM ubuntu:24.04
ARG TEAM=ops
ENV GREETING="hello world" TEAM_NAME=$TEAM
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY data/ ./data/
COPY config.json /app/settings/
RUN mkdir -p /app/output && pip install --no-cache-dir "pydantic>=2"
USER agent
CMD ["bash"]
"""


def test_workdir_env_and_copies_come_from_the_dockerfile(tmp_path: Path) -> None:
    task = load_task_dir(write_task(tmp_path / "t", HARBOR_STYLE))
    assert task.config.environment.workdir == "/app"
    plan = task.image
    assert plan is not None and plan.errors == []
    assert plan.env == {"GREETING": "hello world", "TEAM_NAME": "ops"}
    env_dir = tmp_path / "t" / "environment"
    assert [(c.source, c.target, c.line) for c in plan.copies] == [
        (env_dir / "data", "/app/data", 6),
        (env_dir / "config.json", "/app/settings/config.json", 7),
    ]
    assert plan.folders == ["/app/output"]
    notes = ignored_settings(task)
    assert any("line 4: ENV PATH" in n for n in notes), notes
    assert any("line 9: USER agent" in n and "sandbox's own" in n for n in notes), notes
    assert any("line 10: CMD" in n for n in notes), notes
    # task.toml left the workdir unset, and dumping it keeps it unset (Harbor's reading).
    assert "workdir" not in task.config.dumps()


def test_task_toml_workdir_wins_over_the_image(tmp_path: Path) -> None:
    toml = '[environment]\nworkdir = "/srv"\n'
    task = load_task_dir(write_task(tmp_path / "t", "FROM python:3.12-slim\nWORKDIR /app\n", toml))
    assert task.config.environment.workdir == "/srv"


def test_no_workdir_anywhere_is_bureaus_default(tmp_path: Path) -> None:
    task = load_task_dir(write_task(tmp_path / "t", "FROM debian:bookworm-slim\n"))
    assert task.config.environment.workdir == "/workspace"
    assert task.local_problems == []


@pytest.mark.parametrize(
    ("dockerfile", "line", "words"),
    [
        ("FROM python:3.12\nRUN apt-get update && apt-get install -y curl\n", 2, "apt-get"),
        ("FROM node:20\n", 1, "FROM node:20"),
        ("FROM python:3.12 AS build\nFROM debian:12\n", 2, "second stage"),
        (
            "FROM python:3.12\nCOPY --from=ghcr.io/astral-sh/uv:0.9 /uv /bin/uv\n",
            2,
            "another image",
        ),
        ("FROM python:3.12\nADD https://example.com/x.tgz /app/\n", 2, "a download"),
        ("FROM python:3.12\nWORKDIR /app\nCOPY data /opt/data\n", 3, "a copy to /opt/data"),
        ("FROM python:3.12\nCOPY missing.txt /app/\n", 2, "not found"),
        ("FROM python:3.12\nCOPY ../../etc/passwd /app/\n", 2, "not found"),
        ("FROM python:3.12\nRUN pip install no-such-package-bureau==1.0\n", 2, "not installed"),
        ("FROM python:3.12\nRUN pip install 'pydantic<1'\n", 2, "pydantic<1: it has"),
        ("FROM python:3.12\nRUN pip install -r requirements.txt\n", 2, "pip install -r"),
        ('FROM python:3.12\nRUN ["python", "-c", "print(1)"]\n', 2, "RUN"),
    ],
)
def test_what_needs_a_build_is_refused_naming_the_line(
    tmp_path: Path, dockerfile: str, line: int, words: str
) -> None:
    task = load_task_dir(write_task(tmp_path / "t", dockerfile))
    (problem,) = task.local_problems
    text = str(problem)
    assert problem.line == line and words in text, text
    assert str(tmp_path / "t" / "environment" / "Dockerfile") in text
    assert "--runtime docker" in text


def test_pip_installs_the_sandbox_already_satisfies_are_emulated(tmp_path: Path) -> None:
    dockerfile = (
        "FROM python:3.11-slim\n"
        'RUN pip install --no-cache-dir "pydantic>=2" \\\n    openpyxl \\\n'
        "    && python -m pip install -q pypdf\n"
        "RUN uv pip install --system packaging\n"
    )
    assert load_task_dir(write_task(tmp_path / "t", dockerfile)).local_problems == []


def test_an_exact_pin_takes_the_same_major_version_as_a_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task built elsewhere pins that environment's versions; the sandbox's Python stands in
    with the same major version (and says so), never with another major or a missing one."""
    from importlib import metadata

    from packaging.version import Version

    have = Version(metadata.version("openpyxl"))
    other_minor = f"{have.major}.{have.minor + 1}.0"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM python:3.11-slim\nRUN pip install openpyxl=={other_minor}\n")
    plan = read_image_plan(dockerfile, exact_pins=False)
    assert plan.errors == []
    assert plan.substituted == [f"line 2: openpyxl {have} for =={other_minor}"]
    strict = read_image_plan(dockerfile, exact_pins=True)
    assert "openpyxl==" in str(strict.errors[0]) and f"it has {have}" in str(strict.errors[0])
    monkeypatch.setenv("BUREAU_EXACT_PINS", "1")
    assert read_image_plan(dockerfile).errors  # the environment asks for exact pins
    monkeypatch.delenv("BUREAU_EXACT_PINS")
    for refused in (f"openpyxl=={have.major + 1}.0.0", "no-such-package==1.0", "openpyxl>=999"):
        dockerfile.write_text(f"FROM python:3.11-slim\nRUN pip install {refused}\n")
        plan = read_image_plan(dockerfile)
        assert plan.substituted == [] and len(plan.errors) == 1, refused


def test_a_separate_verifier_image_is_read_from_tests(tmp_path: Path) -> None:
    root = write_task(
        tmp_path / "t",
        "FROM ubuntu:24.04\nWORKDIR /app\n",
        '[verifier]\nenvironment_mode = "separate"\n',
    )
    (root / "tests" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /grader\nENV MODE=strict\nCOPY . /tests/\n"
    )
    task = load_task_dir(root)
    assert task.separate_verifier and task.verifier_image is not None
    assert task.verifier_image.workdir == "/grader"
    assert task.verifier_image.env == {"MODE": "strict"}
    assert [(c.source, c.target) for c in task.verifier_image.copies] == [
        (root / "tests", "/tests")
    ]


def test_settings_the_runtime_cannot_honour_are_reported(tmp_path: Path) -> None:
    toml = """artifacts = ["/app/out.txt"]
[agent]
user = "agent"
network_mode = "public"
[environment]
network_mode = "no-network"
gpus = 1
mcp_servers = [{name = "x", transport = "stdio", command = "x"}]
skills_dir = "/skills"
healthcheck = {command = "true"}
os = "windows"
docker_image = "ghcr.io/x/y:1"
[verifier]
collect = [{command = "true"}]
"""
    task = load_task_dir(write_task(tmp_path / "t", "FROM python:3.12\n", toml))
    notes = "\n".join(ignored_settings(task))
    for setting in (
        "[environment] docker_image",
        "[agent] user",
        "[environment] gpus",
        "[environment] mcp_servers",
        "[environment] skills_dir",
        "[environment] healthcheck",
        "[environment] os",
        "[verifier] collect",
        "artifacts",
    ):
        assert f"{setting} = " in notes, setting
    assert network_request(task) == "[agent] network_mode = 'public'"


def test_network_requests_and_steps_are_named(tmp_path: Path) -> None:
    task = load_task_dir(write_task(tmp_path / "t", "FROM python:3.12\n"))
    assert network_request(task) == "[environment] network_mode = 'public'"  # Harbor's default
    steps = tmp_path / "s"
    for name in ("one", "two"):
        write_task(steps / "steps" / name, "FROM python:3.12\n")
    (steps / "environment").mkdir()
    (steps / "environment" / "Dockerfile").write_text("FROM python:3.12\n")
    (steps / "task.toml").write_text('[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n')
    multi = load_task_dir(steps)  # no instruction.md of its own: each step has one
    assert [s["name"] for s in multi.steps] == ["one", "two"]
    assert runner_problems(multi, agent_runs_steps=True) == []
    (problem,) = runner_problems(multi, agent_runs_steps=False)
    assert "[[steps]]" in str(problem) and "BubblewrapEnvironment" in str(problem)
    two = multi.for_step("two")
    assert two.instruction == "Do it.\n" and two.step == "two" and two.steps == []
    assert two.test_script == steps / "steps" / "two" / "tests" / "test.sh"
    (steps / "steps" / "two" / "instruction.md").unlink()
    with pytest.raises(TaskFormatErrors, match=r"steps/two/instruction\.md"):
        load_task_dir(steps)


def test_env_templates_are_read_from_the_host() -> None:
    host = {"TOKEN": "s3cret"}
    table = {"A": "literal", "B": "${TOKEN}", "C": "${UNSET:-fallback}", "D": "x${TOKEN}"}
    assert resolve_env_templates(table, host) == {
        "A": "literal",
        "B": "s3cret",
        "C": "fallback",
        "D": "x${TOKEN}",
    }
    with pytest.raises(KeyError, match="UNSET"):
        resolve_env_templates({"E": "${UNSET}"}, host)


def test_environment_env_round_trips(tmp_path: Path) -> None:
    config = TaskConfig.loads('[environment]\nenv = {A = "1"}\n')
    assert config.environment.env == {"A": "1"}
    assert TaskConfig.loads(config.dumps()).environment.env == {"A": "1"}


def test_plan_reads_a_dockerfile_given_directly(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM python:3.12\nLABEL a=b\nEXPOSE 80\n")
    plan = read_image_plan(tmp_path / "Dockerfile")
    assert plan.base == "python:3.12" and plan.errors == []
    assert plan.ignored == ["line 3: EXPOSE 80 (ignored: sandboxes have no network)"]


def test_training_and_evaluation_refuse_what_cannot_run_as_written(tmp_path: Path) -> None:
    from bureau.tasks.support import require_runnable

    offline = '[environment]\nnetwork_mode = "no-network"\n'
    require_runnable(load_task_dir(write_task(tmp_path / "ok", "FROM python:3.12\n", offline)))
    public = load_task_dir(write_task(tmp_path / "public", "FROM python:3.12\n"))
    with pytest.raises(TaskFormatErrors, match="network_mode = 'public'"):
        require_runnable(public)
    require_runnable(public, offline_public_tasks=True)
    build = write_task(tmp_path / "build", "FROM python:3.12\nRUN apt-get install -y jq\n", offline)
    with pytest.raises(TaskFormatErrors, match="line 2"):
        require_runnable(load_task_dir(build))
