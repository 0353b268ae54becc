"""Fixtures shared across packages: a tiny random-weight Qwen3 model with the real vocabulary.

Built once per test process (about 10 s), in a temporary folder: tests never download weights.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bureau.harness.trajectory import ToolCallRecord, TrajectoryRecord, TurnRecord

# 2 layers, hidden 64: about 20M parameters, almost all of them the 151,936-row embeddings.
TINY_SHAPE = {"layers": 2, "hidden": 64, "heads": 2, "kv_heads": 1}


@pytest.fixture(scope="session")
def tokenizer_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tokenizer-cache")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, tokenizer_cache: Path) -> Path:
    """A local Hugging Face checkpoint folder (qwen3 vocabulary, untied embeddings, fp32)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bureau.models.checkpoint import init_checkpoint

    out = tmp_path_factory.mktemp("tiny-model") / "qwen3-tiny"
    return init_checkpoint(
        "qwen3", out=out, seed=0, tokenizer_cache_dir=tokenizer_cache, **TINY_SHAPE
    )


@pytest.fixture
def make_record() -> Callable[..., TrajectoryRecord]:
    """A small hand-made trajectory record: two turns, one tool call (no model needed)."""
    return _record


def _record(trajectory_id: str = "t1", reward: float | None = 1.0) -> TrajectoryRecord:
    call = {"id": "call_1_0", "type": "function", "function": {"name": "fs_list", "arguments": {}}}
    return TrajectoryRecord(
        trajectory_id=trajectory_id,
        task_name="bureau/law-1",
        model="tiny",
        prompt_ids=[1, 2, 3],
        token_ids=[1, 2, 3, 10, 11, 4, 5, 12],
        loss_mask=[0, 0, 0, 1, 1, 0, 0, 1],
        sampler_logprobs=[0.0, 0.0, 0.0, -0.123456789012345, -2.5, 0.0, 0.0, -1e-9],
        weight_versions=[-1, -1, -1, 7, 7, -1, -1, 8],
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "reasoning_content": "hm", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1_0", "name": "fs_list", "content": "a.pdf"},
            {"role": "assistant", "content": "done"},
        ],
        tools=[{"type": "function", "function": {"name": "fs_list", "parameters": {}}}],
        turns=[
            TurnRecord(
                [10, 11],
                [-0.123456789012345, -2.5],
                [7, 7],
                "stop",
                "e",
                0.1,
                [4, 5],
                [{"role": "tool", "content": "a.pdf"}],
            ),
            TurnRecord([12], [-1e-9], [8], "stop", "e", 0.1),
        ],
        tool_calls=[ToolCallRecord(1, "call_1_0", "fs_list", {}, "ok", 0.01, 5, False)],
        stop_reason="answered",
        llm_time_s=0.2,
        tool_time_s=0.01,
        total_time_s=0.3,
        reward=reward,
    )
