"""AdamW's fused kernel (what `bureau.trainer.config.adamw` picks on CPU and CUDA) against the
foreach and the per-tensor loop, side by side on one model's parameters.

    .venv/bin/python bench/optimizer.py [--shape tiny|demo] [--steps 20] [--threads 1]

`tiny` is the tests' Qwen3 (2 layers, hidden 64, the real 151,936-token vocabulary, untied:
about 20M parameters, almost all of them the two embedding matrices); `demo` is `make demo`'s
(hidden 128, the 8,320-token demo vocabulary, tied). Each arm steps its own copy of the same
parameters with the same gradients; the arms take turns step by step, after an untimed warm-up
step each. Reported: seconds a step per arm (median), each arm's ratio to fused, and the largest
difference of its parameters from foreach's after all steps (rounding only: same update).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bureau.models.checkpoint import init_checkpoint, load_checkpoint

ARMS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}
SHAPES = {
    "tiny": {"vocab": "qwen3", "layers": 2, "hidden": 64, "heads": 2, "kv_heads": 1},
    "demo": {"vocab": "qwen3-demo", "layers": 2, "hidden": 128, "heads": 2, "kv_heads": 1},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shape = dict(SHAPES[args.shape])
    with tempfile.TemporaryDirectory() as folder:
        init_checkpoint(str(shape.pop("vocab")), out=Path(folder), seed=0, **shape)  # type: ignore[arg-type]
        model, _ = load_checkpoint(Path(folder), dtype=torch.float32)
    base = [p.detach().clone() for p in model.parameters()]
    count = sum(p.numel() for p in base)
    generator = torch.Generator().manual_seed(0)
    grads = [[torch.randn(p.shape, generator=generator) for p in base] for _ in range(3)]
    arms = {}
    for name, kernel in ARMS.items():
        params = [torch.nn.Parameter(p.clone()) for p in base]
        arms[name] = (params, torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **kernel))
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    for step in range(args.steps + 1):
        for name, (params, optimizer) in arms.items():
            for p, g in zip(params, grads[step % len(grads)], strict=True):
                p.grad = g
            started = time.perf_counter()
            optimizer.step()
            if step:  # step 0 warms up
                seconds[name].append(time.perf_counter() - started)
    print(
        f"{args.shape}: {count / 1e6:.1f}M parameters, {args.steps} steps, {args.threads} thread(s)"
    )
    fused = statistics.median(seconds["fused"])
    reference = arms["foreach"][0]
    for name, (params, _) in arms.items():
        median = statistics.median(seconds[name])
        drift = max(
            float((p.detach() - q.detach()).abs().max())
            for p, q in zip(params, reference, strict=True)
        )
        print(
            f"  {name:8s} {median * 1e3:8.1f} ms/step  x{median / fused:5.2f} of fused"
            f"  max |param - foreach's| {drift:.1e}"
        )


if __name__ == "__main__":
    main()
