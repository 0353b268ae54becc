"""Torch's threads sized to the cores other processes leave free (`bureau.trainer.threads`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bureau.trainer.threads import CoreShare, CpuSample, cores_left, cpu_sample, threads_for


def test_the_cores_left_are_the_cpus_less_what_others_kept_busy() -> None:
    # 2 CPUs, 200 jiffies of both over the window: 150 busy, 50 of them this process's own.
    # Others kept (150 - 50) / 200 * 2 = 1.0 core busy, so 1 of the 2 is left.
    before, after = CpuSample(0, 0, 0), CpuSample(150, 200, 50)
    assert cores_left(before, after, cpus=2, online=2) == pytest.approx(1.0)
    # This process alone kept both busy: nothing of others, both cores left.
    assert cores_left(before, CpuSample(200, 200, 200), cpus=2, online=2) == 2.0
    # Others kept 3 of 4 online CPUs busy; this process may run on 2 of them: none left.
    assert cores_left(before, CpuSample(300, 400, 0), cpus=2, online=4) == 0.0
    assert cores_left(after, after, cpus=2, online=2) == 2.0  # no time passed


@pytest.mark.parametrize(
    ("free", "threads"), [(2.0, 2), (1.8, 2), (1.7, 1), (1.0, 1), (0.2, 1), (0.0, 1), (5.0, 2)]
)
def test_threads_round_a_mostly_taken_core_down_and_keep_one(free: float, threads: int) -> None:
    assert threads_for(free, cpus=2) == threads


def _proc(root: Path, busy: int, idle: int, own: int) -> Path:
    """A fake /proc: the aggregate cpu line and this process's utime and stime."""
    (root / "self").mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0\n")
    fields = ["S", *["0"] * 10, str(own), "0"]  # utime is the 12th field after the comm
    (root / "self" / "stat").write_text(f"42 (python (x)) {' '.join(fields)} 0 0\n")
    return root


def test_a_sample_reads_proc(tmp_path: Path) -> None:
    sample = cpu_sample(_proc(tmp_path, busy=30, idle=70, own=12))
    assert sample == CpuSample(busy=30, total=100, own=12)
    assert cpu_sample(tmp_path / "missing") is None


def test_core_share_follows_the_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    heard: list[str] = []
    share = CoreShare(every_s=0.0, log=heard.append, proc=_proc(tmp_path, 0, 0, 0))
    monkeypatch.setattr(CoreShare, "cpus", property(lambda self: 2))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    threads = torch.get_num_threads()
    try:
        _proc(tmp_path, busy=0, idle=0, own=0)
        share._last = cpu_sample(tmp_path)
        _proc(tmp_path, busy=100, idle=100, own=0)  # others kept one of two cores busy
        assert share.update() == 1 and torch.get_num_threads() == 1
        _proc(tmp_path, busy=110, idle=290, own=10)  # then only this process ran
        assert share.update() == 2 and torch.get_num_threads() == 2
        assert [t for _, t in share.changes] == [1, 2] and len(heard) == 2
        assert "torch threads: 1" in heard[0]
    finally:
        torch.set_num_threads(threads)


def test_without_proc_nothing_changes(tmp_path: Path) -> None:
    share = CoreShare(proc=tmp_path / "missing")
    assert share.start(window_s=0.0) is None and share.update() is None
