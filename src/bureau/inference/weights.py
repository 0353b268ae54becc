"""Checked in-place weight updates: from a folder of safetensors files or a state dict.

Everything is checked before the model is touched (names, shapes, float dtypes, tied tensors
needing one of their names), so a bad update leaves the engine serving its old weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


@dataclass
class WeightPlan:
    """Checked tensors to copy into the model: from safetensors files or from a state dict."""

    files: list[Path]
    tensors: Mapping[str, torch.Tensor] | None
    describe: str

    @classmethod
    def build(cls, source: Path | str | Mapping[str, Any], model: PreTrainedModel) -> WeightPlan:
        if isinstance(source, Mapping):
            shapes = {name: (tuple(t.shape), t.dtype) for name, t in source.items()}
            check_weights(shapes, model, "the state dict")
            return cls(files=[], tensors=source, describe="<state dict>")
        folder = Path(source)
        if not folder.is_dir():
            raise FileNotFoundError(f"weights folder {folder} does not exist")
        files = sorted(folder.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors file in {folder}")
        check_weights(safetensors_shapes(files), model, str(folder))
        return cls(files=files, tensors=None, describe=str(folder))

    def load_into(self, model: PreTrainedModel) -> None:
        import torch
        from safetensors import safe_open

        targets = model.state_dict()
        with torch.no_grad():
            if self.tensors is not None:
                for name, tensor in self.tensors.items():
                    targets[name].copy_(tensor)
                return
            for path in self.files:
                with safe_open(str(path), framework="pt") as handle:
                    for name in handle.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                        targets[name].copy_(handle.get_tensor(name))


def safetensors_shapes(files: list[Path]) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Name -> (shape, dtype) from the headers; `ValueError` for an unreadable or truncated file."""
    from safetensors import SafetensorError, safe_open

    shapes: dict[str, tuple[tuple[int, ...], Any]] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                    piece = handle.get_slice(name)
                    if name in shapes:
                        raise ValueError(f"tensor {name} appears in more than one file ({path})")
                    shapes[name] = (tuple(piece.get_shape()), piece.get_dtype())
        except (OSError, SafetensorError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from exc
    return shapes


def check_weights(
    shapes: Mapping[str, tuple[tuple[int, ...], Any]], model: PreTrainedModel, where: str
) -> None:
    """`ValueError` unless `shapes` names exactly the model's tensors, in their shapes."""
    import torch

    expected = model.state_dict()
    unknown = sorted(set(shapes) - set(expected))
    wrong = [
        f"{name} {list(shape)} (model {list(expected[name].shape)})"
        for name, (shape, _) in shapes.items()
        if name in expected and tuple(expected[name].shape) != tuple(shape)
    ]
    not_float = [
        name
        for name, (_, dtype) in shapes.items()
        if name in expected
        and expected[name].is_floating_point()
        and not is_float_dtype(dtype, torch)
    ]
    # Tied tensors (one storage under several names) need only one of their names.
    by_storage: dict[int, list[str]] = {}
    for name, tensor in expected.items():
        by_storage.setdefault(tensor.data_ptr(), []).append(name)
    missing = sorted(
        names[0] for names in by_storage.values() if not any(n in shapes for n in names)
    )
    problems = []
    if unknown:
        problems.append(f"{len(unknown)} tensors the model does not have: {unknown[:5]}")
    if missing:
        problems.append(f"{len(missing)} model tensors missing: {missing[:5]}")
    if wrong:
        problems.append(f"{len(wrong)} tensors with the wrong shape: {wrong[:5]}")
    if not_float:
        problems.append(f"non-float tensors for float weights: {not_float[:5]}")
    if problems:
        raise ValueError(f"weights in {where} do not match the model: " + "; ".join(problems))


def is_float_dtype(dtype: Any, torch: Any) -> bool:
    if isinstance(dtype, torch.dtype):
        return bool(dtype.is_floating_point)
    return str(dtype).upper() in {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


def digest(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in name order: two models hold
    the same weights bit for bit exactly when their digests agree (whatever device)."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        h.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return h.hexdigest()
