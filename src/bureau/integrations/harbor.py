"""A Harbor environment backed by bureau's local bubblewrap runtime: Harbor runs without Docker.

Select it with (Harbor >= 0.26, Python >= 3.12, bureau installed in the same environment)::

    harbor run -p <task or dataset> -a <agent> -e bureau.integrations.harbor:BubblewrapEnvironment

Each Harbor trial gets one bureau sandbox (`bureau.sandbox.get_runtime("local")`), started from
the task directory that holds Harbor's `environment/` folder. Harbor runs its phases itself
(agent, then `/tests` upload and test.sh); the environment follows them from what Harbor asks:

- Until Harbor uploads `/tests`, commands run in the sandbox's `solution` phase: the workdir
  and `/logs/agent` writable, `/solution` read-only (empty unless the oracle agent uploaded
  it), no `/tests` and no `/logs/verifier`, so the agent can neither read the tests nor plant
  files where the verifier reads.
- The upload to `/tests` starts verification: everything the agent started is killed, the
  verifier's `/tmp`, `/tests` and reward files are emptied, and commands run in the `verifier`
  phase (the workdir writable, `/logs/agent` and `/tests` read-only, `/logs/verifier`
  writable, a `/tmp` the agent never had). Nothing the agent wrote is on the verifier's import
  path or in its `/tmp`.
- The download of `/logs/verifier` ends it (Harbor's multi-step tasks run the agent again).

What differs from Harbor's Docker environment:

- The Dockerfile is not built. Commands run on the host's read-only system (its bash, Python
  and tools), and the task's workdir starts as a copy of `environment/workspace/` (bureau's
  convention; empty when the folder is missing). A prebuilt-image task without a Dockerfile gets
  its `environment/` folder uploaded into the workdir, as Harbor does for such tasks.
- There is no network at all. A task that asks for `network_mode = "public"` is refused at
  trial start, unless `--ek offline_public_tasks=true` says to run it offline anyway; an
  allowlist is refused (Harbor's own check, from the capabilities below).
- Every command runs as the sandbox's own unprivileged user, which owns the workdir and the log
  folders; Harbor's `user` argument (root for its housekeeping, the task's agent user) is
  ignored.
- Files move through the workdir, /logs, /tests and /solution only. Harbor's filtered downloads
  (which pack a tar under /tmp inside the environment) are done on the host instead; an upload
  elsewhere, such as injected skills at /runtime/skills, fails. The sandbox has no
  /logs/artifacts, so Harbor's best-effort artifact collection records it as failed.
- Timeouts: a command killed by its `timeout_sec` raises `RuntimeError`, as in Harbor's Docker
  environment, and a command whose caller is cancelled (Harbor's phase timeouts use
  `asyncio.wait_for`) is killed with everything it started, so a timed-out agent cannot keep
  writing while the verifier runs.
- `stop(delete=False)` still deletes: the sandbox's files live under bureau's sandbox root,
  and the trial's logs have already been downloaded into Harbor's trial directory by then.

Harbor is not a bureau dependency and needs Python >= 3.12, while bureau's own environment and
type check run on 3.11; importing this module without Harbor raises an ImportError saying so.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import fnmatch
import functools
import posixpath
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from bureau.sandbox.base import Phase
from bureau.sandbox.local import LocalRuntime, LocalSandbox
from bureau.tasks.errors import TaskFormatErrors
from bureau.tasks.image import read_image_plan
from bureau.tasks.support import ignored_settings
from bureau.tasks.taskdir import TaskDir, load_task_dir

SUPPORTED_HARBOR = "0.26"
"""The Harbor release this plugin is written and tested against (0.26.0); 0.25 lacks modules
it imports."""


def harbor_import_error(exc: ImportError) -> str:
    """What to tell a user whose environment cannot import Harbor's parts: none installed, or
    an installed release without the module that failed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("harbor")
    except PackageNotFoundError:
        return (
            "bureau.integrations.harbor needs Harbor in the same environment (Python >= 3.12): "
            f"pip install 'harbor>={SUPPORTED_HARBOR},<0.27'"
        )
    return (
        f"bureau.integrations.harbor works with Harbor {SUPPORTED_HARBOR}.x; this environment "
        f"has Harbor {installed}, which has no {exc.name or 'module it needs'} ({exc}): "
        f"pip install 'harbor>={SUPPORTED_HARBOR},<0.27'"
    )


