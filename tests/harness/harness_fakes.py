"""Fakes for the harness: a scripted engine that returns chosen token ids, and in-memory tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from bureau.harness.loop import ToolOutput
from bureau.harness.render import Message, tool_schema
from bureau.inference.client import Completion, SamplingParams

IM_END = 151645


class ScriptedSampler:
    """Answers turn i with `script[i]`: text (encoded, then `<|im_end|>`) or a list of ids.

    Records each prompt it was given; a `Completion` in the script is returned as it is.
    """

    def __init__(
        self,
        tokenizer: Any,
        script: Sequence[str | list[int] | Completion | Exception],
        *,
        logprob: float = -0.5,
        version: int = 3,
        delay_s: float = 0.0,
    ) -> None:
        self.tokenizer = tokenizer
        self.script = list(script)
        self.logprob = logprob
        self.version = version
        self.delay_s = delay_s
        self.prompts: list[list[int]] = []
        self.params: list[SamplingParams] = []

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.prompts.append(list(prompt_ids))
        self.params.append(params)
        item = self.script[len(self.prompts) - 1]
        if isinstance(item, Exception):
            raise item
        if isinstance(item, Completion):
            return item
        if isinstance(item, str):
            ids = [*self.tokenizer.encode(item, add_special_tokens=False), IM_END]
        else:
            ids = list(item)
        ids = ids[: params.max_tokens]
        finish = "stop" if ids[-1] in params.stop_token_ids else "length"
        return Completion(
            token_ids=ids,
            logprobs=[self.logprob] * len(ids),
            finish_reason=finish,
            weight_versions=[self.version] * len(ids),
            engine="scripted",
            latency_s=0.01,
        )


class FakeTools:
    """Tools answered by Python functions: `name -> f(arguments) -> text` (raise for an error)."""

    def __init__(self, functions: dict[str, Callable[[dict[str, Any]], str]]) -> None:
        self.functions = functions
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def specs(self) -> list[Message]:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        return [tool_schema(name, f"the {name} tool", schema) for name in self.functions]

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutput:
        self.calls.append((name, arguments))
        try:
            return ToolOutput(self.functions[name](arguments), False)
        except Exception as exc:
            return ToolOutput(f"{type(exc).__name__}: {exc}", True)
