"""The runtime interface: what a trial needs from an isolated environment.

A `Runtime` starts a `Sandbox` for one task. A sandbox is a trial's private copy of the task's
workspace plus log folders, and a way to run commands inside an isolated view of it:

- `exec` runs one command to completion with a timeout (solve.sh, test.sh, agent code);
- `spawn` starts a long-running process with piped stdio (the MCP tool servers);
- `upload`/`download` move files between the host and paths inside the sandbox;
- `stop` is idempotent and always runs, even after a crash.

Inside paths follow Harbor: the task's `environment.workdir` (default `/workspace`),
`/logs/agent`, `/logs/verifier`, `/tests`, `/solution`, and a private `/tmp`. Which of them a
command sees depends on its `phase`:

| phase | workdir | /logs/agent, /logs/artifacts | /logs/verifier | /tests | /solution |
|---|---|---|---|---|---|
| setup, agent | rw | rw | - | - | - |
| solution | rw | rw | - | - | ro |
| verifier | rw | ro | rw | ro | - |
| full | rw | rw | rw | rw | rw |

`full` is for runners that manage phases themselves (Harbor's environments). A path marked `-`
does not exist for that command, so an agent cannot read the tests or tamper with the verifier's
folder; each command starts in fresh pid, net, ipc and uts namespaces, so nothing it leaves
running survives into the next phase.
"""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bureau.tasks.taskdir import TaskDir

Phase = Literal["setup", "agent", "verifier", "solution", "full"]

_PATH_VARIABLES = {
    "BUREAU_WORKSPACE": "workspace",
    "BUREAU_VERIFIER_DIR": "logs/verifier",
    "BUREAU_AGENT_DIR": "logs/agent",
    "BUREAU_TESTS_DIR": "tests",
    "BUREAU_SOLUTION_DIR": "solution",
}


def path_env(where: Callable[[str], str]) -> dict[str, str]:
    """The variables that name a sandbox's folders for scripts (solve.sh, test.sh, tools);
    `where(folder)` is the path of `workspace`, `logs/verifier`, `logs/agent`, `tests` or
    `solution` as the sandbox's commands see it."""
    return {variable: where(folder) for variable, folder in _PATH_VARIABLES.items()}


def inside_path(workdir: str) -> Callable[[str], str]:
    """`where` for runtimes with Harbor's inside paths: the workdir, then `/logs/...` etc."""
    return lambda folder: workdir if folder == "workspace" else f"/{folder}"


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox; `from_task` reads them from task.toml."""

    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 2048
    max_processes: int = 256
    max_file_mb: int = 512
    cpu_time_s: int = 3600

    @classmethod
    def from_task(cls, task: TaskDir) -> Limits:
        env = task.config.environment
        return cls(
            cpus=float(env.cpus or 1),
            memory_mb=int(env.memory_mb or 2048),
            storage_mb=int(env.storage_mb or 2048),
        )


class Sandbox(ABC):
    id: str
    workdir: str

    @abstractmethod
    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout_s: float,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> ExecResult:
        """Run `cmd` inside the sandbox; a timeout kills every process it started."""

    @abstractmethod
    def spawn(
        self,
        cmd: Sequence[str],
        *,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        tool_server: bool = False,
    ) -> subprocess.Popen[bytes]:
        """Start a long-running process with piped stdin/stdout/stderr (binary).

        `tool_server`: the process is the MCP tool server, which runs agent code as a second
        uid of the sandbox (`BUREAU_CODE_UID`) so that code cannot signal, trace or read it.
        Runtimes that cannot give it that power ignore the flag.
        """

    @abstractmethod
    def upload(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to an absolute path inside the sandbox."""

    @abstractmethod
    def download(self, src: str, dest: Path) -> None:
        """Copy a file or folder from inside the sandbox to the host."""

    @abstractmethod
    def stop(self) -> None:
        """Kill everything and remove the sandbox's files. Safe to call twice."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Runtime(ABC):
    name: str

    supports_separate_verifier: bool = False
    """Whether `start(..., verifier=True)` gives Harbor's separate verifier environment."""

    @property
    def enforcement(self) -> str:
        """How sandboxes are held to their limits here, in one line a run prints at its start."""
        return f"limits as the {self.name} runtime enforces them"

    @abstractmethod
    def start(self, task: TaskDir, *, timeout_s: float, verifier: bool = False) -> Sandbox:
        """A fresh sandbox holding a private copy of the task's workspace; `verifier`: the
        separate verifier's environment (tests/Dockerfile, no workspace) instead."""

    def close(self) -> None:  # noqa: B027  # optional hook: most runtimes hold nothing shared
        """Release shared resources (pools, images). Safe to call twice."""
