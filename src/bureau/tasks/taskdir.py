"""A Harbor task directory on disk, and the checks that make it runnable.

Layout::

    <task>/instruction.md          the prompt given to the agent (non-empty)
    <task>/task.toml               TaskConfig
    <task>/environment/Dockerfile  the build file, unless [environment].docker_image is set
    <task>/environment/workspace/  files bureau copies into the agent's working directory
    <task>/tests/test.sh           the verifier; writes <logs>/verifier/reward.json or .txt
    <task>/tests/Dockerfile        the verifier's own image, in Harbor's separate-verifier mode
    <task>/solution/solve.sh       the oracle solution (optional for Harbor, required by bureau)

A multi-step task (`[[steps]]` in task.toml) keeps each step's instruction.md, tests/ and
solution/ under `steps/<name>/` instead (a step without tests/ or solution/ uses the task's);
`for_step` gives the view of one step that the trial runner runs.

The Dockerfile is read, not built (`bureau.tasks.image`): its WORKDIR is the working directory
when task.toml leaves `[environment].workdir` unset (as Harbor uses the image's), and what the
local runtime cannot provide without a build is listed in `local_problems`, naming the line.

Problems are collected, not raised one at a time: `validate_task_dir` returns every error and
`load_task_dir` raises them together as `TaskFormatErrors`. A script without its execute bit is
only a warning, because runners invoke the scripts through `bash` and so never need the bit;
it is still worth fixing, since a human running `./tests/test.sh` would trip on it.
"""

from __future__ import annotations

import dataclasses
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bureau.tasks.config import TaskConfig
from bureau.tasks.errors import TaskFormatError, TaskFormatErrors
from bureau.tasks.image import ImagePlan, read_image_plan

INSTRUCTION_FILE = "instruction.md"
CONFIG_FILE = "task.toml"
DOCKERFILE = "environment/Dockerfile"
VERIFIER_DOCKERFILE = "tests/Dockerfile"
DEFAULT_WORKDIR = "/workspace"
"""bureau's working directory when neither task.toml nor the Dockerfile names one."""
TEST_SCRIPT = "tests/test.sh"
SOLVE_SCRIPT = "solution/solve.sh"


@dataclass(frozen=True)
class TaskDir:
    """A loaded task directory: its parsed config and prompt, plus paths to its parts."""

    path: Path
    config: TaskConfig
    instruction: str
    warnings: tuple[TaskFormatError, ...] = field(default=(), compare=False)
    image: ImagePlan | None = field(default=None, compare=False)
    verifier_image: ImagePlan | None = field(default=None, compare=False)
    step: str | None = None
    """Set on the view of one step of a multi-step task (`for_step`)."""
    step_settings: dict[str, Any] = field(default_factory=dict, compare=False)
    """That step's [[steps]] table."""
    step_images: dict[str, ImagePlan] = field(default_factory=dict, compare=False)
    """Each step's own separate-verifier image (steps/<name>/tests/Dockerfile)."""

    def for_step(self, name: str) -> TaskDir:
        """The task as one step of it runs: the step's prompt, tests and solution, and its
        [steps.agent] / [steps.verifier] settings over the task's (Harbor's precedence; the
        step's own tests/Dockerfile, else the task's, is its separate verifier's image)."""
        (table,) = [step for step in self.steps if step.get("name") == name]
        part = self.path / "steps" / name
        config = self.config.model_copy(deep=True)
        agent, verifier = table.get("agent") or {}, table.get("verifier") or {}
        if isinstance(agent.get("timeout_sec"), int | float):
            config.agent.timeout_sec = float(agent["timeout_sec"])
        if isinstance(verifier.get("timeout_sec"), int | float):
            config.verifier.timeout_sec = float(verifier["timeout_sec"])
        if isinstance(verifier.get("env"), dict):
            config.verifier.env = {**config.verifier.env, **verifier["env"]}
        extra = config.verifier.model_extra
        if extra is not None:
            for key in ("environment_mode", "environment"):
                if key in verifier:
                    extra[key] = verifier[key]
        config.__pydantic_extra__ = {**(config.model_extra or {}), "steps": []}
        if isinstance(table.get("artifacts"), list):
            config.__pydantic_extra__["artifacts"] = [
                *((self.config.model_extra or {}).get("artifacts") or []),
                *table["artifacts"],
            ]
        return dataclasses.replace(
            self,
            config=config,
            instruction=(part / INSTRUCTION_FILE).read_text(encoding="utf-8"),
            step=name,
            step_settings=table,
            verifier_image=self.step_images.get(name, self.verifier_image),
        )

    @property
    def prompt(self) -> str:
        """What the agent is told over the whole task: the instruction, or each step's in
        order, blank-line separated, for a multi-step task."""
        if not self.steps:
            return self.instruction
        names = [str(step.get("name", "")) for step in self.steps]
        return "\n\n".join(self.for_step(name).instruction for name in names)

    @property
    def min_reward(self) -> float | dict[str, float] | None:
        """A step's threshold: below it, the remaining steps do not run (Harbor's rule)."""
        value = self.step_settings.get("min_reward")
        return value if isinstance(value, int | float | dict) else None

    @property
    def steps(self) -> list[dict[str, Any]]:
        """Harbor's `[[steps]]` tables of a multi-step task (empty for a single-step one)."""
        return steps_of(self.config)

    @property
    def separate_verifier(self) -> bool:
        """Harbor's separate-verifier mode: test.sh runs in an environment of its own."""
        return verifier_mode(self.config) == "separate"

    @property
    def local_problems(self) -> list[TaskFormatError]:
        """What the local runtime cannot provide without building an image (empty: it can);
        each names its Dockerfile and line."""
        problems: list[TaskFormatError] = []
        for plan in (self.image, self.verifier_image, *self.step_images.values()):
            if plan is not None:
                problems += plan.errors
        return problems

    @property
    def name(self) -> str:
        """The [task].name from task.toml, else the directory name (Harbor's convention)."""
        return self.config.task.name if self.config.task else self.path.name

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def instruction_path(self) -> Path:
        return self.path / INSTRUCTION_FILE

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def workspace_dir(self) -> Path:
        """Files that start out in the agent's working directory ([environment].workdir)."""
        return self.environment_dir / "workspace"

    @property
    def part_dir(self) -> Path:
        """Where the prompt, tests/ and solution/ live: the task, or its step's folder."""
        return self.path / "steps" / self.step if self.step else self.path

    def _part(self, sub: str) -> Path:
        # A step without a tests/ or solution/ of its own uses the task's (as Harbor does).
        own = self.part_dir / sub
        return own if own.is_dir() or self.step is None else self.path / sub

    @property
    def tests_dir(self) -> Path:
        return self._part("tests")

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def solution_dir(self) -> Path:
        return self._part("solution")

    @property
    def solve_script(self) -> Path:
        return self.solution_dir / "solve.sh"


