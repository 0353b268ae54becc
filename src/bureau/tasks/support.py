"""What of a Harbor task bureau's local runtime honours, refuses, or reads and then ignores.

A task written for Harbor may ask for things a bubblewrap sandbox on the host cannot give: an
image build (`TaskDir.local_problems`), a network, GPUs, a user, a health check, MCP servers of
its own. Nothing is ignored silently: `ignored_settings` lists every setting bureau reads and
does not honour, and `network_request` says when the task wants a network, so that a runner can
refuse it or, when the user says so, run it offline and say that it did.
"""

from __future__ import annotations

from typing import Any

from bureau.tasks.errors import TaskFormatError, TaskFormatErrors
from bureau.tasks.taskdir import TaskDir

NETWORK_ADVICE = (
    "bureau's sandboxes have no network: set network_mode = 'no-network' in task.toml if the "
    "task needs none, or run it offline anyway (`bureau tasks check --offline-public-tasks`, "
    "Harbor: `--ek offline_public_tasks=true`)"
)


def runner_problems(task: TaskDir, *, agent_runs_steps: bool) -> list[TaskFormatError]:
    """What bureau's own trial runner cannot run with the given agent, whatever the runtime:
    a multi-step task, for an agent that runs single episodes (the model harness)."""
    if not task.steps or agent_runs_steps:
        return []
    return [
        TaskFormatError(
            task.config_path,
            "a single-step task (this agent runs one episode per trial; the oracle, nop and "
            "harness agents run [[steps]], and so does Harbor with bureau's sandbox: harbor "
            "run -e bureau.integrations.harbor:BubblewrapEnvironment)",
            field="steps",
            got=f"{len(task.steps)} steps",
        )
    ]


def network_request(task: TaskDir) -> str | None:
    """What network the task asks for, in any phase, or None when it asks for none."""
    config = task.config
    wants: list[str] = []
    if config.environment.network_mode != "no-network":
        wants.append(f"[environment] network_mode = '{config.environment.network_mode}'")
    for section in ("agent", "verifier"):
        mode = (getattr(config, section).model_extra or {}).get("network_mode")
        if mode in ("public", "allowlist"):
            wants.append(f"[{section}] network_mode = '{mode}'")
    return "; ".join(wants) or None


def ignored_settings(task: TaskDir) -> list[str]:
    """Each setting of task.toml or the Dockerfiles that the local runtime does not honour."""
    config = task.config
    environment = config.environment.model_extra or {}
    notes: list[str] = []

    def note(where: str, value: Any, why: str) -> None:
        notes.append(f"{task.config_path}: {where} = {value!r} is ignored: {why}")

    if config.environment.docker_image:
        note(
            "[environment] docker_image",
            config.environment.docker_image,
            "no image is pulled; commands run on the host's read-only system",
        )
    for section in ("agent", "verifier"):
        user = (getattr(config, section).model_extra or {}).get("user")
        if user is not None:
            note(f"[{section}] user", user, "every command runs as the sandbox's own user")
    for key, why in (
        ("healthcheck", "no health check is run"),
        ("mcp_servers", "the agent gets bureau's tool servers, not the task's"),
        ("skills_dir", "no skills are copied for the agent"),
        ("gpus", "sandboxes have no GPUs"),
        ("gpu_types", "sandboxes have no GPUs"),
        ("tpu", "sandboxes have no TPUs"),
    ):
        if environment.get(key):
            note(f"[environment] {key}", environment[key], why)
    os_name = environment.get("os")
    if os_name not in (None, "linux"):
        note("[environment] os", os_name, "commands run on this Linux host")
    collect = (config.verifier.model_extra or {}).get("collect")
    if collect:
        note("[verifier] collect", collect, "collect hooks are not run")
    artifacts = (config.model_extra or {}).get("artifacts")
    if artifacts and not task.separate_verifier:
        note("artifacts", artifacts, "artifacts are only handed to a separate verifier")
    for plan in (task.image, task.verifier_image):
        if plan is not None:
            notes += [f"{plan.dockerfile}: {line}" for line in plan.ignored]
            notes += [
                f"{plan.dockerfile}: {line} (the same major version)" for line in plan.substituted
            ]
    return notes


def require_runnable(task: TaskDir, *, offline_public_tasks: bool = False) -> None:
    """For training and evaluation with the model harness on the local runtime: raise
    TaskFormatErrors naming every reason the task cannot run as its author meant (an image
    build, a network), rather than train on a task that can only score 0. The harness runs
    multi-step tasks (`HarnessAgent.supports_steps`)."""
    problems = [*runner_problems(task, agent_runs_steps=True), *task.local_problems]
    network = network_request(task)
    if network and not offline_public_tasks:
        problems.append(
            TaskFormatError(task.config_path, "no network (" + NETWORK_ADVICE + ")", got=network)
        )
    if problems:
        raise TaskFormatErrors(problems)
