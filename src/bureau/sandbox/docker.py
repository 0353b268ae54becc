"""The Docker runtime: one container per trial, driven through the `docker` CLI.

For users with a Docker engine. `start` builds the task's `environment/Dockerfile` (tagged by a
hash of the environment folder, so identical environments build once) or pulls
`[environment].docker_image`, then runs the image detached with `sleep infinity` and:

- no network (`--network none`), `--cpus`, `--memory` (swap included) and `--pids-limit` from
  the task's limits, rlimits for file size, CPU time and core dumps, and `no-new-privileges`;
- an init process (`--init`) that reaps what commands leave behind.

Commands run with `docker exec`. A timeout kills the client and then every process in the
container (`kill -9 -1`, which spares only init): the phase that timed out is over anyway.

Phases are approximated, since a container's mounts cannot change per command: /tests and
/solution exist only once uploaded (the trial uploads them just before their phase), and the
first verifier-phase command first kills everything still running and empties /logs/verifier,
so nothing the agent wrote or left running there reaches the verifier. Storage is not limited
(Docker's `--storage-opt size` works only on some storage drivers).
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox import cleanup
from bureau.sandbox.base import (
    ExecResult,
    Limits,
    Phase,
    Runtime,
    Sandbox,
    inside_path,
    path_env,
)
from bureau.sandbox.limits import MIB
from bureau.sandbox.process import DEFAULT_CAP_BYTES, kill_group, run_captured
from bureau.tasks.taskdir import TaskDir

_CLI_TIMEOUT_S = 120.0


def environment_tag(environment_dir: Path) -> str:
    """An image tag that changes whenever any file of the environment folder changes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in environment_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(environment_dir)).encode() + b"\0")
        digest.update(path.read_bytes())
    return f"bureau-env:{digest.hexdigest()[:16]}"


def run_args(docker: str, name: str, image: str, limits: Limits, workdir: str) -> list[str]:
    """`docker run` arguments for a trial container (pure, so it is tested without an engine)."""
    return [
        docker, "run", "-d", "--name", name, "--label", "bureau.sandbox=1",
        "--network", "none", "--init", "--security-opt", "no-new-privileges",
        "--cpus", f"{limits.cpus:g}",
        "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
        "--pids-limit", str(limits.max_processes),
        "--ulimit", f"fsize={limits.max_file_mb * MIB}",
        "--ulimit", f"cpu={limits.cpu_time_s}", "--ulimit", "core=0",
        "-w", workdir, "--entrypoint", "sleep", image, "infinity",
    ]  # fmt: skip


def exec_args(
    docker: str, name: str, cmd: Sequence[str], env: Mapping[str, str], cwd: str, stdin: bool
) -> list[str]:
    args = [docker, "exec", *(["-i"] if stdin else []), "-w", cwd]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    return [*args, name, *cmd]


class DockerRuntime(Runtime):
    name = "docker"

    @property
    def enforcement(self) -> str:
        return "Docker: --memory (swap included), --pids-limit and --cpus per container"

    def __init__(self, docker: str | None = None, *, limits: Limits | None = None) -> None:
        found = shutil.which(docker or "docker")
        if found is None:
            raise BureauSystemError(
                SystemErrorKind.sandbox_unavailable, "the docker CLI is not installed"
            )
        self.docker = found
        self.limits = limits
        info = self._cli(["info", "--format", "{{.ServerVersion}}"], timeout_s=15, check=False)
        if info.returncode != 0:
            raise BureauSystemError(
                SystemErrorKind.sandbox_unavailable,
                f"no Docker engine answers: {info.stderr.strip()[-300:]}",
            )
        self._image_lock = threading.Lock()

    def _cli(
        self, args: list[str], *, timeout_s: float = _CLI_TIMEOUT_S, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                [self.docker, *args], capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"docker {args[0]} ran past {timeout_s:.0f} s") from exc
        if check and done.returncode != 0:
            raise BureauSystemError(
                SystemErrorKind.sandbox_start_failed,
                f"docker {args[0]} failed: {done.stderr.strip()[-1000:]}",
            )
        return done

    def image_for(self, task: TaskDir) -> str:
        """The task's image, pulled or built if this engine does not have it yet."""
        env = task.config.environment
        image = env.docker_image or environment_tag(task.environment_dir)
        with self._image_lock:
            if self._cli(["image", "inspect", image], check=False).returncode == 0:
                return image
            build_timeout = float(getattr(env, "build_timeout_sec", 900.0) or 900.0)
            if env.docker_image:
                self._cli(["pull", image], timeout_s=build_timeout)
            else:
                self._cli(
                    ["build", "-t", image, str(task.environment_dir)], timeout_s=build_timeout
                )
        return image

    def start(self, task: TaskDir, *, timeout_s: float, verifier: bool = False) -> DockerSandbox:
        if verifier:
            raise BureauSystemError(
                SystemErrorKind.sandbox_start_failed,
                "the docker runtime does not build separate verifier images yet",
            )
        image = self.image_for(task)
        deadline = time.monotonic() + timeout_s
        limits = self.limits or Limits.from_task(task)
        workdir = task.config.environment.workdir
        name = f"bureau-{secrets.token_hex(6)}"
        sandbox = DockerSandbox(self, name, workdir, limits)
        cleanup.register(sandbox)
        try:
            self._cli(run_args(self.docker, name, image, limits, workdir)[1:], timeout_s=timeout_s)
            sandbox.mkdirs(workdir, "/logs/agent", "/logs/artifacts", "/logs/verifier")
            if task.workspace_dir.is_dir():
                sandbox.upload(task.workspace_dir, workdir)
            if time.monotonic() > deadline:
                raise TimeoutError("container not ready in time")
        except BaseException as exc:
            sandbox.stop()
            if isinstance(exc, TimeoutError):
                raise BureauSystemError(
                    SystemErrorKind.sandbox_start_timeout, f"not ready in {timeout_s} s: {exc}"
                ) from exc
            raise
        return sandbox


