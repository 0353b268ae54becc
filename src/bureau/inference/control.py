"""Pushing new weights into a serving engine: one Protocol, one update cycle.

`WeightSync` is what the loop needs from any engine it updates: pause, resume, an in-place
weight update that returns the seconds it took, the version the engine serves, and close. Every
engine implements it with the same cycle (`UpdateCycle.update_weights`):

    check the source (before the engine is touched) -> pause(keep) -> load -> resume

`keep` freezes in-flight requests, which then continue on the new weights (recomputed), so no
sample is lost and no KV state from the old weights is reused. The engine is resumed even when
the load fails, and the load's error is the one raised. Only the load differs:
`InProcessControl` hands a folder or a state dict to an `InferenceEngine` in this process (a
Ray engine actor, tests); `EngineControl` (the built-in engine as a server, `bureau serve`)
posts the folder to `/update_weights`; `bureau.inference.vllm.VLLMControl` asks vLLM to
`reload_weights` and then sets the version (also a `url` engine that offers vLLM's routes).

A state dict cannot travel over the HTTP endpoints; those clients refuse one with a clear
error. How the weights get to an engine (object store, a folder on disk, a gloo/nccl
broadcast) is the transport's business (`bureau.inference.broadcast`, the loop's weight ports).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from bureau.errors import SystemErrorKind
from bureau.inference.client import EngineClient, EngineEndpoint

if TYPE_CHECKING:
    import torch

Kind = SystemErrorKind

PauseMode = Literal["keep", "abort", "wait"]
"""`keep`: in-flight requests freeze, then continue after resume; `abort`: they end now with
finish_reason `abort`; `wait`: they finish first, on the current weights."""
PAUSE_MODES: tuple[PauseMode, ...] = ("keep", "abort", "wait")


@runtime_checkable
class WeightSync(Protocol):
    """An engine whose weights can be replaced in place while it serves."""

    async def pause(self, mode: PauseMode = "keep") -> None:
        """Stop scheduling until `resume()`; what happens to in-flight requests is `mode`."""
        ...

    async def resume(self) -> None: ...

    async def update_weights(
        self, weights: Path | Mapping[str, torch.Tensor], version: int
    ) -> float:
        """Pause (keep), load `weights` as `version`, resume (also on failure); the seconds.

        `weights` is a folder of safetensors files or a state dict, where the engine takes one.
        """
        ...

    async def weight_version(self) -> int | None:
        """The version the engine serves, or None before one was set."""
        ...

    async def aclose(self) -> None: ...


Source = Path | Mapping[str, "torch.Tensor"]


class UpdateCycle(ABC):
    """The one update cycle of every `WeightSync`; subclasses give pause, resume and load."""

    @abstractmethod
    async def pause(self, mode: PauseMode = "keep") -> None: ...

    @abstractmethod
    async def resume(self) -> None: ...

    def check_source(self, weights: Source) -> Source:
        """What to load, checked before the engine is touched; raise if it cannot load."""
        return weights

    @abstractmethod
    async def load(self, source: Any, version: int) -> None:
        """Load `source` (what `check_source` returned) into the paused engine and label later
        tokens with `version`."""

    async def update_weights(self, weights: Source, version: int) -> float:
        """Check, pause (keep), load, resume; returns the cycle's seconds.

        A source the engine could not load is refused before the engine is touched. A load
        that fails on the engine side may leave the model partly replaced: push a good
        checkpoint next, or restart the engine.
        """
        source = self.check_source(weights)
        started = time.perf_counter()
        await self.pause("keep")
        try:
            await self.load(source, version)
        except BaseException:
            # The load's error is the one to report; a failing resume only adds noise.
            with contextlib.suppress(Exception):
                await self.resume()
            raise
        await self.resume()
        return time.perf_counter() - started


class ServingEngine(Protocol):
    """What `InProcessControl` needs of an engine (`bureau.inference.engine.InferenceEngine`)."""

    @property
    def weight_version(self) -> int: ...

    def pause(self, mode: PauseMode = "keep") -> int: ...

    def resume(self) -> None: ...

    def update_weights(self, source: Source, version: int) -> None: ...


class InProcessControl(UpdateCycle, WeightSync):
    """`WeightSync` for an engine in this process: a folder or a state dict, loaded directly.

    The engine checks names, shapes and dtypes before it touches the model, so a bad source
    raises (`ValueError`, `FileNotFoundError`) and the old weights keep serving. `sync_update`
    runs the same cycle from code without an event loop (a Ray engine actor's method).
    """

    def __init__(self, engine: ServingEngine) -> None:
        self.engine = engine

    async def pause(self, mode: PauseMode = "keep") -> None:
        self.engine.pause(mode)

    async def resume(self) -> None:
        self.engine.resume()

    async def load(self, source: Any, version: int) -> None:
        self.engine.update_weights(source, version)

    async def weight_version(self) -> int | None:
        return self.engine.weight_version

    async def aclose(self) -> None:
        pass

    def sync_update(self, weights: Source, version: int) -> float:
        """`update_weights` for a caller that has no running event loop."""
        return asyncio.run(self.update_weights(weights, version))


class HTTPWeightSync(EngineEndpoint, UpdateCycle, WeightSync):
    """`WeightSync` over an engine's HTTP control endpoints; subclasses give the load step.

    It names the Protocol as a base so that the type checker holds every client to it.

    Failures raise `BureauSystemError`: `engine_timeout`, `engine_unavailable` (unreachable or
    not serving) or `engine_error` (an HTTP error or an unexpected answer).
    """

    async def pause(self, mode: PauseMode = "keep") -> None:
        if mode not in PAUSE_MODES:
            raise ValueError(f"mode must be one of {', '.join(PAUSE_MODES)}, not {mode!r}")
        await self._request("POST", "/pause", params={"mode": mode})

    async def resume(self) -> None:
        await self._request("POST", "/resume")

    async def is_paused(self) -> bool:
        return bool((await self._request("GET", "/is_paused")).get("is_paused"))

    def check_source(self, weights: Source) -> Path:
        """The folder to load; refuses a state dict, which HTTP cannot carry."""
        if isinstance(weights, Mapping):
            raise TypeError(
                f"{self.base_url}: a state dict cannot be pushed over HTTP; save it as "
                "safetensors and pass the folder, or update an in-process engine directly"
            )
        return Path(weights).resolve()

    @abstractmethod
    async def load(self, source: Any, version: int) -> None:
        """Load the folder `source` into the paused engine; label later tokens `version`."""


class EngineControl(HTTPWeightSync):
    """The control endpoints of one `bureau serve` engine (`bureau.inference.server`).

    The engine checks the folder (names, shapes, dtypes) before touching the model, so a bad
    folder raises `engine_error` and the old weights keep serving.
    """

    async def load(self, source: Any, version: int) -> None:
        await self._request(
            "POST", "/update_weights", {"weights_path": str(source), "version": version}
        )


async def push_weights(
    control: WeightSync,
    weights: Path | Mapping[str, torch.Tensor],
    version: int,
    clients: Iterable[EngineClient],
) -> float:
    """`control.update_weights`, then label later samples of `clients` with `version`.

    vLLM does not report versions in completions, so `EngineClient` uses its `known_version`;
    it is set only after the engine resumed, so a sample that straddles the update keeps the
    older label (staleness over-, never under-estimated). Returns the cycle's seconds.
    """
    seconds = await control.update_weights(weights, version)
    for client in clients:
        client.known_version = version
    return seconds
