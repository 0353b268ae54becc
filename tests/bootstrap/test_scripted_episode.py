"""The teacher as the harness's sampler: the record holds exactly the ids it emitted."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import transformers  # noqa: F401
from bootstrap_fakes import RegisterTools, register_task

from bureau.bootstrap.config import Mistake
from bureau.bootstrap.scripted import ScriptedSampler
from bureau.bootstrap.teacher import FINAL_MESSAGE, Teacher
from bureau.harness.loop import Episode, HarnessConfig
from bureau.harness.render import Renderer
from bureau.records import TrajectoryRecord


def _run(
    tiny_model: Path, mistake: Mistake | None
) -> tuple[ScriptedSampler, RegisterTools, TrajectoryRecord, Renderer]:
    from transformers import AutoTokenizer

    renderer = Renderer(AutoTokenizer.from_pretrained(str(tiny_model)))
    sampler = ScriptedSampler(renderer, Teacher(register_task(), mistake, random.Random(0)))
    tools = RegisterTools()
    episode = Episode(
        sampler, renderer, tools, HarnessConfig(max_turns=6), task_name="t", model="m"
    )
    record = asyncio.run(episode.run(register_task().instruction))
    return sampler, tools, record, renderer


def test_the_record_is_token_for_token_what_the_teacher_emitted(tiny_model: Path) -> None:
    sampler, tools, record, renderer = _run(tiny_model, None)
    assert record.stop_reason == "answered"
    assert [name for name, _ in tools.calls] == ["sheet_read", "fs_write_text"]
    assert json.loads(tools.calls[1][1]["content"])["counterparty"] == "Castillo Systems"
    assert [turn.completion_ids for turn in record.turns] == sampler.emitted
    # The sampled positions of the token list are the emitted ids, in order, and nothing else.
    sampled = [t for t, m in zip(record.token_ids, record.loss_mask, strict=True) if m]
    assert sampled == [i for ids in sampler.emitted for i in ids]
    rebuilt = list(record.prompt_ids)
    for turn in record.turns:
        rebuilt += turn.completion_ids + turn.observation_ids
    assert rebuilt == record.token_ids
    assert all(ids[-1] == renderer.im_end_id for ids in sampler.emitted)
    assert renderer.decode(sampler.emitted[-1][:-1]) == FINAL_MESSAGE
    assert set(record.sampler_logprobs) == {0.0}


def test_the_teacher_sees_the_tool_output_the_model_would_see(tiny_model: Path) -> None:
    # A malformed first call is answered by the harness's correction; the teacher then reads.
    sampler, tools, record, _ = _run(tiny_model, "malformed_call")
    assert record.turns[0].parse_error is not None
    assert [name for name, _ in tools.calls] == ["sheet_read", "fs_write_text"]
    assert record.stop_reason == "answered"
    assert len(sampler.emitted) == 4


def test_an_answer_in_the_final_message_ends_the_episode(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    from bureau.harness.agent import final_json

    renderer = Renderer(AutoTokenizer.from_pretrained(str(tiny_model)))
    teacher = Teacher(register_task(), None, random.Random(0), answer_in_message=True)
    sampler = ScriptedSampler(renderer, teacher)
    tools = RegisterTools()
    config = HarnessConfig(max_turns=6, tool_prefixes=["sheet_read"])
    episode = Episode(sampler, renderer, tools, config, task_name="t", model="m")
    record = asyncio.run(episode.run(register_task().instruction))
    assert record.stop_reason == "answered"
    assert [name for name, _ in tools.calls] == ["sheet_read"]
    # What the harness agent then writes to output/answer.json.
    final = str(record.messages[-1].get("content"))
    assert final_json(final) == {"counterparty": "Castillo Systems", "annual_value": 2010000}
