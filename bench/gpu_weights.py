"""Weight push on GPUs: NCCL broadcast (`bureau.inference.transport.broadcast`) against a
safetensors folder.

    .venv/bin/python bench/gpu_weights.py              # ~1 GB of bfloat16, 3 rounds per arm
    .venv/bin/python bench/gpu_weights.py --gb 4 --rounds 5

Two processes: the sender (this one, on cuda:0, like trainer rank 0) and a receiver (a spawned
process on cuda:1, like an engine; on cuda:0 when there is only one GPU, which NCCL may refuse:
the arm then reports the error and the folder arm still runs). Measured side by side in one run,
alternating rounds after one warm-up round each:
1. nccl: `WeightGroup.send` of the state dict (flat 256 MiB buckets) until the receiver holds it
   on its GPU (it synchronizes, then answers);
2. folder: the sender writes `model.safetensors` (GPU to CPU to disk) and the receiver loads it
   onto its GPU; the file is then re-read from the page cache, the favourable case for disk.
Each round is timed from the sender's start to the receiver's answer; GB/s is the state dict's
size over that time. The receiver checks a checksum of what it got against the sender's. Without
CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

HOST = "127.0.0.1"


def make_state(gb: float, device: str) -> dict[str, torch.Tensor]:
    """bfloat16 tensors shaped like a decoder's: one 256 MiB embedding, then 8 MiB matrices."""
    import torch

    state = {"embed.weight": torch.randn(2**17, 1024, dtype=torch.bfloat16, device=device)}
    for index in range(max(0, int((gb * 1e9 - 2**28) // 2**23))):
        state[f"layers.{index}.weight"] = torch.randn(
            2048, 2048, dtype=torch.bfloat16, device=device
        )
    return state


def checksum(state: dict[str, torch.Tensor]) -> float:
    return float(sum(t.float().sum().item() for t in state.values()))


def receiver(port: int, device: str, commands: Any, answers: Any) -> None:
    """The engine side: joins the group, then answers each command with (seconds, checksum)
    or ("error", message)."""
    import torch
    from safetensors.torch import load_file

    from bureau.inference.transport.broadcast import WeightGroup

    torch.cuda.set_device(device)
    group = WeightGroup.create(HOST, port, 1, 2, "nccl", timeout_s=120, device=torch.device(device))
    try:
        while (command := commands.get())[0] != "stop":
            started = time.perf_counter()
            try:
                if command[0] == "nccl":
                    state, _ = group.receive()
                else:
                    state = load_file(command[1], device=device)
                torch.cuda.synchronize(device)
                answers.put((time.perf_counter() - started, checksum(state)))
            except Exception as exc:  # reported to the sender, which prints it
                answers.put(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        group.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gb", type=float, default=1.0, help="state dict size in GB")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per arm")
    parser.add_argument("--folder", type=Path, default=None, help="where the folder arm writes")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("bench/gpu_weights.py needs CUDA (torch.cuda.is_available() is False): nothing run.")
        return 0
    from safetensors.torch import save_file

    from bureau.inference.transport.broadcast import WeightGroup

    gpus = torch.cuda.device_count()
    target = "cuda:1" if gpus > 1 else "cuda:0"
    if gpus == 1:
        print("one GPU: the receiver shares cuda:0 with the sender (NCCL may refuse that)")
    state = make_state(args.gb, "cuda:0")
    size = sum(t.numel() * t.element_size() for t in state.values())
    expected = checksum(state)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="gpu-weights-"))
    folder.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    commands, answers = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=receiver, args=(port, target, commands, answers), daemon=True)
    proc.start()
    group = WeightGroup.create(HOST, port, 0, 2, "nccl", timeout_s=120)
    times: dict[str, list[float]] = {"nccl": [], "folder": []}
    failed: dict[str, str] = {}
    try:
        for round_ in range(args.rounds + 1):  # round 0 warms up (NCCL builds its communicator)
            for arm in ("nccl", "folder"):
                if arm in failed:
                    continue
                started = time.perf_counter()
                try:
                    if arm == "nccl":
                        commands.put(("nccl",))
                        group.send(state, version=round_)
                    else:
                        path = folder / "model.safetensors"
                        save_file({k: v.cpu() for k, v in state.items()}, str(path))
                        commands.put(("folder", str(path)))
                except Exception as exc:  # one arm failing still lets the other be measured
                    failed[arm] = f"{type(exc).__name__}: {exc}"
                    if arm == "nccl":  # the receiver was waiting in `receive`: take its answer
                        answers.get(timeout=600)
                    continue
                answer = answers.get(timeout=600)
                elapsed = time.perf_counter() - started
                if answer[0] == "error":
                    failed[arm] = answer[1]
                elif abs(answer[1] - expected) > 1e-3 * max(1.0, abs(expected)):
                    failed[arm] = f"checksum {answer[1]} != {expected}"
                elif round_ > 0:
                    times[arm].append(elapsed)
    finally:
        commands.put(("stop",))
        proc.join(60)
        group.close()
    print(f"{size / 1e9:.2f} GB of bfloat16, cuda:0 -> {target}, {args.rounds} rounds")
    median = {arm: sorted(v)[len(v) // 2] for arm, v in times.items() if v and arm not in failed}
    for arm, values in times.items():
        if arm in failed:
            print(f"  {arm:6s} failed: {failed[arm]}")
        elif arm in median:
            print(
                f"  {arm:6s} median {median[arm]:.3f} s ({size / 1e9 / median[arm]:.1f} GB/s), "
                f"best {min(values):.3f} s ({size / 1e9 / min(values):.1f} GB/s)"
            )
    if len(median) == 2:
        print(f"  folder / nccl (medians): {median['folder'] / median['nccl']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
