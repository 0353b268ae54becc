"""Synthetic Harbor tasks and small run configs for the loop's end-to-end tests and benchmarks.

The machinery tests (a cluster run, SIGKILL and resume, a dead worker) and `bench/async_rl.py`
need groups whose rewards differ, or the loop never takes a step, and the tiny warm-started
model almost never solves a real task. These tasks' verifier is a plain `test.sh` (reward.txt,
as any Harbor task may have) that gives 1 when the agent left a valid `output/answer.json`, and
otherwise flips a coin (bash's $RANDOM): the pipeline (sandbox, tools, engine, verifier, trainer,
weight pushes) runs for real, and the rewards have a spread. Learning is tested elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

TEST_SH = """#!/bin/bash
# Reward 1 when output/answer.json holds a JSON object, else a coin flip (see the module doc).
mkdir -p /logs/verifier
if python3 -c "import json,sys; assert isinstance(json.load(open(sys.argv[1])), dict)" \\
    "${BUREAU_WORKSPACE:-/workspace}/output/answer.json" 2>/dev/null; then
    echo 1 > /logs/verifier/reward.txt
else
    echo $((RANDOM % 2)) > /logs/verifier/reward.txt
fi
"""


def write_answer_tasks(root: Path, count: int, *, domain_cycle: tuple[str, ...] = ("law",)) -> Path:
    """`count` tasks under `root`: read a memo, write output/answer.json."""
    for i in range(count):
        task = root / f"answer-{i:02d}"
        (task / "environment" / "workspace" / "output").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "solution").mkdir()
        (task / "environment" / "Dockerfile").write_text(
            "FROM python:3.11-slim\nCOPY workspace/ /workspace/\nWORKDIR /workspace\n"
        )
        (task / "environment" / "workspace" / f"memo-{i}.txt").write_text(
            f"Memo {i}: the figure to report is {100 + i}.\n"
        )
        (task / "instruction.md").write_text(
            f"Read memo-{i}.txt and write the figure it reports as a JSON object "
            '{"answer": <number>} to output/answer.json.\n'
        )
        (task / "tests" / "test.sh").write_text(TEST_SH)
        (task / "tests" / "test.sh").chmod(0o755)
        (task / "solution" / "solve.sh").write_text(
            f"#!/bin/bash\necho '{{\"answer\": {100 + i}}}' > /workspace/output/answer.json\n"
        )
        config: dict[str, Any] = {
            "schema_version": "1.4",
            "task": {"name": f"bureau-tests/answer-{i:02d}"},
            "metadata": {"domain": domain_cycle[i % len(domain_cycle)], "template": "answer"},
            "verifier": {"timeout_sec": 60.0},
            "agent": {"timeout_sec": 120.0},
            "environment": {
                "cpus": 1,
                "memory_mb": 1024,
                "storage_mb": 512,
                "network_mode": "no-network",
                "workdir": "/workspace",
            },
        }
        (task / "task.toml").write_text(tomli_w.dumps(config))
    return root


def run_config(
    out: Path, model: Path, train: Path, eval_: Path | None = None, **sections: Any
) -> dict[str, Any]:
    """A small `RunConfig` tree for CPU tests; `sections` update it key by key."""
    tree: dict[str, Any] = {
        "out": str(out),
        "steps": 2,
        "seed": 0,
        "model": {"path": str(model)},
        "data": {"train": str(train)} | ({"eval": str(eval_)} if eval_ else {}),
        "rollout": {
            "attempts": 4,
            "max_in_flight": 8,
            "workers": 1,
            "worker_cpus": 0,
            "warm_sandboxes": 2,
            "agent_timeout_s": 60,
            "harness": {
                "max_turns": 4,
                "max_tokens_per_turn": 160,
                "context_length": 4096,
                "tool_prefixes": ["fs_list", "fs_read_text", "fs_write_text"],
            },
        },
        "engines": {"kind": "builtin", "num_cpus": 1, "max_batch": 8, "cache_tokens": 16384},
        "async": {"mode": "async", "max_staleness": 1, "groups_per_step": 2},
        "trainer": {"optimizer": {"lr": 1e-4}},
        "eval": {"at_end": False},
        "checkpoint": {"every": 1},
        "logging": {"tensorboard": False, "progress": False},
        "ray": {"num_cpus": 2, "trainer_cpus": 1},
    }
    for key, value in sections.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree
