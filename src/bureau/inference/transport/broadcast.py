"""Weights by collective broadcast: one sender (trainer rank 0) to N receivers (engines).

The processes of a run are not one torch.distributed world: the trainer ranks may already share
an FSDP2 default group and the engines share none, so `new_group` cannot be used. A
`WeightGroup` is a group of its own: a `TCPStore` hosted by the sender and a process group
object built directly on it (`ProcessGroupGloo` on CPU, `ProcessGroupNCCL` on GPUs), which
neither needs nor touches a default group. Sender is rank 0, receivers are ranks 1..N.

One transfer is a JSON `Header` (version; each tensor's name, dtype, shape and where its bytes
lie), broadcast as bytes after its length, then the tensors' bytes packed into flat uint8
buckets: one collective per bucket whatever the dtypes, and bit-exact because bytes move, not
values. Before each transfer every receiver checks in through the store, so a receiver that is
gone is named by rank instead of surfacing as a collective that hangs until its timeout.

A group has a fixed membership: a receiver that restarts cannot re-enter it. Everyone leaves
(`close`) and a new group is formed on a fresh port (`bureau.loop.actors.ports.BroadcastWeights`
does this in `repair`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Protocol, cast

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist

Backend = Literal["gloo", "nccl"]
BACKENDS: tuple[Backend, ...] = ("gloo", "nccl")
# Byte offsets inside a bucket are multiples of this, so that a slice of the uint8 bucket can be
# viewed as any dtype (`Tensor.view(dtype)` needs the offset to be a multiple of the item size).
ALIGN = 16
# Large enough that a 1 GB model is a handful of collectives, small enough that the sender's
# packing copy stays a small fraction of the weights.
BUCKET_BYTES = 256 * 2**20


class Collective(Protocol):
    """What a group uses of `ProcessGroupGloo` / `ProcessGroupNCCL`. torch 2.13's stubs declare
    the collectives on `ProcessGroup` only, though its backends have them at runtime."""

    def broadcast(self, tensors: list[torch.Tensor], opts: dist.BroadcastOptions) -> dist.Work: ...

    def abort(self) -> None: ...


class WeightGroupError(RuntimeError):
    """A weight transfer failed: which group, which step, and which peer when it is known."""


@dataclass(frozen=True)
class TensorSpec:
    """Where one tensor's bytes lie in a transfer."""

    name: str
    dtype: str
    """torch dtype name without the `torch.` prefix, e.g. `bfloat16`."""
    shape: tuple[int, ...]
    bucket: int
    offset: int
    """Bytes into the bucket (a multiple of `ALIGN`)."""
    nbytes: int


