"""The renderer: the one place where messages become token ids.

The first prompt (system prompt, tool list, task instruction) is rendered with the chat template
and encoded once. After that the token list only grows: sampled ids are appended exactly as the
engine returned them, and every observation (tool results, notices) is tokenized by the
fixed-base method. A fixed dummy conversation ending in an assistant turn is rendered with and
without the new messages, and the difference of the two encodings is the observation's ids. The
dummy conversation ends in an assistant turn on purpose: tool messages render differently after
an assistant than after another tool message, and in a real trajectory they always follow the
assistant turn that called them.

The template closes each turn with `<|im_end|>` and a separator (`\\n`). The engine samples the
`<|im_end|>` (it is a stop token), never the separator, so the separator belongs to the
observation that follows; a turn that stopped on anything else is closed by the observation
(`<|im_end|>` plus separator) so that the context stays well-formed ChatML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a renderer is handed a tokenizer: importing transformers here is not needed
    from transformers import PreTrainedTokenizerBase

Message = dict[str, Any]

_BASE: list[Message] = [
    {"role": "system", "content": "."},
    {"role": "user", "content": "."},
    {"role": "assistant", "content": "."},
]


def tool_schema(name: str, description: str | None, input_schema: dict[str, Any]) -> Message:
    """An MCP tool as the OpenAI-style function entry that the chat template lists."""
    return {
        "type": "function",
        "function": {"name": name, "description": description or "", "parameters": input_schema},
    }


class Renderer:
    """Messages to token ids for one tokenizer and chat template (Qwen3-style ChatML)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, *, enable_thinking: bool = True):
        self.tokenizer = tokenizer
        self.enable_thinking = enable_thinking
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if not isinstance(im_end, int) or im_end == tokenizer.unk_token_id:
            raise ValueError("the tokenizer has no <|im_end|> token: not a ChatML tokenizer")
        self.im_end_id: int = im_end
        self._base_ids = self.encode(self.render(_BASE, add_generation_prompt=False))
        last = max(i for i, t in enumerate(self._base_ids) if t == self.im_end_id)
        self.separator_ids: list[int] = self._base_ids[last + 1 :]

    def render(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Message] | None = None,
        add_generation_prompt: bool,
    ) -> str:
        text = self.tokenizer.apply_chat_template(
            list(messages),
            tools=list(tools) if tools else None,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            enable_thinking=self.enable_thinking,
        )
        if not isinstance(text, str):
            raise TypeError(f"the chat template rendered {type(text).__name__}, not text")
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def prompt_ids(self, messages: Sequence[Message], tools: Sequence[Message] = ()) -> list[int]:
        """The first prompt, ending with the generation prompt of the assistant's first turn."""
        return self.encode(self.render(messages, tools=tools, add_generation_prompt=True))

    def observation_ids(
        self, messages: Sequence[Message], *, after_ids: Sequence[int]
    ) -> list[int]:
        """The ids of `messages` and the next generation prompt, to append after `after_ids`.

        `after_ids` is the sampled turn they answer: if it ended with `<|im_end|>` only the
        separator is added in front; otherwise `<|im_end|>` and the separator close the turn.
        """
        if not messages:
            raise ValueError("an observation needs at least one message")
        full = self.encode(self.render([*_BASE, *messages], add_generation_prompt=True))
        if full[: len(self._base_ids)] != self._base_ids:
            raise AssertionError(
                "the chat template renders the fixed base differently when messages follow it"
            )
        closing = [] if after_ids and after_ids[-1] == self.im_end_id else [self.im_end_id]
        return [*closing, *self.separator_ids, *full[len(self._base_ids) :]]

    def naive_ids(self, messages: Sequence[Message], tools: Sequence[Message] = ()) -> list[int]:
        """What a re-tokenizing pipeline trains on: the whole conversation rendered and encoded."""
        return self.encode(self.render(messages, tools=tools, add_generation_prompt=False))
