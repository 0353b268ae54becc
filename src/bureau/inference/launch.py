"""Engine servers as child processes: start, wait for `/health`, stop the whole group.

`ManagedServer` owns one server process (in its own process group, so the children an engine
forks go with it), its log file and its port. `start()` blocks until `/health` answers and
raises `engine_unavailable` with the log's tail when the process dies or the start-up timeout
passes; `stop()` is idempotent and registered with `bureau.sandbox.cleanup`. The group's leader
is a keeper (`bureau.inference.keeper`) that ends the whole group when this process dies
without stopping it (SIGKILL, a crash), so no server outlives the process that started it.
Each server gets a scratch folder of its own (`ManagedServer.scratch`, for its sockets and
temporary files) that goes with the group: the keeper removes it when it ends the group, and
`stop()` removes it too, so a killed server leaves nothing in the machine's temporary folder.
Subclasses give the command line and the environment:
`BuiltinServer` runs `bureau serve`, and `bureau.inference.vllm.VLLMServer` runs vLLM's
OpenAI-compatible server from its own virtual environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx
from pydantic import Field

from bureau.config import StrictModel
from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import EngineClient

Kind = SystemErrorKind
KEEPER = Path(__file__).with_name("keeper.py")
SCRATCH_ENV = "BUREAU_SERVER_SCRATCH"
"""Names the server's scratch folder in its environment; the keeper removes that folder."""


class ServerConfig(StrictModel):
    """What every launched engine server needs."""

    model: Path = Field(description="Local Hugging Face checkpoint folder to serve.")
    served_model_name: str | None = Field(
        default=None, description="The `model` name clients send; defaults to the folder name."
    )
    host: str = Field(default="127.0.0.1", description="Address the server listens on.")
    port: int | None = Field(default=None, description="Port; a free one when unset.")
    env: dict[str, str] = Field(
        default_factory=dict, description="More environment variables for the server."
    )
    extra_args: list[str] = Field(
        default_factory=list, description="More server arguments, passed as they are."
    )
    log_path: Path | None = Field(
        default=None,
        description="Server log file; when unset, one in the server's scratch folder, which goes "
        "when the server stops (a failed start reports the log's tail).",
    )
    startup_timeout_s: float = Field(
        default=120.0, gt=0, description="Limit for `/health` to answer after launch."
    )
    stop_timeout_s: float = Field(
        default=30.0, gt=0, description="Grace after SIGTERM before the group is killed."
    )


class ManagedServer(ABC):
    """One engine server process and its children, owned by this object."""

    kind = "engine"

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.id = f"{self.kind}-{id(self):x}"
        self.port: int | None = config.port
        self.log_path: Path | None = config.log_path
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lifeline: int | None = None
        """The write end of the keeper's stdin: closed when this process goes."""
        self.scratch: Path | None = None
        """The server's own temporary folder while it runs (see `SCRATCH_ENV`)."""

    @abstractmethod
    def command(self) -> list[str]:
        """The server's argv (`self.port` is set when this is called)."""

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.config.env)
        return env

    def preflight(self) -> None:
        """Checks before launching; raise with a clear message."""
        if not (self.config.model / "config.json").is_file():
            raise FileNotFoundError(f"{self.config.model} is not a Hugging Face checkpoint folder")

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server has no port until start()")
        return f"http://{self.config.host}:{self.port}"

    @property
    def served_model_name(self) -> str:
        return self.config.served_model_name or self.config.model.name

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def client(self, **kwargs: Any) -> EngineClient:
        """An `EngineClient` for this server (keyword arguments go to its constructor)."""
        return EngineClient(self.base_url, self.served_model_name, **kwargs)

    def start(self) -> Self:
        """Launch the server and wait until it answers `/health`; returns self."""
        if self._proc is not None:
            raise RuntimeError(f"{self.id} was already started")
        cfg = self.config
        self.preflight()
        self.port = free_port(cfg.host) if cfg.port is None else check_port(cfg.host, cfg.port)
        self.scratch = Path(tempfile.mkdtemp(prefix=f"bureau-{self.kind}-"))
        if self.log_path is None:
            self.log_path = self.scratch / f"{self.kind}-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        started = time.perf_counter()
        lifeline_in, self._lifeline = os.pipe()  # neither end is inherited by other children
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(KEEPER), *self.command()],
                stdin=lifeline_in,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**self.environment(), SCRATCH_ENV: str(self.scratch)},
                start_new_session=True,
            )
        finally:
            os.close(lifeline_in)
        self.id = f"{self.kind}-{self._proc.pid}"
        from bureau.sandbox import cleanup

        cleanup.register(self)
        try:
            self._wait_healthy(started + cfg.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - started
        return self

    def _wait_healthy(self, deadline: float) -> None:
        assert self._proc is not None
        with httpx.Client(base_url=self.base_url, timeout=5.0) as http:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise BureauSystemError(
                        Kind.engine_unavailable,
                        f"{self.kind} exited with code {code} during start-up; log "
                        f"{self.log_path}:\n{self.log_tail()}",
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if http.get("/health").status_code == 200:
                        return
                if time.perf_counter() > deadline:
                    raise BureauSystemError(
                        Kind.engine_unavailable,
                        f"{self.kind} did not answer /health within "
                        f"{self.config.startup_timeout_s:g} s; log {self.log_path}:\n"
                        + self.log_tail(),
                    )
                time.sleep(0.25)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, max_chars: int = 4000) -> str:
        """The end of the server's log (where engines write their errors)."""
        if self.log_path is None:
            return ""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - max_chars))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Terminate the process group, kill it after `stop_timeout_s`; safe to call again."""
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=self.config.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
            # The server may be gone while children it forked are not.
            _signal_group(proc.pid, signal.SIGKILL)
            _wait_group_gone(proc.pid, timeout_s=5.0)
            self._proc = None
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        from bureau.sandbox import cleanup

        cleanup.unregister(self)

    def __enter__(self) -> Self:
        return self.start() if self._proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class BuiltinServerConfig(ServerConfig):
    """`bureau serve` on a local checkpoint."""

    python: Path | None = Field(
        default=None, description="Interpreter with bureau[train]; this one when unset."
    )
    dtype: str = Field(default="float32", description="Weights dtype.")


class BuiltinServer(ManagedServer):
    kind = "builtin-engine"
    config: BuiltinServerConfig

    def __init__(self, config: BuiltinServerConfig) -> None:
        super().__init__(config)

    def command(self) -> list[str]:
        cfg = self.config
        return [
            str(cfg.python or sys.executable),
            "-m",
            "bureau.cli.main",
            "serve",
            "--model",
            str(cfg.model),
            "--served-model-name",
            self.served_model_name,
            "--host",
            cfg.host,
            "--port",
            str(self.port),
            "--dtype",
            cfg.dtype,
            *cfg.extra_args,
        ]


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Give killed children a moment to go, so their memory is free when stop() returns."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_port(host: str, port: int) -> int:
    """A port another server already holds would answer our `/health` checks."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise BureauSystemError(
                Kind.engine_unavailable, f"port {port} on {host} is not free: {exc}"
            ) from exc
    return port
