"""The token-in/token-out audit on scripted trajectories: aligned, tampered, and drifting."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from harness_fakes import IM_END, FakeTools, ScriptedSampler

from bureau.audit.tito import audit, check_tokens, naive_drifts
from bureau.harness.loop import Episode, HarnessConfig
from bureau.harness.render import Renderer
from bureau.records import TrajectoryRecord

LIST_CALL = '<tool_call>\n{"name": "fs_list", "arguments": {"path": "."}}\n</tool_call>'


def episode(qwen3: Any, script: list[Any]) -> TrajectoryRecord:
    tools = FakeTools({"fs_list": lambda a: "report.pdf"})
    ep = Episode(
        ScriptedSampler(qwen3, script), Renderer(qwen3), tools, HarnessConfig(),
        task_name="t", model="m",
    )  # fmt: skip
    return asyncio.run(ep.run("Count the files."))


def test_aligned_trajectories_pass(qwen3: Any) -> None:
    renderer = Renderer(qwen3)
    records = [episode(qwen3, [LIST_CALL, "2 files."]), episode(qwen3, ["Done."])]
    report = audit(records, renderer)
    assert report.token_mismatches == []
    assert report.trajectories == 2 and report.multi_turn == 1
    assert report.lines()[0] == "token mismatches: 0 of 2 trajectories"
    # Canonically encoded turns: the naive pipeline agrees.
    assert report.naive_drift == 0


def test_retokenized_turn_is_a_mismatch(qwen3: Any) -> None:
    renderer = Renderer(qwen3)
    record = episode(qwen3, [LIST_CALL, "2 files."])
    assert check_tokens(record, renderer) is None
    # Rewrite the stored ids as a re-tokenizing pipeline would (" hello" -> " hel" + "lo").
    tampered = dataclasses.replace(record, token_ids=[*record.token_ids[:-3], 11338, 385, IM_END])
    problem = check_tokens(tampered, renderer)
    assert problem is not None and "token ids differ" in problem
    # An observation that was not tokenized by the fixed-base method.
    turns = [dataclasses.replace(t) for t in record.turns]
    turns[0].observation_ids = [*turns[0].observation_ids[:-1], 100]
    problem = check_tokens(dataclasses.replace(record, turns=turns), renderer)
    assert problem == "turn 1: observation ids are not the fixed-base ids"
    report = audit([record, tampered], renderer)
    assert report.lines()[0] == "token mismatches: 1 of 2 trajectories"


def test_non_canonical_sample_drifts_under_naive_retokenization(qwen3: Any) -> None:
    renderer = Renderer(qwen3)
    # The engine sampled " hel" + "lo" (a valid but non-canonical split of " hello").
    record = episode(qwen3, [[11338, 385, IM_END]])
    assert check_tokens(record, renderer) is None
    assert record.messages[-1]["content"] == "hello"
    assert naive_drifts(record, renderer)
    assert not naive_drifts(episode(qwen3, ["hello"]), renderer)
