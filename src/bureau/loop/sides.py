"""The trainer side and the engine side of the loop, as plain objects.

`TrainerHost` owns one trainer process's `Trainer` (one rank of FSDP2, or the only one);
`EngineHost` owns a built-in inference engine and its HTTP server. The Ray actors in
`bureau.loop.actors` are thin shells around them, and `LocalTrainer` / `LocalWeights` drive them
in-process (tests, single-process runs), so every behaviour here is testable without Ray.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bureau.loop.checkpoints import read_loop_state, write_loop_state
from bureau.records import TrainBatch

if TYPE_CHECKING:
    import torch

    from bureau.algo.losses import PolicyLossConfig
    from bureau.inference.engine import EngineConfig
    from bureau.trainer.config import TrainerConfig

# Files of a Hugging Face checkpoint besides the weights, copied into exported folders.
CHECKPOINT_EXTRAS = (
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
)


def copy_checkpoint_extras(source: Path, out: Path) -> None:
    for name in CHECKPOINT_EXTRAS:
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)


class TrainerHost:
    """One trainer rank: `Trainer` on the policy checkpoint with the configured loss."""

    def __init__(
        self,
        model_dir: str,
        trainer: TrainerConfig,
        loss: PolicyLossConfig,
        *,
        seed: int,
        distributed: bool = False,
        threads: int | None = None,
    ) -> None:
        import torch

        from bureau.algo.losses import make_loss_fn, needs_reference
        from bureau.trainer.fsdp import Parallel
        from bureau.trainer.trainer import Trainer

        if threads:
            torch.set_num_threads(threads)
        self.model_dir = Path(model_dir)
        parallel = Parallel.from_env() if distributed else None
        # The KL penalty's reference is the policy the run starts from (also after a resume).
        self.trainer = Trainer.from_pretrained(
            self.model_dir,
            make_loss_fn(loss),
            trainer.model_copy(update={"seed": seed}),
            parallel=parallel,
            reference=self.model_dir if needs_reference(loss) else None,
        )

    @property
    def is_main(self) -> bool:
        return self.trainer.parallel.is_main

    def step(self, batch: TrainBatch) -> dict[str, Any]:
        metrics = self.trainer.forward_backward(batch)
        metrics |= self.trainer.optim_step()
        return metrics

    def version(self) -> int:
        return self.trainer.step

    def state_dict(self, dtype: str = "float32") -> dict[str, torch.Tensor]:
        """The full weights on the main rank (every rank must call it; others get {})."""
        import torch

        cast = None if dtype == "float32" else getattr(torch, dtype)
        state = self.trainer.export_weights(dtype=cast)
        assert isinstance(state, dict)
        return state

    def save(self, path: str, loop_state: dict[str, Any]) -> None:
        """Trainer checkpoint, then the loop's state (see `bureau.loop.checkpoints`)."""
        folder = Path(path)
        self.trainer.save(folder / "trainer")
        if self.is_main:
            write_loop_state(folder, loop_state)

    def load(self, path: str) -> dict[str, Any]:
        folder = Path(path)
        self.trainer.load(folder / "trainer")
        return read_loop_state(folder)

    def export(self, out: str, dtype: str = "float32") -> str:
        """The weights as a Hugging Face folder, floating tensors in `dtype`."""
        import torch

        cast = None if dtype == "float32" else getattr(torch, dtype)
        folder = self.trainer.export_weights(Path(out), dtype=cast)
        assert isinstance(folder, Path)
        if self.is_main:
            copy_checkpoint_extras(self.model_dir, folder)
        return str(folder)

    def close(self) -> None:
        self.trainer.close()


class EngineHost:
    """A built-in engine serving `/v1/completions` over HTTP from this process."""

    def __init__(
        self,
        model_dir: str,
        config: EngineConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        threads: int | None = None,
    ) -> None:
        import torch

        from bureau.inference.engine import InferenceEngine
        from bureau.inference.server import ServerThread

        if threads:
            torch.set_num_threads(threads)
        self.engine = InferenceEngine.from_checkpoint(Path(model_dir), config).start()
        try:
            self.server = ServerThread(self.engine, host=host, port=port).start()
        except BaseException:
            self.engine.stop()
            raise
        self.url = self.server.url

    def update_weights(self, state: Mapping[str, torch.Tensor] | str, version: int) -> float:
        """The one update cycle (`bureau.inference.control`): pause (keep), load, label tokens
        with `version`, resume; seconds taken."""
        from bureau.inference.control import InProcessControl

        source: Mapping[str, torch.Tensor] | Path = Path(state) if isinstance(state, str) else state
        return InProcessControl(self.engine).sync_update(source, version)

    def weight_version(self) -> int:
        return self.engine.weight_version

    def healthy(self) -> bool:
        return self.engine.healthy

    def stop(self) -> None:
        self.server.stop()
        self.engine.stop()


class LocalTrainer:
    """`TrainerPort` over a `TrainerHost` in this process (the blocking work runs in a thread)."""

    def __init__(self, host: TrainerHost) -> None:
        self.host = host

    async def step(self, batch: TrainBatch) -> dict[str, Any]:
        return await asyncio.to_thread(self.host.step, batch)

    async def version(self) -> int:
        return self.host.version()

    async def save(self, path: Path, loop_state: dict[str, Any]) -> None:
        await asyncio.to_thread(self.host.save, str(path), loop_state)

    async def load(self, path: Path) -> dict[str, Any]:
        return await asyncio.to_thread(self.host.load, str(path))

    async def export(self, out: Path, dtype: str = "float32") -> Path:
        return Path(await asyncio.to_thread(self.host.export, str(out), dtype))

    async def close(self) -> None:
        self.host.close()


class LocalWeights:
    """`WeightPort` from a `TrainerHost` to in-process `EngineHost`s, state dict in memory."""

    def __init__(self, trainer: TrainerHost, engines: Sequence[EngineHost], dtype: str) -> None:
        self.trainer = trainer
        self.engines = list(engines)
        self.dtype = dtype

    async def publish(self, version: int) -> dict[str, float]:
        started = time.perf_counter()
        state = await asyncio.to_thread(self.trainer.state_dict, self.dtype)
        exported = time.perf_counter() - started
        for engine in self.engines:
            await asyncio.to_thread(engine.update_weights, state, version)
        return {
            "weights/sync_s": time.perf_counter() - started,
            "weights/export_s": exported,
        }

    async def repair(self, version: int) -> int:
        behind = [e for e in self.engines if e.weight_version() < version]
        if behind:
            state = await asyncio.to_thread(self.trainer.state_dict, self.dtype)
            for engine in behind:
                await asyncio.to_thread(engine.update_weights, state, version)
        return len(behind)
