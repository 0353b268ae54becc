"""HTTPWeights (vLLM and `url` engines): a folder per version, each engine's own update cycle,
missed engines repaired later, old folders removed. Stand-in engines and trainer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.control import WeightSync
from bureau.inference.transport.disk import DiskTransport
from bureau.loop.ports import TrainerPort
from bureau.loop.weights import HTTPWeights, NoWeights


class _Trainer:
    def __init__(self) -> None:
        self.exports: list[Path] = []

    async def export(self, out: Path, dtype: str = "float32") -> Path:
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"weights")
        self.exports.append(out)
        return out


class _Engine:
    """An engine's `WeightSync` client as far as the port uses it."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.loaded: list[tuple[Path, int]] = []
        self.failure: BureauSystemError | None = None
        self.closed = 0

    async def update_weights(self, weights: Any, version: int) -> float:
        if self.failure is not None:
            raise self.failure
        assert (Path(weights) / "model.safetensors").is_file()
        self.loaded.append((Path(weights), version))
        self.version = version
        return 0.01

    async def weight_version(self) -> int | None:
        if self.failure is not None:
            raise self.failure
        return self.version

    async def aclose(self) -> None:
        self.closed += 1


def _port(tmp_path: Path, n: int) -> tuple[HTTPWeights, _Trainer, dict[str, _Engine]]:
    engines = {f"http://e{i}": _Engine() for i in range(n)}
    trainer = _Trainer()
    port = HTTPWeights(
        cast("TrainerPort", trainer),
        list(engines),
        lambda url: cast("WeightSync", engines[url]),
        DiskTransport(tmp_path / "sync"),
    )
    return port, trainer, engines


def test_each_version_is_exported_once_loaded_everywhere_and_the_old_folder_removed(
    tmp_path: Path,
) -> None:
    port, trainer, engines = _port(tmp_path, 2)
    first = asyncio.run(port.publish(1))
    second = asyncio.run(port.publish(2))
    assert first["weights/engines_updated"] == second["weights/engines_updated"] == 2
    assert [p.name for p in trainer.exports] == ["step-1", "step-2"]
    for engine in engines.values():
        assert [(p.name, v) for p, v in engine.loaded] == [("step-1", 1), ("step-2", 2)]
        assert engine.closed == 2  # one client per cycle, closed after it
    assert [p.name for p in (tmp_path / "sync").iterdir()] == ["step-2"]


def test_an_unreachable_engine_is_missed_then_repaired_from_the_same_folder(
    tmp_path: Path,
) -> None:
    port, trainer, engines = _port(tmp_path, 2)
    asyncio.run(port.publish(1))
    away = engines["http://e1"]
    away.failure = BureauSystemError(SystemErrorKind.engine_unavailable, "restarting")
    result = asyncio.run(port.publish(2))
    assert (result["weights/engines_updated"], result["weights/missed"]) == (1, 1)
    assert sorted(p.name for p in (tmp_path / "sync").iterdir()) == ["step-1", "step-2"]
    assert asyncio.run(port.repair(2)) == 0  # still away: nothing to do yet
    away.failure = None
    away.version = 0  # back, on the initial weights (the vLLM actor labels them 0)
    assert asyncio.run(port.repair(2)) == 1
    assert away.loaded[-1] == (tmp_path / "sync" / "step-2", 2)
    assert len(trainer.exports) == 2  # the repair reused the folder
    assert [p.name for p in (tmp_path / "sync").iterdir()] == ["step-2"]
    assert asyncio.run(port.repair(2)) == 0


def test_an_engine_with_no_version_yet_counts_as_behind(tmp_path: Path) -> None:
    port, _trainer, engines = _port(tmp_path, 1)
    assert asyncio.run(port.repair(3)) == 1
    assert engines["http://e0"].version == 3


def test_a_failed_load_is_raised(tmp_path: Path) -> None:
    port, _trainer, engines = _port(tmp_path, 2)
    engines["http://e0"].failure = BureauSystemError(SystemErrorKind.engine_error, "bad weights")
    with pytest.raises(BureauSystemError, match="bad weights"):
        asyncio.run(port.publish(1))


def test_engines_the_loop_leaves_alone_are_never_updated() -> None:
    result = asyncio.run(NoWeights().publish(4))
    assert result["weights/engines_updated"] == 0
    assert asyncio.run(NoWeights().repair(4)) == 0


def test_the_disk_transport_keeps_the_newest_folders(tmp_path: Path) -> None:
    disk = DiskTransport(tmp_path, keep=2)
    for version in (1, 2, 3, 5):
        disk.folder(version).mkdir()
    (tmp_path / "notes").mkdir()
    assert disk.versions() == [1, 2, 3, 5]
    assert disk.prune(5) == [1, 2]
    assert disk.versions() == [3, 5] and (tmp_path / "notes").is_dir()
    with pytest.raises(ValueError, match="at least 1"):
        DiskTransport(tmp_path, keep=0)