# Harbor is an optional, Python >= 3.12 package: bureau's 3.11 type check runs without it (its
# names are Any there), so each import carries an ignore for the missing module.
try:
    from harbor.environments.base import (  # type: ignore[import-not-found]
        BaseEnvironment,
        ExecResult,
    )
    from harbor.environments.capabilities import (  # type: ignore[import-not-found]
        EnvironmentCapabilities,
        EnvironmentResourceCapabilities,
    )
    from harbor.environments.options import (  # type: ignore[import-not-found]
        EnvironmentOptions,
    )
    from harbor.models.task.config import (  # type: ignore[import-not-found]
        NetworkMode,
    )
    from harbor.utils.path_filter import (  # type: ignore[import-not-found]
        filter_paths_by_patterns,
    )
except ImportError as exc:
    raise ImportError(harbor_import_error(exc)) from exc

T = TypeVar("T")

ENVIRONMENT_TYPE = "bureau-bubblewrap"
KILL_GRACE_S = 5.0


class BubblewrapOptions(EnvironmentOptions):
    """`--ek` options of BubblewrapEnvironment."""

    offline_public_tasks: bool = Field(
        default=False,
        description="Run tasks that ask for public network access with no network instead "
        "of refusing them (the sandbox never has a network).",
    )


TESTS_DIR, SOLUTION_DIR, VERIFIER_DIR = "/tests", "/solution", "/logs/verifier"


def _under(path: str, folder: str) -> bool:
    norm = posixpath.normpath(path)
    return norm == folder or norm.startswith(folder + "/")


@functools.cache
def _local_runtime() -> LocalRuntime:
    """One runtime per process, shared by every trial of a Harbor job; closed at exit."""
    from bureau.sandbox import get_runtime

    runtime = get_runtime("local")
    assert isinstance(runtime, LocalRuntime)
    atexit.register(runtime.close)
    return runtime


async def _in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call on its own thread.

    Not `asyncio.to_thread`: its shared pool has min(32, cores + 4) workers, and every running
    command holds one for as long as it runs, so a few long agent commands in concurrent trials
    would queue every other sandbox call behind them.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def work() -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as error:
            outcome: Callable[[], None] = functools.partial(_fail, future, error)
        else:
            outcome = functools.partial(_resolve, future, value)
        # The loop may be gone by now: a cancelled caller does not wait for this thread.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(outcome)

    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "call")
    threading.Thread(target=work, name=f"bureau-harbor-{name}", daemon=True).start()
    return await future