class DockerSandbox(Sandbox):
    def __init__(self, runtime: DockerRuntime, name: str, workdir: str, limits: Limits) -> None:
        self.runtime, self.id, self.workdir, self.limits = runtime, name, workdir, limits
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._verifier_started = False
        self._stopped = False

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = path_env(inside_path(self.workdir))
        env.update(extra or {})
        return env

    def _docker(self, *args: str, timeout_s: float = _CLI_TIMEOUT_S) -> None:
        done = self.runtime._cli([*args], timeout_s=timeout_s, check=False)
        if done.returncode != 0:
            raise BureauSystemError(
                SystemErrorKind.upload_failed,
                f"docker {args[0]} failed: {done.stderr.strip()[-500:]}",
            )

    def mkdirs(self, *paths: str) -> None:
        self._docker("exec", self.id, "mkdir", "-p", *paths)

    def _kill_all(self) -> None:
        for proc in list(self._procs):
            kill_group(proc)
        self.runtime._cli(["exec", self.id, "sh", "-c", "kill -9 -1"], check=False)

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
        if phase == "verifier" and not self._verifier_started:
            self._verifier_started = True
            self._kill_all()
            self._docker(
                "exec", self.id, "sh", "-c", "rm -rf /logs/verifier; mkdir -p /logs/verifier"
            )
        argv = exec_args(
            self.runtime.docker,
            self.id,
            cmd,
            self._env(env),
            cwd or self.workdir,
            stdin is not None,
        )
        proc = self._popen(argv, stdin is not None)
        done = run_captured(
            proc,
            timeout_s=timeout_s,
            kill=self._kill_all,
            stdin=stdin.encode() if stdin is not None else None,
            cap_bytes=DEFAULT_CAP_BYTES,
        )
        self._procs.discard(proc)
        if done.stderr.startswith("Error response from daemon") and not done.timed_out:
            raise BureauSystemError(SystemErrorKind.sandbox_crashed, done.stderr.strip()[-1000:])
        return done

    def spawn(
        self,
        cmd: Sequence[str],
        *,
        phase: Phase = "agent",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        tool_server: bool = False,
    ) -> subprocess.Popen[bytes]:
        # The tool server works outside the workspace, so nothing the agent writes there is
        # in its working directory.
        where = cwd or ("/" if tool_server else self.workdir)
        argv = exec_args(self.runtime.docker, self.id, cmd, self._env(env), where, True)
        return self._popen(argv, True)

    def _popen(self, argv: list[str], pipe_stdin: bool) -> subprocess.Popen[bytes]:
        if self._stopped:
            raise BureauSystemError(SystemErrorKind.sandbox_crashed, f"{self.id} is stopped")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if pipe_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._procs = {p for p in self._procs if p.poll() is None} | {proc}
        return proc

    def upload(self, src: Path, dest: str) -> None:
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"{src} does not exist")
        if src.is_dir():
            self.mkdirs(dest)
            self._docker("cp", f"{src}/.", f"{self.id}:{dest}")
        else:
            self.mkdirs(str(Path(dest).parent))
            self._docker("cp", str(src), f"{self.id}:{dest}")

    def download(self, src: str, dest: Path) -> None:
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        probe = self.runtime._cli(["exec", self.id, "test", "-d", src], check=False)
        if probe.returncode == 0:
            dest.mkdir(parents=True, exist_ok=True)
            self._docker("cp", f"{self.id}:{src.rstrip('/')}/.", str(dest))
        else:
            done = self.runtime._cli(["cp", f"{self.id}:{src}", str(dest)], check=False)
            if "Could not find the file" in done.stderr:
                raise FileNotFoundError(f"{src} does not exist in the sandbox")
            if done.returncode != 0:
                raise BureauSystemError(
                    SystemErrorKind.upload_failed, f"docker cp failed: {done.stderr.strip()[-500:]}"
                )

    def stop(self) -> None:
        self._stopped = True
        for proc in list(self._procs):
            kill_group(proc)
        with contextlib.suppress(TimeoutError, OSError):
            self.runtime._cli(["rm", "-f", self.id], check=False)
        cleanup.unregister(self)
