"""The renderer and the token state, with literal Qwen3 token ids."""

from __future__ import annotations

from typing import Any

import pytest

from bureau.harness.parse import parse_assistant
from bureau.harness.render import Renderer
from bureau.harness.state import TokenState

IM_START, IM_END, NL, USER, ASSISTANT = 151644, 151645, 198, 872, 77091
TOOL_RESPONSE, END_TOOL_RESPONSE = 151665, 151666


def test_token_state_masks_sampled_ids_only() -> None:
    state = TokenState()
    state.observe([1, 2, 3])
    state.sample([10, 11], [-0.1, -0.2], [4, 4])
    state.observe([5])
    assert state.token_ids == [1, 2, 3, 10, 11, 5]
    assert state.loss_mask == [0, 0, 0, 1, 1, 0]
    assert state.sampler_logprobs == [0.0, 0.0, 0.0, -0.1, -0.2, 0.0]
    assert state.weight_versions == [-1, -1, -1, 4, 4, -1]
    with pytest.raises(ValueError, match="2 ids, 1 logprobs"):
        state.sample([1, 2], [0.0], [0, 0])


def test_prompt_ids_literal(qwen3: Any) -> None:
    r = Renderer(qwen3)
    ids = r.prompt_ids([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    # <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n
    assert ids == [
        IM_START, 8948, NL, 50, IM_END, NL, IM_START, USER, NL, 52, IM_END, NL,
        IM_START, ASSISTANT, NL,
    ]  # fmt: skip


def test_observation_after_im_end_adds_only_the_separator(qwen3: Any) -> None:
    r = Renderer(qwen3)
    assert r.separator_ids == [NL]
    ids = r.observation_ids([{"role": "tool", "content": "ok"}], after_ids=[5, IM_END])
    # \n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n
    assert ids == [
        NL, IM_START, USER, NL, TOOL_RESPONSE, NL, 562, NL, END_TOOL_RESPONSE, IM_END, NL,
        IM_START, ASSISTANT, NL,
    ]  # fmt: skip


def test_observation_closes_a_turn_that_did_not_stop_on_im_end(qwen3: Any) -> None:
    r = Renderer(qwen3)
    ids = r.observation_ids([{"role": "user", "content": "hi"}], after_ids=[5])
    assert ids == [IM_END, NL, IM_START, USER, NL, 6023, IM_END, NL, IM_START, ASSISTANT, NL]


def test_consecutive_tool_results_share_one_user_turn(qwen3: Any) -> None:
    r = Renderer(qwen3)
    ids = r.observation_ids(
        [{"role": "tool", "content": "ok"}, {"role": "tool", "content": "ok"}], after_ids=[IM_END]
    )
    assert ids.count(IM_START) == 2  # one user turn, then the generation prompt
    assert ids.count(TOOL_RESPONSE) == 2


def test_fixed_base_concatenation_equals_full_render(qwen3: Any) -> None:
    """Prompt + sampled turn + observation = the template's rendering of the conversation,
    when the sampled ids happen to be the canonical encoding of the turn."""
    r = Renderer(qwen3)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List the files."},
    ]
    prompt = r.prompt_ids(messages)
    turn_text = '<tool_call>\n{"name": "fs_list", "arguments": {"path": "."}}\n</tool_call>'
    sampled = [*r.encode(turn_text), IM_END]
    tool = {"role": "tool", "content": "a.pdf\nb.xlsx"}
    observation = r.observation_ids([tool], after_ids=sampled)
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "fs_list", "arguments": {"path": "."}}}],
    }
    full = r.encode(r.render([*messages, assistant, tool], add_generation_prompt=True))
    assert prompt + sampled + observation == full


def test_parse_assistant() -> None:
    turn = parse_assistant(
        '<think>\nplan\n</think>\n\nLooking.\n<tool_call>\n{"name": "fs_list", '
        '"arguments": {"path": "."}}\n</tool_call>\n<tool_call>{"name": "x", "arguments": '
        '"{\\"a\\": 1}"}</tool_call>'
    )
    assert turn.error is None
    assert turn.reasoning == "plan"
    assert turn.content == "Looking."
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("fs_list", {"path": "."}),
        ("x", {"a": 1}),
    ]
    assert parse_assistant("The answer is 4.").tool_calls == []
    for text, error in [
        ('<tool_call>{"name": "a"', "opened 1 time(s) but closed 0"),
        ("<tool_call>{name: a}</tool_call>", "invalid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'missing "name"'),
        ('<tool_call>{"name": "a", "arguments": [1]}</tool_call>', "must be an object"),
        ("<tool_call>[1]</tool_call>", "expected a JSON object"),
        ("done</tool_call>", "without a matching"),
    ]:
        parsed = parse_assistant(text)
        assert parsed.error is not None and error in parsed.error, (text, parsed.error)
