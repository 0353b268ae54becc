"""What a run asks of a node before and while placing its actors: a free port there, whether it
sees the run's paths, where an actor landed. Ray tasks run these on the node in a worker
process, which imports this module to run them: it imports nothing heavier than Ray, so a probe
costs a worker about half a second instead of the seconds `bureau.loop.actors.remote` (torch,
the rollout worker) takes to import."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import ray


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def where_am_i() -> dict[str, Any]:
    """This actor's process, node and the GPUs Ray gave it (logical ones on a CPU machine)."""
    context = ray.get_runtime_context()
    return {
        "pid": os.getpid(),
        "node_id": context.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "resources": context.get_assigned_resources(),
    }


def check_paths(paths: list[str], marker_text: str) -> list[str]:
    """What is wrong with `paths` on this node (the first is a marker file holding
    `marker_text`, the others must exist); empty when all is well."""
    problems = []
    for index, raw in enumerate(paths):
        path = Path(raw)
        try:
            if index == 0:
                if path.read_text() != marker_text:
                    problems.append(f"{path} is another file than the driver's")
            elif not path.exists():
                problems.append(f"{path} does not exist")
            elif path.is_dir():
                next(path.iterdir(), None)  # readable
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
    return problems