def load_task_dir(path: Path | str, *, require_solution: bool = False) -> TaskDir:
    """Load and check a task directory; raises TaskFormatErrors listing every problem."""
    inspection = _inspect(Path(path), require_solution)
    if inspection.errors:
        raise TaskFormatErrors(inspection.errors)
    assert inspection.config is not None and inspection.instruction is not None
    return TaskDir(
        path=Path(path),
        config=inspection.config,
        instruction=inspection.instruction,
        warnings=tuple(inspection.warnings),
        image=inspection.image,
        verifier_image=inspection.verifier_image,
        step_images=inspection.step_images,
    )


def step_names(path: Path) -> list[str]:
    """The `[[steps]]` names of the task at `path`, in order, read from task.toml without
    loading (or validating) the task; empty for a single-step task."""
    import tomllib

    config = path / CONFIG_FILE
    steps = (
        tomllib.loads(config.read_text(encoding="utf-8")).get("steps") if config.is_file() else None
    )
    if not isinstance(steps, list):
        return []
    return [str(step.get("name", "")) for step in steps if isinstance(step, dict)]


def read_prompt(path: Path) -> str:
    """`TaskDir.prompt` without loading the task: its instruction.md, or each step's in
    order when task.toml lists `[[steps]]`."""
    names = step_names(path)
    if not names:
        return (path / INSTRUCTION_FILE).read_text(encoding="utf-8")
    return "\n\n".join(
        (path / "steps" / name / INSTRUCTION_FILE).read_text(encoding="utf-8") for name in names
    )


