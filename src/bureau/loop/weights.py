"""Weight ports that need no Ray: engines updated over HTTP, and engines the loop leaves alone.

`HTTPWeights` is the port for vLLM engines (the actors only run the servers) and for `url`
engines that offer weight routes: the trainer writes a safetensors folder (`DiskTransport`) and
the driver runs each engine's `WeightSync` cycle on it (`VLLMControl` for vLLM's routes,
`EngineControl` for `bureau serve`), engines in parallel. An engine that cannot be reached
(restarting) is missed, not an error; `repair` reads every engine's `/weight_info` and brings the
ones behind to the current version. `NoWeights` is the port for `url` engines without weight
routes: nothing is pushed, and the engines serve version 0 for the whole run.

Every port's `publish` reports `weights/engines_updated`: the controller tells the rollout
workers the new version only when an engine holds it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.control import WeightSync
from bureau.inference.transport.disk import DiskTransport
from bureau.loop.ports import TrainerPort

Control = Literal["vllm", "builtin"]
UNREACHABLE = (SystemErrorKind.engine_unavailable, SystemErrorKind.engine_timeout)


def control_factory(kind: Control, timeout_s: float = 300.0) -> Callable[[str], WeightSync]:
    """A function from an engine's base URL to its `WeightSync` client."""
    from bureau.inference.control import EngineControl
    from bureau.inference.vllm import VLLMControl

    cls = VLLMControl if kind == "vllm" else EngineControl
    return lambda url: cls(url, timeout_s=timeout_s)


class HTTPWeights:
    """`WeightPort` from the trainer to engines at `urls`, through a folder on disk."""

    def __init__(
        self,
        trainer: TrainerPort,
        urls: Sequence[str],
        control: Callable[[str], WeightSync],
        transport: DiskTransport,
        *,
        dtype: str = "float32",
    ) -> None:
        self.trainer = trainer
        self.urls = list(urls)
        self.control = control
        self.transport = transport
        self.dtype = dtype
        """The dtype the folders are written in (the engines')."""

    async def _update(self, url: str, folder: Path, version: int) -> float | None:
        """The seconds of one engine's cycle; None when the engine cannot be reached."""
        control = self.control(url)
        try:
            return await control.update_weights(folder, version)
        except BureauSystemError as exc:
            if exc.kind in UNREACHABLE:
                return None
            raise
        finally:
            await control.aclose()

    async def _push(self, urls: Sequence[str], version: int) -> dict[str, float]:
        started = time.perf_counter()
        folder = self.transport.folder(version)
        if not (folder / "config.json").is_file():
            folder = await self.trainer.export(folder, self.dtype)
        exported = time.perf_counter() - started
        cycles = await asyncio.gather(*(self._update(u, folder, version) for u in urls))
        updated = [c for c in cycles if c is not None]
        if len(updated) == len(urls):
            self.transport.prune(version)
        return {
            "weights/sync_s": time.perf_counter() - started,
            "weights/export_s": exported,
            "weights/engine_update_s": max(updated, default=0.0),
            "weights/engines_updated": float(len(updated)),
            "weights/missed": float(len(urls) - len(updated)),
        }

    async def publish(self, version: int) -> dict[str, float]:
        return await self._push(self.urls, version)

    async def versions(self) -> list[int | None]:
        """The version each engine reports: -1 when it has none yet, None when it cannot be
        reached."""

        async def one(url: str) -> int | None:
            control = self.control(url)
            try:
                held = await control.weight_version()
            except BureauSystemError:
                return None
            else:
                return -1 if held is None else held
            finally:
                await control.aclose()

        return list(await asyncio.gather(*(one(u) for u in self.urls)))

    async def repair(self, version: int) -> int:
        if version == 0:
            return 0
        behind = [
            url
            for url, held in zip(self.urls, await self.versions(), strict=True)
            if held is not None and held < version
        ]
        if not behind:
            return 0
        return int((await self._push(behind, version))["weights/engines_updated"])


class NoWeights:
    """`WeightPort` for engines the loop does not update (`url` engines without weight routes)."""

    async def publish(self, version: int) -> dict[str, float]:
        return {"weights/sync_s": 0.0, "weights/engines_updated": 0.0}

    async def repair(self, version: int) -> int:
        return 0