def _resolve(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill a spawned command with everything it started: the local runtime's commands end
    their pid namespace and are reaped by bwrap (`BwrapProcess.kill`)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def _reap(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=KILL_GRACE_S)


def _text(data: bytes | None) -> str | None:
    # Harbor's Docker environment reports empty output as None; callers test `stdout or ...`.
    return data.decode(errors="replace") if data else None


class BubblewrapEnvironment(BaseEnvironment):
    """Harbor's `BaseEnvironment` over one bureau bubblewrap sandbox per trial."""

    options_model = BubblewrapOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._sandbox: LocalSandbox | None = None
        self._task: TaskDir | None = None
        self._verifying = False
        self._bundled_tests = False
        self._network_refusal: str | None = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return ENVIRONMENT_TYPE

    @property
    def capabilities(self) -> Any:
        return EnvironmentCapabilities(disable_internet=True)

    @classmethod
    def resource_capabilities(cls) -> Any:
        # Memory is a hard per-process ceiling (address-space rlimit) and cpus a hard cap where
        # the runtime can set one; neither is a reservation.
        return EnvironmentResourceCapabilities(
            cpu_limit=True, memory_limit=True, fractional_cpus=True
        )

    def _validate_definition(self) -> None:
        environment_dir = Path(self.environment_dir)
        task_path = _task_root(environment_dir)
        try:
            task = load_task_dir(task_path)
        except TaskFormatErrors as exc:
            problems = "; ".join(str(error) for error in exc.errors)
            raise ValueError(f"bureau cannot run the task at {task_path}: {problems}") from exc
        # Harbor's separate verifier runs in an environment built from tests/Dockerfile (the
        # task's or a step's), with the tests inside it.
        self._bundled_tests = environment_dir.name == "tests" and (
            (environment_dir / "Dockerfile").is_file()
        )
        if self._bundled_tests:
            plan = read_image_plan(environment_dir / "Dockerfile")
            plan.place(plan.workdir or task.config.environment.workdir, ("/tests", "/logs"))
            task = dataclasses.replace(task, verifier_image=plan)
        self._task = task

    def validate_network_policy_support(self, network_policy: Any = None) -> None:
        # Harbor validates while it builds the trial, where an error would end the whole job;
        # a network the sandbox cannot give is refused by `start`, for this trial alone.
        policy = network_policy or self._network_policy
        if policy.network_mode == NetworkMode.NO_NETWORK:
            super().validate_network_policy_support(network_policy)
        elif self._network_refusal is None:
            self._network_refusal = f"network_mode='{policy.network_mode.value}'"

    def _refusal(self) -> str | None:
        """Why this trial cannot run here, or None: what the local runtime cannot build, or a
        network it cannot give when the user did not say to run offline."""
        assert self._task is not None
        problems = [str(problem) for problem in self._task.local_problems]
        offline_ok = isinstance(self.options, BubblewrapOptions) and (
            self.options.offline_public_tasks
        )
        if self._network_refusal is not None and not offline_ok:
            problems.append(
                f"{ENVIRONMENT_TYPE} sandboxes have no network, but this task asks for "
                f"{self._network_refusal}. Set [environment].network_mode = 'no-network' in "
                "its task.toml, or pass --ek offline_public_tasks=true to run it offline anyway."
            )
        return "; ".join(problems) or None

    def _effective_task(self) -> TaskDir:
        """The task, with Harbor's resource overrides (--override-cpus etc.) applied."""
        assert self._task is not None
        harbor_env = self.task_env_config
        updates = {
            name: value
            for name in ("cpus", "memory_mb", "storage_mb")
            if (value := getattr(harbor_env, name, None)) is not None
        }
        if not updates:
            return self._task
        config = self._task.config
        environment = config.environment.model_copy(update=updates)
        return dataclasses.replace(
            self._task, config=config.model_copy(update={"environment": environment})
        )

    def _running(self) -> LocalSandbox:
        if self._sandbox is None:
            raise RuntimeError(f"the {ENVIRONMENT_TYPE} environment is not started")
        return self._sandbox

    @property
    def phase(self) -> Phase:
        """The sandbox phase of the next command (see the module docstring)."""
        return "verifier" if self._verifying else "solution"

    async def _before_upload(self, target: str) -> None:
        if _under(target, TESTS_DIR) and not self._verifying:
            await _in_thread(self._running().begin_verification)
            self._verifying = True

    def _after_upload(self, target: str) -> None:
        # Harbor makes scripts executable with a `chmod` inside, which a read-only /tests or
        # /solution refuses; it is done here, on the host, instead.
        if _under(target, TESTS_DIR) or _under(target, SOLUTION_DIR):
            folder = self._running().host_path(target)
            for path in [folder] if folder.is_file() else folder.rglob("*.sh"):
                if path.is_file() and not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o111)

    def _after_download(self, source: str) -> None:
        if _under(source, VERIFIER_DIR) and not self._bundled_tests:
            self._verifying = False

    async def start(self, force_build: bool) -> None:
        if self._sandbox is not None:
            return
        if refusal := self._refusal():
            raise RuntimeError(f"bureau cannot run this task in {ENVIRONMENT_TYPE}: {refusal}")
        assert self._task is not None
        for line in ignored_settings(self._task):
            self.logger.warning(f"{ENVIRONMENT_TYPE}: {line}")
        if self._network_refusal is not None:
            self.logger.warning(
                f"{ENVIRONMENT_TYPE}: running offline although the task asks for "
                f"{self._network_refusal} (offline_public_tasks=true)"
            )
        runtime = _local_runtime()
        timeout_s = float(self.task_env_config.build_timeout_sec)
        start = functools.partial(runtime.start, self._effective_task(), timeout_s=timeout_s)
        if self._bundled_tests:
            start = functools.partial(start, verifier=True)
        self._sandbox = await _in_thread(start)
        # A separate verifier's environment holds its tests from the start: it verifies.
        self._verifying = self._bundled_tests
        if self._bundled_tests:
            self._after_upload(TESTS_DIR)  # Harbor's chmod +x cannot touch a read-only /tests
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await _in_thread(sandbox.stop)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> Any:
        # Spawned on the event loop's thread, not a worker's: bubblewrap's --die-with-parent
        # follows the thread that started it, and the loop's thread outlives the trial.
        process = self._running().spawn(
            ["bash", "-c", command],
            phase=self.phase,
            env=self._merge_env(env),
            cwd=cwd or self.task_env_config.workdir,
        )
        try:
            stdout, stderr = await _in_thread(process.communicate, timeout=timeout_sec or None)
        except subprocess.TimeoutExpired:
            _kill(process)
            await _in_thread(_reap, process)
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from None
        except BaseException:
            # Cancelled (Harbor's phase timeouts) or failed while waiting: end the command and
            # everything it started; the waiting thread then sees the pipes close and returns.
            _kill(process)
            raise
        return ExecResult(
            stdout=_text(stdout), stderr=_text(stderr), return_code=process.returncode
        )

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._before_upload(target_path)
        await _in_thread(self._running().upload, Path(source_path), target_path)
        self._after_upload(target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._before_upload(target_dir)
        await _in_thread(self._running().upload, Path(source_dir), target_dir)
        self._after_upload(target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await _in_thread(self._running().download, source_path, target)
        self._after_download(source_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        await _in_thread(self._running().download, source_dir, target)
        self._after_download(source_dir)

    # Harbor's default filtered downloads pack a tar inside the environment under /tmp, which a
    # bureau sandbox does not exchange files through; these filter a plain download on the host.

    async def download_dir_filtered(
        self,
        *,
        source_dir: str,
        target_dir: Path | str,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        protect: Sequence[str] | None = None,
    ) -> None:
        """Only the files matching `include` and not `exclude` (fnmatch), plus `protect`."""

        def keep(paths: list[str]) -> list[str]:
            kept = filter_paths_by_patterns(paths, include=include, exclude=exclude)
            return kept + [p for p in paths if p in (protect or ()) and p not in kept]

        await self._download_selected(source_dir, Path(target_dir), keep)

    async def download_dir_with_exclusions(
        self, *, source_dir: str, target_dir: Path | str, exclude: list[str]
    ) -> None:
        """Everything but what matches `exclude`, matched the way `tar --exclude` matches."""

        def keep(paths: list[str]) -> list[str]:
            return [p for p in paths if not _tar_excluded(p, exclude)]

        await self._download_selected(source_dir, Path(target_dir), keep)

    async def _download_selected(
        self, source_dir: str, target: Path, keep: Callable[[list[str]], list[str]]
    ) -> None:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="bureau-harbor-") as scratch:
            staged = Path(scratch)
            await self.download_dir(source_dir, staged)
            await _in_thread(_copy_selected, staged, target, keep)


def _task_root(environment_dir: Path) -> Path:
    """The task folder above an environment folder: `environment/`, `tests/`, or a step's
    `steps/<name>/tests/` (the nearest folder up with a task.toml)."""
    for folder in [environment_dir, *environment_dir.parents]:
        if (folder / "task.toml").is_file():
            return folder
    return environment_dir.parent


def _copy_selected(staged: Path, target: Path, keep: Callable[[list[str]], list[str]]) -> None:
    files = sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file())
    for relative in keep(files):
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(staged / relative, destination)


def _tar_excluded(path: str, patterns: Sequence[str]) -> bool:
    """GNU tar's default for --exclude: a pattern may match any run of whole path components."""
    parts = path.split("/")
    runs = ["/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
    return any(
        fnmatch.fnmatch(run, pattern.removeprefix("./")) for pattern in patterns for run in runs
    )
