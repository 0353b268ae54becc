"""Training checkpoints (to resume) and weight exports (for the inference engines).

A checkpoint folder holds everything the next step depends on, so a resumed run takes the same
step, bit for bit on CPU, as the run that saved it:

    model-and-optimizer/   model parameters and AdamW moments (torch.distributed.checkpoint:
                           each rank writes its own shards; one process writes them all)
    scheduler.pt           the learning-rate schedule's position
    rng-rank{r}.pt         python, numpy and torch (and CUDA) random states of every rank
    trainer_state.json     step, consumed sequences, world size and the trainer config

An export is a folder of `*.safetensors` named as in the Hugging Face checkpoint, plus its
`config.json`: what `bureau.inference.engine.Engine.update_weights` and vLLM's
`reload_weights` read. Tied tensors are exported once, under their first name (both readers
accept either name of a tied pair).
"""

from __future__ import annotations

import json
import random
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bureau.trainer.fsdp import Parallel

if TYPE_CHECKING:
    from transformers import PreTrainedModel

STATE_DIR = "model-and-optimizer"
SCHEDULER_FILE = "scheduler.pt"
STATE_FILE = "trainer_state.json"
WEIGHTS_FILE = "model.safetensors"


@contextmanager
def _single_process_ok() -> Iterator[None]:
    """Silences DCP's warning that it saves or loads in one process: that is intended."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        yield


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:  # numpy is optional; nothing here draws from it then
        pass
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_training_state(
    path: Path,
    parallel: Parallel,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    trainer_state: dict[str, Any],
) -> Path:
    """Write a checkpoint folder (every rank calls this); returns `path`."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    path = Path(path)
    if parallel.is_main:
        # Overwriting: the state file goes first, so an interrupted save reads as incomplete.
        (path / STATE_FILE).unlink(missing_ok=True)
        if (path / STATE_DIR).exists():
            shutil.rmtree(path / STATE_DIR)
        path.mkdir(parents=True, exist_ok=True)
    parallel.barrier()
    model_state, optim_state = get_state_dict(model, optimizer)
    with _single_process_ok():
        dcp.save(
            {"model": model_state, "optim": optim_state},
            checkpoint_id=str(path / STATE_DIR),
            no_dist=not parallel.sharded,
        )
    torch.save(rng_state(), path / f"rng-rank{parallel.rank}.pt")
    if parallel.is_main:
        torch.save(scheduler.state_dict(), path / SCHEDULER_FILE)
        state = {**trainer_state, "world_size": parallel.world_size}
        staging = path / f".{STATE_FILE}.tmp"
        staging.write_text(json.dumps(state, indent=2) + "\n")
        staging.replace(path / STATE_FILE)  # last: its presence marks a complete checkpoint
    parallel.barrier()
    return path


def load_training_state(
    path: Path,
    parallel: Parallel,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> dict[str, Any]:
    """Restore a checkpoint written by `save_training_state`; returns its trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    path = Path(path)
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"{path} is not a complete trainer checkpoint (no {STATE_FILE})")
    state = json.loads((path / STATE_FILE).read_text())
    if state["world_size"] != parallel.world_size:
        # The model and optimizer shards would reload, but not the per-rank random states.
        raise ValueError(
            f"checkpoint from {state['world_size']} ranks cannot resume on {parallel.world_size}"
        )
    model_state, optim_state = get_state_dict(model, optimizer)
    # dcp.load fills these dicts in place.
    with _single_process_ok():
        dcp.load(
            {"model": model_state, "optim": optim_state},
            checkpoint_id=str(path / STATE_DIR),
            no_dist=not parallel.sharded,
        )
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    scheduler.load_state_dict(torch.load(path / SCHEDULER_FILE, weights_only=False))
    set_rng_state(torch.load(path / f"rng-rank{parallel.rank}.pt", weights_only=False))
    return dict(state)


def full_state_dict(
    model: torch.nn.Module, parallel: Parallel, dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """Every tensor of the model, on CPU, on the main rank (others get an empty dict)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    if parallel.sharded:
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = {
            name: value
            for name, value in get_model_state_dict(model, options=options).items()
            if isinstance(value, torch.Tensor)
        }
    else:
        state = {name: t.detach().to("cpu") for name, t in model.state_dict().items()}
    if not parallel.is_main:
        return {}
    # Copies (in `dtype`, if given): the caller may hand them to an engine while training goes on.
    return {
        k: v.to(dtype=dtype if dtype is not None and v.is_floating_point() else v.dtype, copy=True)
        for k, v in untie(state).items()
    }


def untie(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One name per storage (safetensors refuses shared tensors): the first name is kept."""
    seen: set[tuple[int, int]] = set()  # (storage address, offset)
    kept: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), int(tensor.storage_offset()))
        if key in seen:
            continue
        seen.add(key)
        kept[name] = tensor.contiguous()
    return kept


def write_weights(
    state: dict[str, torch.Tensor], out: Path, model: PreTrainedModel | None = None
) -> Path:
    """`out/model.safetensors` (written to a hidden name, then renamed) and `config.json`."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    staging = out / f".{WEIGHTS_FILE}.tmp"
    save_file(untie(state), str(staging), metadata={"format": "pt"})
    staging.replace(out / WEIGHTS_FILE)
    if model is not None:
        model.config.to_json_file(str(out / "config.json"))
    return out