def steps_of(config: TaskConfig) -> list[dict[str, Any]]:
    steps = (config.model_extra or {}).get("steps")
    return [step for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []


def verifier_mode(config: TaskConfig) -> str:
    """Harbor's rule: an explicit `environment_mode`, else "separate" when the verifier has an
    `environment` table of its own, else "shared"."""
    extra = config.verifier.model_extra or {}
    mode = extra.get("environment_mode")
    if isinstance(mode, str):
        return mode
    return "separate" if isinstance(extra.get("environment"), dict) else "shared"


def validate_task_dir(path: Path | str, *, require_solution: bool = False) -> list[TaskFormatError]:
    """Every error in a task directory (empty when it is valid); warnings are not included."""
    return check_task_dir(path, require_solution=require_solution).errors


def check_task_dir(path: Path | str, *, require_solution: bool = False) -> TaskCheck:
    """Errors and warnings of a task directory, and whatever parts of it could be read."""
    return _inspect(Path(path), require_solution)


@dataclass
class TaskCheck:
    """The outcome of checking one task directory."""

    config: TaskConfig | None = None
    instruction: str | None = None
    errors: list[TaskFormatError] = field(default_factory=list)
    warnings: list[TaskFormatError] = field(default_factory=list)
    image: ImagePlan | None = None
    verifier_image: ImagePlan | None = None
    step_images: dict[str, ImagePlan] = field(default_factory=dict)


def _inspect(root: Path, require_solution: bool) -> TaskCheck:
    found = TaskCheck()
    if not root.is_dir():
        got = "a file" if root.exists() else "no such directory"
        found.errors.append(TaskFormatError(root, "a task directory", got=got))
        return found

    config_errors: list[TaskFormatError] = []
    try:
        found.config = TaskConfig.load(root / CONFIG_FILE)
    except TaskFormatErrors as exc:
        config_errors = list(exc.errors)
    steps = steps_of(found.config) if found.config is not None else []
    # A multi-step task has a prompt and tests per step, under steps/<name>/, and none of its own.
    parts = [root / "steps" / str(step.get("name", "")) for step in steps] or [root]

    for part in parts:
        instruction = _read_text(part / INSTRUCTION_FILE, "the task prompt", found.errors)
        if instruction is not None:
            if instruction.strip():
                found.instruction = found.instruction or instruction
            else:
                found.errors.append(
                    TaskFormatError(
                        part / INSTRUCTION_FILE, "a non-empty task prompt", got="no text"
                    )
                )
    found.errors.extend(config_errors)  # after the prompt's, in the order of the layout

    # Without a readable config we cannot tell whether a prebuilt image replaces the
    # Dockerfile, so the Dockerfile is only required once the config is known.
    if found.config is not None and found.config.environment.docker_image is None:
        dockerfile = root / DOCKERFILE
        if not dockerfile.is_file():
            found.errors.append(
                TaskFormatError(
                    dockerfile,
                    "an environment build file (or [environment].docker_image in task.toml)",
                    got=_missing(dockerfile),
                )
            )

    for part in parts:
        # A step without tests/ or solution/ of its own uses the task's.
        tests = part if (part / "tests").is_dir() or part == root else root
        solution = part if (part / "solution").is_dir() or part == root else root
        _check_script(tests / TEST_SCRIPT, "the verifier script", True, found)
        if require_solution or (solution / SOLVE_SCRIPT).exists():
            _check_script(
                solution / SOLVE_SCRIPT, "the oracle solution script", require_solution, found
            )
    if found.config is not None and not found.errors:
        _read_images(root, found.config, found)
    return found


def _read_images(root: Path, config: TaskConfig, found: TaskCheck) -> None:
    """The Dockerfiles as the local runtime provides them; WORKDIR becomes the workdir when
    task.toml leaves it unset."""
    environment = config.environment
    dockerfile = root / DOCKERFILE
    if dockerfile.is_file():
        found.image = _plan(dockerfile, found)
    explicit = "workdir" in environment.model_fields_set
    if not explicit:
        workdir = (found.image.workdir if found.image else None) or DEFAULT_WORKDIR
        environment.workdir = workdir
        # Still "unset" for Harbor: dumping the config must not write the image's workdir.
        environment.model_fields_set.discard("workdir")
    if found.image is not None:
        found.image.place(environment.workdir, allowed=("/logs",))
    if verifier_mode(config) == "separate" and (root / VERIFIER_DOCKERFILE).is_file():
        found.verifier_image = _verifier_plan(
            root / VERIFIER_DOCKERFILE, environment.workdir, found
        )
    for step in steps_of(config):
        name = str(step.get("name"))
        mode = (step.get("verifier") or {}).get("environment_mode") or verifier_mode(config)
        dockerfile = root / "steps" / name / VERIFIER_DOCKERFILE
        if mode == "separate" and dockerfile.is_file():
            plan = _verifier_plan(dockerfile, environment.workdir, found)
            if plan is not None:
                found.step_images[name] = plan


def _verifier_plan(dockerfile: Path, workdir: str, found: TaskCheck) -> ImagePlan | None:
    plan = _plan(dockerfile, found)
    if plan is not None:
        plan.place(plan.workdir or workdir, allowed=("/tests", "/logs"))
    return plan


def _plan(dockerfile: Path, found: TaskCheck) -> ImagePlan | None:
    try:
        return read_image_plan(dockerfile)
    except (OSError, ValueError, IndexError) as exc:
        found.errors.append(
            TaskFormatError(dockerfile, "a Dockerfile", got=f"{type(exc).__name__}: {exc}")
        )
        return None


def _check_script(path: Path, what: str, required: bool, found: TaskCheck) -> None:
    """A script must exist and have content; a missing execute bit is only a warning."""
    problems = found.errors if required else found.warnings
    if not path.is_file():
        problems.append(TaskFormatError(path, what, got=_missing(path)))
        return
    text = _read_text(path, what, problems)
    if text is not None and not text.strip():
        problems.append(TaskFormatError(path, f"{what} with commands in it", got="no text"))
    mode = path.stat().st_mode
    if not mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
        found.warnings.append(
            TaskFormatError(path, "an executable file (chmod +x)", got=f"mode {mode & 0o777:o}")
        )


def _read_text(path: Path, what: str, problems: list[TaskFormatError]) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        problems.append(TaskFormatError(path, what, got=_missing(path)))
    except UnicodeDecodeError as exc:
        problems.append(
            TaskFormatError(path, "UTF-8 text", got=f"invalid byte at offset {exc.start}")
        )
    return None


def _missing(path: Path) -> str:
    return "a directory" if path.is_dir() else "no such file"