@dataclass(frozen=True)
class Header:
    """What receivers need to allocate a transfer before its bytes arrive."""

    version: int
    buckets: tuple[int, ...]
    """Byte size of each bucket, in broadcast order."""
    tensors: tuple[TensorSpec, ...]

    @classmethod
    def plan(
        cls, state: Mapping[str, torch.Tensor], version: int, bucket_bytes: int = BUCKET_BYTES
    ) -> Header:
        """Lay `state` out in buckets of at most `bucket_bytes` (a bigger tensor gets one of
        its own); `bucket_bytes=0` puts every tensor in its own bucket (one collective each)."""
        buckets: list[int] = []
        specs: list[TensorSpec] = []
        for name, tensor in state.items():
            nbytes = tensor.numel() * tensor.element_size()
            offset = _aligned(buckets[-1]) if buckets else 0
            if not buckets or bucket_bytes <= 0 or offset + nbytes > bucket_bytes:
                buckets.append(0)
                offset = 0
            buckets[-1] = offset + nbytes
            dtype = str(tensor.dtype).removeprefix("torch.")
            specs.append(
                TensorSpec(name, dtype, tuple(tensor.shape), len(buckets) - 1, offset, nbytes)
            )
        return cls(version=version, buckets=tuple(buckets), tensors=tuple(specs))

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": self.version,
                "buckets": list(self.buckets),
                "tensors": [
                    [s.name, s.dtype, list(s.shape), s.bucket, s.offset, s.nbytes]
                    for s in self.tensors
                ],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Header:
        """The header `encode` wrote; `ValueError` for anything else (or an unknown dtype)."""
        try:
            raw = json.loads(data)
            header = cls(
                version=int(raw["version"]),
                buckets=tuple(int(b) for b in raw["buckets"]),
                tensors=tuple(
                    TensorSpec(str(n), str(d), tuple(int(x) for x in s), int(b), int(o), int(nb))
                    for n, d, s, b, o, nb in raw["tensors"]
                ),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a weight transfer header: {exc}") from exc
        for spec in header.tensors:
            dtype_of(spec.dtype)
            if not 0 <= spec.bucket < len(header.buckets) or (
                spec.offset + spec.nbytes > header.buckets[spec.bucket]
            ):
                raise ValueError(f"tensor {spec.name} lies outside its bucket")
        return header


def dtype_of(name: str) -> torch.dtype:
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as a flat uint8 tensor (a view when it is already contiguous)."""
    import torch

    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


class WeightGroup:
    """One member of a weight-transfer group; build it with `create`."""

    def __init__(
        self,
        *,
        store: dist.Store,
        group: Collective,
        rank: int,
        world_size: int,
        backend: Backend,
        device: torch.device,
        timeout_s: float,
        where: str,
    ) -> None:
        self._store: dist.Store | None = store
        self._group: Collective | None = group
        self.rank, self.world_size = rank, world_size
        self.backend, self.device = backend, device
        self.timeout_s = timeout_s
        self.where = where
        self.transfers = 0

    @classmethod
    def create(
        cls,
        host: str,
        port: int,
        rank: int,
        world_size: int,
        backend: Backend = "gloo",
        timeout_s: float = 300.0,
        device: torch.device | None = None,
    ) -> WeightGroup:
        """Join the group at `host:port` (rank 0 hosts the store there); returns once all
        `world_size` members have joined, or raises `WeightGroupError` naming those missing.

        `device`: where transfers land (default: CPU for gloo, the current CUDA device for
        nccl). `timeout_s` bounds every wait: joining, each check-in and each collective.
        """
        import torch
        import torch.distributed as dist
        from torch.distributed.distributed_c10d import GroupName

        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        if not 0 <= rank < world_size or world_size < 2:
            raise ValueError(f"rank {rank} of {world_size}: a group needs a sender and receivers")
        if backend == "nccl" and not (dist.is_nccl_available() and torch.cuda.is_available()):
            raise WeightGroupError("the nccl backend needs CUDA and an NCCL build of torch")
        if device is None:
            device = (
                torch.device("cuda", torch.cuda.current_device())
                if backend == "nccl"
                else torch.device("cpu")
            )
        where = f"weight group {host}:{port} ({backend}, rank {rank} of {world_size})"
        timeout = timedelta(seconds=timeout_s)
        try:
            store = dist.TCPStore(
                host, port, world_size, rank == 0, timeout, wait_for_workers=False
            )
        except (RuntimeError, OSError) as exc:
            who = "host the store" if rank == 0 else "reach the sender's store (rank 0)"
            raise WeightGroupError(f"{where}: cannot {who} within {timeout_s:g} s: {exc}") from exc
        store.set(f"join/{rank}", "1")
        _wait_for(store, [f"join/{r}" for r in range(world_size)], timeout, where, "join")
        group: object
        try:
            pg_store = dist.PrefixStore("pg", store)
            if backend == "gloo":
                group = dist.ProcessGroupGloo(pg_store, rank, world_size, timeout)
            else:
                options = dist.ProcessGroupNCCL.Options()
                options._timeout = timeout
                # Names this communicator apart from the trainer's own in NCCL's and torch's logs.
                options.group_name = GroupName(f"bureau-weights-{host}:{port}")
                group = dist.ProcessGroupNCCL(pg_store, rank, world_size, options)
            # As torch does for the groups it builds: rank 0 hands out the collectives' starting
            # sequence number, which torch's desync and timeout reports count from.
            group._set_sequence_number_for_group()
        except RuntimeError as exc:
            raise WeightGroupError(f"{where}: building the {backend} group failed: {exc}") from exc
        return cls(
            store=store,
            group=cast("Collective", group),  # see `Collective`
            rank=rank,
            world_size=world_size,
            backend=backend,
            device=device,
            timeout_s=timeout_s,
            where=where,
        )

    @property
    def is_sender(self) -> bool:
        return self.rank == 0

    def send(
        self, state: Mapping[str, torch.Tensor], version: int, bucket_bytes: int = BUCKET_BYTES
    ) -> int:
        """Broadcast `state` labelled `version` to every receiver (sender only); bytes sent.

        A failed transfer leaves the members out of step, so it closes the group (the sender's
        store with it, which ends the receivers' waits at once)."""
        if not self.is_sender:
            raise RuntimeError(f"{self.where}: only rank 0 sends")
        try:
            return self._send(self._live_store(), state, version, bucket_bytes)
        except WeightGroupError:
            self.close()
            raise

    def _send(
        self, store: dist.Store, state: Mapping[str, torch.Tensor], version: int, bucket_bytes: int
    ) -> int:
        import torch

        self.transfers += 1
        step = f"transfer #{self.transfers} (version {version})"
        ready = [f"ready/{self.transfers}/{r}" for r in range(1, self.world_size)]
        _wait_for(store, ready, timedelta(seconds=self.timeout_s), self.where, step)
        for key in ready:
            store.delete_key(key)
        header = Header.plan(state, version, bucket_bytes)
        self._send_header(header.encode(), step)
        members: list[list[tuple[TensorSpec, torch.Tensor]]] = [[] for _ in header.buckets]
        for spec, tensor in zip(header.tensors, state.values(), strict=True):
            members[spec.bucket].append((spec, tensor))
        for index, size in enumerate(header.buckets):
            if size == 0:
                continue
            first = members[index][0][1]
            if len(members[index]) == 1 and first.device == self.device:
                bucket = _as_bytes(first)  # a tensor alone in its bucket goes without a copy
            else:
                bucket = torch.empty(size, dtype=torch.uint8, device=self.device)
                for spec, tensor in members[index]:
                    bucket[spec.offset : spec.offset + spec.nbytes].copy_(_as_bytes(tensor))
            self._broadcast(bucket, f"{step}, bucket {index + 1}/{len(header.buckets)}")
        return sum(header.buckets)

    def receive(self) -> tuple[dict[str, torch.Tensor], int]:
        """The next transfer: (state dict on `device`, version) (receivers only).

        The tensors are views into the transfer's buckets: copy them into a model, or clone
        them to keep them apart. A failed transfer closes the group, as in `send`."""
        if self.is_sender:
            raise RuntimeError(f"{self.where}: rank 0 sends, it does not receive")
        try:
            return self._receive(self._live_store())
        except WeightGroupError:
            self.close()
            raise

    def _receive(self, store: dist.Store) -> tuple[dict[str, torch.Tensor], int]:
        import torch

        self.transfers += 1
        step = f"transfer #{self.transfers}"
        try:
            store.set(f"ready/{self.transfers}/{self.rank}", "1")
        except RuntimeError as exc:
            raise WeightGroupError(
                f"{self.where}: {step}: the sender (rank 0, which hosts the store) is gone: {exc}"
            ) from exc
        try:
            header = Header.decode(self._receive_header(step))
        except ValueError as exc:  # a sender of another version of this code
            raise WeightGroupError(f"{self.where}: {step}: {exc}") from exc
        state: dict[str, torch.Tensor] = {}
        buckets = [torch.empty(n, dtype=torch.uint8, device=self.device) for n in header.buckets]
        for index, bucket in enumerate(buckets):
            if bucket.numel():
                self._broadcast(bucket, f"{step}, bucket {index + 1}/{len(buckets)}")
        for spec in header.tensors:
            piece = buckets[spec.bucket][spec.offset : spec.offset + spec.nbytes]
            state[spec.name] = piece.view(dtype_of(spec.dtype)).view(spec.shape)
        return state, header.version

    def close(self) -> None:
        """Leave the group (idempotent). The sender's leaving also closes the store."""
        group, self._group, self._store = self._group, None, None
        if group is not None and self.backend == "nccl":
            # A peer may be gone mid-collective; abort does not wait for it, shutdown would.
            group.abort()

    def _live_store(self) -> dist.Store:
        if self._store is None or self._group is None:
            raise WeightGroupError(f"{self.where}: the group is closed")
        return self._store

    def _send_header(self, data: bytes, step: str) -> None:
        import torch

        length = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        self._broadcast(length, f"{step}, header length")
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
        self._broadcast(payload, f"{step}, header")

    def _receive_header(self, step: str) -> bytes:
        import torch

        length = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._broadcast(length, f"{step}, header length")
        payload = torch.empty(int(length.item()), dtype=torch.uint8, device=self.device)
        self._broadcast(payload, f"{step}, header")
        return payload.cpu().numpy().tobytes()

    def _broadcast(self, tensor: torch.Tensor, step: str) -> None:
        import torch.distributed as dist

        if self._group is None:
            raise WeightGroupError(f"{self.where}: the group is closed")
        options = dist.BroadcastOptions()
        options.rootRank = 0
        options.rootTensor = 0
        started = time.perf_counter()
        try:
            # With a timeout, nccl's wait blocks the CPU until the data is there, like gloo's.
            self._group.broadcast([tensor], options).wait(timedelta(seconds=self.timeout_s))
        except RuntimeError as exc:
            peer = "a receiver" if self.is_sender else "the sender (rank 0)"
            elapsed = time.perf_counter() - started
            raise WeightGroupError(
                f"{self.where}: {step} failed after {elapsed:.1f} s "
                f"(timeout {self.timeout_s:g} s; is {peer} gone?): {exc}"
            ) from exc


def _wait_for(
    store: dist.Store, keys: Sequence[str], timeout: timedelta, where: str, step: str
) -> None:
    """Wait until every key exists; a `WeightGroupError` naming the ranks whose key is missing
    (the last part of each key is a rank)."""
    try:
        store.wait(list(keys), timeout)
    except RuntimeError as exc:
        try:
            missing = [int(k.rsplit("/", 1)[1]) for k in keys if not store.check([k])]
        except RuntimeError:  # the store itself is gone: the sender is
            raise WeightGroupError(
                f"{where}: {step}: the sender (rank 0, which hosts the store) is gone: {exc}"
            ) from exc
        raise WeightGroupError(
            f"{where}: {step}: rank(s) {missing} did not check in within "
            f"{timeout.total_seconds():g} s"
        ) from exc
