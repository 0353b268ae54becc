"""Where the model lives: one process, or sharded across ranks with FSDP2.

`Parallel` is what the trainer asks about placement: the rank and number of ranks, how to wrap
the model, how to combine per-rank results. One process is `Parallel.single()`; under torchrun
(or any launcher that sets `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`) it is
`Parallel.from_env()`, which joins the process group: nccl on GPUs, gloo on CPUs.

FSDP2 (`fully_shard`) shards every decoder layer (the classes a Hugging Face model lists in
`_no_split_modules`) and then the root (embeddings, final norm, output layer). Gradients are
summed across ranks, not averaged: every rank trains on its own micro-batches of one batch
whose loss weights were normalised over the whole batch, so the batch gradient is the sum of
the ranks' gradients. (The sum is forced to plain `SUM` collectives: gloo has no PREMUL_SUM.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass
class Parallel:
    """The process's place among the trainer's ranks."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    sharded: bool = False
    """True when the model is sharded with FSDP2 over a process group."""

    @classmethod
    def single(cls, device: str | None = None) -> Parallel:
        """One process on `device` (None: cuda when available, else cpu)."""
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        return cls(device=torch.device(device))

    @classmethod
    def from_env(cls) -> Parallel:
        """Join (or reuse) the default process group described by torchrun's variables."""
        import torch.distributed as dist

        cuda = torch.cuda.is_available()
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        if cuda:
            local = int(os.environ.get("LOCAL_RANK", rank % torch.cuda.device_count()))
            torch.cuda.set_device(local)
            device = torch.device("cuda", local)
        else:
            device = torch.device("cpu")
        return cls(rank=rank, world_size=world, device=device, sharded=True)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: PreTrainedModel, *, bf16: bool) -> PreTrainedModel:
        """Move the model to the device; under FSDP2, shard it (mixed precision for bf16)."""
        # Through nn.Module: transformers' own typing of `to` confuses mypy.
        torch.nn.Module.to(model, self.device)
        if not self.sharded:
            return model
        from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

        policy = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if bf16
            else MixedPrecisionPolicy()
        )
        layer_names = set(getattr(model, "_no_split_modules", None) or [])
        layers = [m for m in model.modules() if type(m).__name__ in layer_names]
        if not layers:
            raise ValueError(f"{type(model).__name__} names no decoder layers to shard")
        for layer in layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_gradient_divide_factor(1.0)
                module.set_force_sum_reduction_for_comms(True)
        return model

    def autocast(self, bf16: bool) -> AbstractContextManager[Any]:
        """bf16 autocast for one process; FSDP2's mixed-precision policy casts by itself."""
        if bf16 and not self.sharded:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def gather_objects(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order (just `[value]` in one process)."""
        if not self.sharded:
            return [value]
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered

    def barrier(self) -> None:
        if self.sharded:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        """Leave the process group (idempotent)."""
        if self.sharded:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def full_tensor(value: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (a plain tensor is returned as is)."""
    from torch.distributed.tensor import DTensor

    return value.full_tensor() if isinstance(value, DTensor) else value


def named_parameters(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Parameters as full tensors (gathered from the shards under FSDP2), for tests."""
    for name, param in model.named_parameters():
        yield name, full_tensor(param.detach())
