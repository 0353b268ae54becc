"""The weight-transfer group on gloo over 127.0.0.1: the sender runs in the test process, the
receivers are spawned processes that save what they receive (or the error they got)."""

from __future__ import annotations

import multiprocessing as mp
import socket
from pathlib import Path

import pytest
import torch

from bureau.inference.transport.broadcast import Header, TensorSpec, WeightGroup, WeightGroupError

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _receiver(
    port: int, rank: int, world: int, transfers: int, out: str, imported: mp.synchronize.Event
) -> None:
    """Join, save `transfers` transfers (then one more attempt when `transfers` is negative:
    its error is saved); exit code 0 when everything went as asked."""
    imported.set()  # torch is imported: the sender's short timeouts start counting from here
    folder = Path(out)
    try:
        group = WeightGroup.create(HOST, port, rank, world, "gloo", timeout_s=5.0)
    except WeightGroupError as exc:
        (folder / f"error-{rank}.txt").write_text(str(exc))
        return
    try:
        for index in range(abs(transfers)):
            state, version = group.receive()
            saved = {name: t.clone() for name, t in state.items()}
            torch.save({"state": saved, "version": version}, folder / f"{rank}-{index}.pt")
        if transfers < 0:
            try:
                group.receive()
            except WeightGroupError as exc:
                (folder / f"error-{rank}.txt").write_text(str(exc))
    finally:
        group.close()


def _state(step: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    weight = torch.randn(64, 33, generator=g)
    weight[0, 0], weight[0, 1] = float("nan"), -0.0  # bits, not values, must arrive
    return {
        "embed.weight": weight,
        "norm.weight": torch.randn(33, generator=g).to(torch.bfloat16),
        "proj.weight": torch.randn(7, 5, generator=g).t(),  # not contiguous
        "positions": torch.arange(11, dtype=torch.int64) * step,
        "scale": torch.tensor(0.5 * step),
        "empty": torch.zeros(0, 3),
        "mask": torch.rand(9, generator=g) > 0.5,
    }


def _assert_bit_identical(got: dict[str, torch.Tensor], sent: dict[str, torch.Tensor]) -> None:
    assert list(got) == list(sent)
    for name, tensor in sent.items():
        assert got[name].dtype == tensor.dtype, name
        assert got[name].shape == tensor.shape, name
        as_bytes = tensor.contiguous().reshape(-1).view(torch.uint8)
        assert torch.equal(got[name].reshape(-1).view(torch.uint8), as_bytes), name


def _spawn(port: int, world: int, plans: dict[int, int], out: Path) -> list[mp.process.BaseProcess]:
    ctx = mp.get_context("spawn")
    procs: list[mp.process.BaseProcess] = []
    started = []
    for rank, transfers in plans.items():
        imported = ctx.Event()
        proc = ctx.Process(
            target=_receiver, args=(port, rank, world, transfers, str(out), imported), daemon=True
        )
        proc.start()
        procs.append(proc)
        started.append(imported)
    for rank, imported in zip(plans, started, strict=True):
        assert imported.wait(60), f"receiver {rank} did not start"
    return procs


def _join(procs: list[mp.process.BaseProcess]) -> None:
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
        assert proc.exitcode == 0


def test_two_transfers_reach_every_receiver_bit_for_bit_then_a_lost_receiver_is_named(
    tmp_path: Path,
) -> None:
    port = _free_port()
    # Rank 2 leaves after two transfers; rank 1 waits for a third that never comes.
    procs = _spawn(port, 3, {1: -2, 2: 2}, tmp_path)
    group = WeightGroup.create(HOST, port, 0, 3, "gloo", timeout_s=3.0)
    try:
        first, second = _state(1), _state(2)
        sent = group.send(first, version=1)
        assert sent >= sum(t.numel() * t.element_size() for t in first.values())
        group.send(second, version=2, bucket_bytes=0)  # one collective per tensor
        with pytest.raises(WeightGroupError, match=r"transfer #3 \(version 3\): rank\(s\) \[2\]"):
            group.send(second, version=3)
    finally:
        group.close()
        group.close()  # idempotent
    _join(procs)
    for rank in (1, 2):
        for index, (state, version) in enumerate([(first, 1), (second, 2)]):
            got = torch.load(tmp_path / f"{rank}-{index}.pt")
            assert got["version"] == version
            _assert_bit_identical(got["state"], state)
    assert "the sender (rank 0)" in (tmp_path / "error-1.txt").read_text()
    assert not (tmp_path / "error-2.txt").exists()
    with pytest.raises(WeightGroupError, match="closed"):
        group.send(first, version=4)


def test_a_receiver_that_never_joins_fails_the_sender_with_a_timeout_naming_it(
    tmp_path: Path,
) -> None:
    port = _free_port()
    procs = _spawn(port, 3, {1: 1}, tmp_path)
    with pytest.raises(
        WeightGroupError, match=r"join: rank\(s\) \[2\] did not check in within 2 s"
    ):
        WeightGroup.create(HOST, port, 0, 3, "gloo", timeout_s=2.0)
    _join(procs)
    assert (tmp_path / "error-1.txt").exists()


def test_header_lays_tensors_out_aligned_in_buckets_and_round_trips() -> None:
    state = {
        "a": torch.zeros(3, dtype=torch.bfloat16),  # 6 bytes
        "b": torch.zeros(2, 2, dtype=torch.int64),  # 32 bytes
        "c": torch.zeros(40, dtype=torch.uint8),  # 40 bytes: does not fit in a 64-byte bucket
        "d": torch.zeros(()),
    }
    header = Header.plan(state, version=7, bucket_bytes=64)
    assert header.buckets == (48, 52)  # d starts at 48, the first multiple of ALIGN after c
    assert header.tensors == (
        TensorSpec("a", "bfloat16", (3,), 0, 0, 6),
        TensorSpec("b", "int64", (2, 2), 0, 16, 32),
        TensorSpec("c", "uint8", (40,), 1, 0, 40),
        TensorSpec("d", "float32", (), 1, 48, 4),
    )
    assert Header.decode(header.encode()) == header
    per_tensor = Header.plan(state, version=7, bucket_bytes=0)
    assert per_tensor.buckets == (6, 32, 40, 4)
    assert [s.offset for s in per_tensor.tensors] == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x80\x04pickle", "not a weight transfer header"),
        (b'{"version": 1, "buckets": [4]}', "not a weight transfer header"),
        (b'{"version":1,"buckets":[4],"tensors":[["x","Tensor",[1],0,0,4]]}', "unknown dtype"),
        (b'{"version":1,"buckets":[4],"tensors":[["x","float32",[2],0,0,8]]}', "outside"),
        (b'{"version":1,"buckets":[4],"tensors":[["x","float32",[1],1,0,4]]}', "outside"),
    ],
)
def test_header_decode_refuses_what_encode_did_not_write(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Header.decode(data)


def test_create_refuses_bad_arguments_before_touching_the_network() -> None:
    with pytest.raises(ValueError, match="backend"):
        WeightGroup.create(HOST, 1, 0, 2, "mpi")  # type: ignore[arg-type]  # the refusal is tested
    with pytest.raises(ValueError, match="sender and receivers"):
        WeightGroup.create(HOST, 1, 0, 1, "gloo")
