"""`--isolation none`: the sandbox interface with no isolation at all. UNSAFE.

For machines without bubblewrap, and only for trusted code (your own oracle solutions, a
debugging session). Commands run directly on this machine, as this user, with this user's view
of every file and of the network. What remains:

- the same trial folder layout as the local runtime (`folder`), created and removed the same way;
- paths are remapped only through environment variables: `BUREAU_WORKSPACE`,
  `BUREAU_VERIFIER_DIR`, `BUREAU_AGENT_DIR`, `BUREAU_TESTS_DIR` and `BUREAU_SOLUTION_DIR` name the
  host folders, and commands start in the workspace. A command that spells `/workspace` or
  `/tests` literally does not find them (generated tasks read the variables);
- per-process rlimits (address space, CPU time, file size) through `prlimit`;
- a timeout that kills the command's process group (a process that calls `setsid` escapes it);
- phases are not enforced: every command sees every folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox import cleanup
from bureau.sandbox.base import ExecResult, Limits, Phase, Runtime, Sandbox, path_env
from bureau.sandbox.bwrap import default_root
from bureau.sandbox.folder import (
    TrialFolder,
    provide_image,
    task_workdir,
    verifier_extra,
    verifier_workdir,
)
from bureau.sandbox.limits import MIB
from bureau.sandbox.process import DEFAULT_CAP_BYTES, kill_group, run_captured
from bureau.tasks.taskdir import TaskDir

log = logging.getLogger(__name__)


class UnsafeRuntime(Runtime):
    """Trial folders on the host and commands run as plain subprocesses: no isolation."""

    name = "local-unsafe"

    @property
    def enforcement(self) -> str:
        return "no isolation: commands run on this machine as this user, with no limits"

    def __init__(self, root: Path | None = None, *, limits: Limits | None = None) -> None:
        self.root = (root or default_root()).absolute()
        self.limits = limits
        self.prlimit = shutil.which("prlimit")
        self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
        cleanup.sweep_stale(self.root, lambda folder, fields: None)
        log.warning("isolation none: sandboxed commands run unconfined on this machine")

    supports_separate_verifier = True

    def start(self, task: TaskDir, *, timeout_s: float, verifier: bool = False) -> UnsafeSandbox:
        deadline = time.monotonic() + timeout_s
        workdir = verifier_workdir(task) if verifier else task_workdir(task)
        limits = self.limits or Limits.from_task(task)
        extra = verifier_extra(task) if verifier else ()
        sandbox = UnsafeSandbox(self, task, workdir, limits, extra)
        try:
            sandbox.path.mkdir(mode=0o700)
            (sandbox.path / cleanup.OWNER_FILE).write_text(f"owner={cleanup.owner_stamp()}\n")
            cleanup.register(sandbox)
            sandbox.folder.create()
            sandbox.image_env = provide_image(sandbox.folder, task, deadline, verifier=verifier)
            if time.monotonic() > deadline:
                raise TimeoutError("copying the workspace took too long")
        except BaseException as exc:
            sandbox.stop()
            if isinstance(exc, TimeoutError):
                raise BureauSystemError(
                    SystemErrorKind.sandbox_start_timeout, f"not ready in {timeout_s} s"
                ) from exc
            if isinstance(exc, OSError):
                raise BureauSystemError(SystemErrorKind.sandbox_start_failed, str(exc)) from exc
            raise
        return sandbox


class UnsafeSandbox(Sandbox):
    def __init__(
        self,
        runtime: UnsafeRuntime,
        task: TaskDir,
        workdir: str,
        limits: Limits,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.runtime, self.limits = runtime, limits
        self.id = f"sbx-{secrets.token_hex(6)}"
        self.path = runtime.root / self.id
        self.folder = TrialFolder(self.path, workdir, extra=extra)
        self.workdir = self.folder.workdir
        self.image_env: dict[str, str] = {}
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stopped = False

    def _env(self, phase: Phase, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.prefix) / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        tmp = str(self.folder.host_dir("vtmp" if phase == "verifier" else "tmp"))
        env.update(
            HOME=tmp,
            TMPDIR=tmp,
            PYTHONNOUSERSITE="1",
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update(self.image_env)
        env.update(path_env(lambda folder: str(self.folder.host_dir(folder))))
        env.update(extra or {})
        return env

    def _argv(self, cmd: Sequence[str]) -> list[str]:
        if not cmd:
            raise ValueError("empty command")
        if self.runtime.prlimit is None:
            return list(cmd)
        limits = self.limits
        return [
            self.runtime.prlimit,
            f"--as={limits.memory_mb * MIB}",
            f"--cpu={limits.cpu_time_s}",
            f"--fsize={limits.max_file_mb * MIB}",
            "--",
            *cmd,
        ]

    def _cwd(self, cwd: str | None) -> Path:
        if cwd is None:
            return self.folder.host_dir("workspace")
        return self.host_path(posixpath.join(self.workdir, cwd))

    def _popen(
        self, cmd: Sequence[str], phase: Phase, env: Mapping[str, str] | None, cwd: str | None
    ) -> subprocess.Popen[bytes]:
        if self._stopped:
            raise BureauSystemError(SystemErrorKind.sandbox_crashed, f"{self.id} is stopped")
        proc = subprocess.Popen(
            self._argv(cmd),
            env=self._env(phase, env),
            cwd=self._cwd(cwd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._procs = {p for p in self._procs if p.poll() is None} | {proc}
        return proc

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
        proc = self._popen(cmd, phase, env, cwd)
        done = run_captured(
            proc,
            timeout_s=timeout_s,
            kill=lambda: kill_group(proc),
            stdin=(stdin or "").encode(),
            cap_bytes=DEFAULT_CAP_BYTES,
        )
        self._procs.discard(proc)
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
        return self._popen(cmd, phase, env, cwd)

    def upload(self, src: Path, dest: str) -> None:
        self.folder.copy_in(Path(src), dest)

    def download(self, src: str, dest: Path) -> None:
        self.folder.copy_out(src, Path(dest))

    def host_path(self, inside: str) -> Path:
        root, parts = self.folder.resolve(inside)
        return root.joinpath(*parts)

    def stop(self) -> None:
        self._stopped = True
        for proc in list(self._procs):
            kill_group(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        shutil.rmtree(self.path, ignore_errors=True)
        cleanup.unregister(self)
