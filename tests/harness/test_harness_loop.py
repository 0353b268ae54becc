"""The agent loop, driven by a scripted engine that returns chosen token ids."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from harness_fakes import IM_END, FakeTools, ScriptedSampler

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.harness.loop import Episode, HarnessConfig, truncate
from bureau.harness.render import Renderer
from bureau.records import TrajectoryRecord

LIST_CALL = '<tool_call>\n{"name": "fs_list", "arguments": {"path": "."}}\n</tool_call>'
BAD_CALL = '<tool_call>\n{"name": "fs_list", "arguments": {"path": \n</tool_call>'


def run(
    qwen3: Any, script: list[Any], tools: FakeTools | None = None, **config: Any
) -> tuple[TrajectoryRecord, ScriptedSampler]:
    sampler = ScriptedSampler(qwen3, script)
    tools = tools or FakeTools({"fs_list": lambda a: "report.pdf\nmodel.xlsx"})
    episode = Episode(
        sampler, Renderer(qwen3), tools, HarnessConfig(**config), task_name="t", model="m"
    )
    return asyncio.run(episode.run("Count the files.")), sampler


def check_alignment(record: TrajectoryRecord) -> None:
    """token_ids = prompt + (completion + observation) per turn, masks and logprobs aligned."""
    expected_ids = list(record.prompt_ids)
    expected_mask = [0] * len(record.prompt_ids)
    for turn in record.turns:
        expected_ids += turn.completion_ids + turn.observation_ids
        expected_mask += [1] * len(turn.completion_ids) + [0] * len(turn.observation_ids)
    assert record.token_ids == expected_ids
    assert record.loss_mask == expected_mask
    assert len(record.sampler_logprobs) == len(record.weight_versions) == len(expected_ids)
    for lp, m, v in zip(
        record.sampler_logprobs, record.loss_mask, record.weight_versions, strict=True
    ):
        assert (lp, v) == ((-0.5, 3) if m else (0.0, -1))


def test_tool_call_then_answer(qwen3: Any) -> None:
    record, sampler = run(qwen3, [LIST_CALL, "There are 2 files."])
    assert record.stop_reason == "answered"
    assert record.num_turns == 2
    check_alignment(record)
    # The engine saw exactly the stored ids before each turn: nothing was re-tokenized.
    first = record.turns[0]
    assert sampler.prompts[0] == record.prompt_ids
    assert sampler.prompts[1] == record.prompt_ids + first.completion_ids + first.observation_ids
    assert [m["role"] for m in record.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert record.messages[2]["tool_calls"][0]["function"] == {
        "name": "fs_list",
        "arguments": {"path": "."},
    }
    assert record.messages[3]["content"] == "report.pdf\nmodel.xlsx"
    assert record.messages[4]["content"] == "There are 2 files."
    [call] = record.tool_calls
    assert (call.turn, call.name, call.outcome, call.truncated) == (1, "fs_list", "ok", False)
    # Stop ids: <|im_end|> and <|endoftext|>.
    assert sampler.params[0].stop_token_ids == (IM_END, 151643)


def test_unparsable_call_gets_a_correction_and_a_retry(qwen3: Any) -> None:
    record, _ = run(qwen3, [BAD_CALL, LIST_CALL, "2 files."], max_parse_retries=1)
    assert record.stop_reason == "answered"
    check_alignment(record)
    assert record.turns[0].parse_error is not None and "invalid JSON" in record.turns[0].parse_error
    correction = record.messages[3]
    assert correction["role"] == "user" and "could not be read" in correction["content"]
    assert record.turns[1].parse_error is None


def test_each_turn_samples_with_its_own_seed(qwen3: Any) -> None:
    """Engines seed a fresh generator per seeded request: one seed for every turn would draw
    the same random numbers each turn (and again on the regenerated turn after a bad call)."""
    script = [LIST_CALL, BAD_CALL, LIST_CALL, "2 files."]
    _, sampler = run(qwen3, script, seed=7)
    seeds = [p.seed for p in sampler.params]
    assert seeds[0] == 7 and len(set(seeds)) == 4
    assert all(s is not None and 0 <= s < 2**63 for s in seeds)
    assert [p.seed for p in run(qwen3, script, seed=7)[1].params] == seeds  # reproducible
    assert not set(seeds) & {p.seed for p in run(qwen3, script, seed=8)[1].params}
    assert {p.seed for p in run(qwen3, script)[1].params} == {None}  # unseeded stays unseeded


def test_too_many_parse_failures_stop(qwen3: Any) -> None:
    record, _ = run(qwen3, [BAD_CALL, BAD_CALL, BAD_CALL, "unused"], max_parse_retries=2)
    assert record.stop_reason == "parse_failures"
    assert record.num_turns == 3
    check_alignment(record)
    # A parse failure resets after a good call: fail, good, fail, answer.
    record, _ = run(qwen3, [BAD_CALL, LIST_CALL, BAD_CALL, "done"], max_parse_retries=1)
    assert record.stop_reason == "answered"


def test_long_tool_output_is_truncated_head_and_tail(qwen3: Any) -> None:
    text = "H" * 3000 + "M" * 10000 + "T" * 3000
    tools = FakeTools({"fs_list": lambda a: text})
    record, _ = run(qwen3, [LIST_CALL, "done"], tools, max_tool_output_chars=600)
    content = record.messages[3]["content"]
    assert content.startswith("H" * 400) and content.endswith("T" * 200)
    assert "[... 15400 characters cut ...]" in content
    assert record.tool_calls[0].truncated
    assert truncate("short", 600) == ("short", False)


def test_tool_errors_and_unknown_tools_go_back_to_the_model(qwen3: Any) -> None:
    def broken(arguments: dict[str, Any]) -> str:
        raise ValueError("no such folder")

    unknown = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    tools = FakeTools({"fs_list": broken})
    record, _ = run(qwen3, [LIST_CALL, unknown, "done"], tools)
    assert [c.outcome for c in record.tool_calls] == ["tool_error", "unknown_tool"]
    assert record.messages[3]["content"] == "ValueError: no such folder"
    assert "unknown tool 'rm_rf'" in record.messages[5]["content"]
    assert record.stop_reason == "answered"


def test_context_notice_is_added_once(qwen3: Any) -> None:
    record, _ = run(
        qwen3,
        [LIST_CALL, LIST_CALL, "done"],
        context_length=420,
        context_warning_fraction=0.5,
    )
    notices = [m for m in record.messages if "tokens of context remain" in str(m["content"])]
    assert len(notices) == 1
    assert record.messages.index(notices[0]) == 4  # right after the first tool result
    check_alignment(record)


def test_limits(qwen3: Any) -> None:
    record, _ = run(qwen3, [LIST_CALL] * 5, max_turns=3)
    assert (record.stop_reason, record.num_turns) == ("max_turns", 3)
    # The per-turn cap cuts the turn (finish "length"): max_tokens.
    record, sampler = run(qwen3, ["word " * 50], max_tokens_per_turn=8)
    assert record.stop_reason == "max_tokens"
    assert len(record.turns[0].completion_ids) == 8 == sampler.params[0].max_tokens
    # The context end cuts it: context_exhausted.
    prompt_len = len(record.prompt_ids)
    record, sampler = run(qwen3, ["word " * 50], context_length=prompt_len + 5)
    assert record.stop_reason == "context_exhausted"
    assert sampler.params[0].max_tokens == 5
    # The trajectory budget runs out over several turns.
    record, _ = run(qwen3, [LIST_CALL] * 5, max_tokens=40)
    assert record.stop_reason == "max_tokens"
    assert record.num_sampled_tokens <= 40


def test_timeout_and_system_errors(qwen3: Any) -> None:
    sampler = ScriptedSampler(qwen3, [LIST_CALL] * 10, delay_s=0.2)
    tools = FakeTools({"fs_list": lambda a: "x"})
    episode = Episode(
        sampler, Renderer(qwen3), tools, HarnessConfig(), task_name="t", model="m",
        deadline=time.monotonic() + 0.5,
    )  # fmt: skip
    record = asyncio.run(episode.run("go"))
    assert record.stop_reason == "timeout"
    check_alignment(record)

    failure = BureauSystemError(SystemErrorKind.engine_timeout, "no answer in 300 s")
    record, _ = run(qwen3, [LIST_CALL, failure])
    assert record.stop_reason == "system_error"
    assert record.system_error is not None and record.system_error.startswith("engine_timeout")
    check_alignment(record)


def test_record_round_trips(qwen3: Any) -> None:
    record, _ = run(qwen3, [LIST_CALL, "done"])
    assert TrajectoryRecord.from_dict(record.to_dict()) == record


def test_a_later_step_goes_on_in_the_same_conversation(qwen3: Any) -> None:
    """A multi-step task's second prompt is a user message after the first step's last turn:
    not trained on, every step with the turn budget of a whole task, one aligned record."""
    from bureau.audit.tito import check_tokens

    sampler = ScriptedSampler(qwen3, [LIST_CALL, "Two files.", LIST_CALL, "Still two."])
    tools = FakeTools({"fs_list": lambda a: "report.pdf\nmodel.xlsx"})
    renderer = Renderer(qwen3)
    episode = Episode(
        sampler, renderer, tools, HarnessConfig(max_turns=2), task_name="t", model="m"
    )
    first = asyncio.run(episode.run("Count the files.", step="count"))
    assert first.stop_reason == "answered" and first.steps == [{"name": "count", "first_turn": 0}]
    second = asyncio.run(episode.resume("List them again.", "again"))
    # Four turns under max_turns = 2: the budget holds per step.
    assert second.stop_reason == "answered" and second.num_turns == 4
    assert second.steps == [
        {"name": "count", "first_turn": 0},
        {"name": "again", "first_turn": 2},
    ]
    check_alignment(second)
    assert check_tokens(second, renderer) is None  # what was sampled is what is stored
    # The second prompt closes the first step's last turn, and the engine saw exactly that.
    step_prompt = second.turns[1].observation_ids
    assert qwen3.decode(step_prompt).count("List them again.") == 1
    assert sampler.prompts[2] == second.token_ids[: len(sampler.prompts[2])]
    assert sampler.prompts[2][-len(step_prompt) :] == step_prompt
    roles = [m["role"] for m in second.messages]
    first_step, second_step = ["system", "user", "assistant", "tool", "assistant"], roles[5:]
    assert roles[:5] == first_step and second_step == ["user", "assistant", "tool", "assistant"]
    assert second.messages[5]["content"] == "List them again."
