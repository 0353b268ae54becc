"""The agent loop: sample, parse tool calls, call tools, append results, repeat.

It talks to the engine in token ids only (`Sampler.complete(prompt_ids, ...)`) and to the tools
through a `ToolBackend` (the trial's MCP servers, or a fake in tests). It stops when the model
answers without a tool call, or at the turn limit, the sampled-token budget, the end of the
context, after too many unparsable tool calls in a row, at the deadline, or on a system error
(which it records and leaves to the caller to raise).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import Field

from bureau.config import StrictModel
from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.harness.parse import ParsedTurn, ToolCall, parse_assistant
from bureau.harness.render import Message, Renderer
from bureau.harness.state import TokenState
from bureau.inference.client import Completion, Sampler, SamplingParams
from bureau.records import StopReason, ToolCallRecord, TrajectoryRecord, TurnRecord

T = TypeVar("T")


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of turn `turn` (0-based) of the trajectory seeded `seed`.

    Engines seed a fresh generator per seeded request, so one seed for every turn would replay
    the same random draws turn after turn. Turn 0 keeps `seed`; later turns get a 63-bit hash
    of (seed, turn), the same in every process.
    """
    if turn == 0:
        return seed
    digest = hashlib.blake2b(f"{seed}:{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


DEFAULT_SYSTEM_PROMPT = (
    "You are a careful analyst working inside a company's files. Use the tools to read the "
    "documents, spreadsheets, slides, emails and chats in your working directory, and follow "
    "the task's instructions exactly. Call one or more tools per turn; when the task is done, "
    "reply without any tool call."
)


class HarnessConfig(StrictModel):
    """Limits and sampling settings of the agent loop."""

    max_turns: int = Field(30, ge=1, description="Sampled turns before stopping.")
    max_tokens: int = Field(16384, ge=1, description="Sampled tokens over the whole trajectory.")
    max_tokens_per_turn: int = Field(2048, ge=1, description="Sampled tokens in one turn.")
    context_length: int = Field(32768, ge=64, description="The engine's context, in tokens.")
    max_parse_retries: int = Field(
        2, ge=0, description="Unparsable tool calls in a row that are answered with a correction."
    )
    max_tool_output_chars: int = Field(
        8000, ge=200, description="A longer tool result keeps its head and tail."
    )
    context_warning_fraction: float = Field(
        0.2, ge=0, lt=1, description="Warn the model once when less context than this remains."
    )
    tool_timeout_s: float = Field(120.0, gt=0, description="One tool call.")
    max_tool_restarts: int = Field(
        3,
        ge=0,
        description="Tool servers restarted after one died or hung under a call (the model "
        "reads an error for that call); past this, the trial ends.",
    )
    tool_restart_timeout_s: float = Field(60.0, gt=0, description="Starting a tool server.")
    engine_retries: int = Field(
        3, ge=0, description="Resends of an engine request that got no answer (5xx, timeout)."
    )
    engine_retry_backoff_s: float = Field(0.5, ge=0, description="Wait before the first resend.")
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int | None = Field(
        None,
        description="Sampling seed of the trajectory, where the engine supports one; each turn "
        "samples with its own seed drawn from it (`turn_seed`).",
    )
    enable_thinking: bool = Field(True, description="Render Qwen3's thinking mode.")
    tool_prefixes: list[str] | None = Field(
        None, description="Expose only tools whose names start with one of these (fs_, pdf_...)."
    )
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


@dataclass
class ToolOutput:
    text: str
    is_error: bool
    failed: bool = False
    """The tool server died or hung under this call and was restarted (`tool_failed`)."""


class ToolBackend(Protocol):
    def specs(self) -> list[Message]:
        """The tools, as OpenAI-style function entries."""
        ...

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutput:
        """Call one tool; raise `BureauSystemError` when the tool machinery itself fails."""
        ...


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of `text` within about `limit` characters, saying what was cut."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}", True


def correction(error: str) -> str:
    return (
        f"Your last tool call could not be read: {error}. Write each call as "
        '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}'
        "\n</tool_call>, or reply without a tool call when you are done."
    )


CONTEXT_NOTICE_START = "Notice: only about"


def context_notice(remaining: int) -> str:
    return (
        f"{CONTEXT_NOTICE_START} {remaining} tokens of context remain. Stop exploring and give "
        "your final answer now, in the form the task asks for."
    )


def harness_events(record: TrajectoryRecord) -> dict[str, int]:
    """How often each harness fix had something to act on in one trajectory: unparsable tool
    calls (each answered with a correction when regeneration is on), whether it ended on them,
    tool results past the output limit, and context notices given."""
    return {
        "unparsable calls": sum(1 for t in record.turns if t.parse_error),
        "ended on unparsable calls": int(record.stop_reason == "parse_failures"),
        "truncated results": sum(1 for c in record.tool_calls if c.truncated),
        "context notices": sum(
            1
            for m in record.messages
            if m.get("role") == "user"
            and str(m.get("content", "")).startswith(CONTEXT_NOTICE_START)
        ),
    }


class Episode:
    """One trajectory. `run()` returns its record; it never raises for a model's mistake."""

    def __init__(
        self,
        sampler: Sampler,
        renderer: Renderer,
        tools: ToolBackend,
        config: HarnessConfig,
        *,
        task_name: str,
        model: str,
        deadline: float | None = None,
        trajectory_id: str | None = None,
    ) -> None:
        self.sampler = sampler
        self.renderer = renderer
        self.tools = tools
        self.config = config
        self.task_name = task_name
        self.model = model
        self.deadline = deadline
        self.trajectory_id = trajectory_id or uuid.uuid4().hex
        self.state = TokenState()
        self.messages: list[Message] = []
        self.turns: list[TurnRecord] = []
        self.calls: list[ToolCallRecord] = []
        self.llm_time_s = 0.0
        self.tool_time_s = 0.0
        self.error: BureauSystemError | None = None
        self._warned = False
        self.prompt_ids: list[int] = []
        self._first_turn = 0
        """Where the current prompt's turns start: `max_turns` and `max_tokens` hold per
        prompt, so each step of a multi-step task gets the budget of a whole task."""
        self.steps: list[dict[str, Any]] = []
        specs = tools.specs()
        prefixes = config.tool_prefixes
        self.specs = [
            s
            for s in specs
            if prefixes is None or s["function"]["name"].startswith(tuple(prefixes))
        ]
        self.tool_names = {s["function"]["name"] for s in self.specs}
        stops = [self.renderer.im_end_id]
        eos = renderer.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        if isinstance(eos, int) and eos != renderer.tokenizer.unk_token_id:
            stops.append(eos)
        self.stop_ids = tuple(stops)

    def _remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    async def _bounded(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` within the time left before the deadline (TimeoutError past it)."""
        remaining = self._remaining_s()
        if remaining is not None and remaining <= 0:
            coro.close()
            raise TimeoutError
        return await asyncio.wait_for(coro, remaining)

    async def run(self, instruction: str, step: str | None = None) -> TrajectoryRecord:
        """The episode on `instruction`; `step` names it when it is the first step of a
        multi-step task (then `resume` runs the next ones)."""
        started = time.perf_counter()
        if step is not None:
            self.steps.append({"name": step, "first_turn": 0})
        self.messages = [
            {"role": "system", "content": self.config.system_prompt},
            {"role": "user", "content": instruction},
        ]
        self.prompt_ids = self.renderer.prompt_ids(self.messages, self.specs)
        self.state.observe(self.prompt_ids)
        return await self._episode(started)

    async def resume(self, instruction: str, step: str) -> TrajectoryRecord:
        """The next step of a multi-step task, in the same conversation: its prompt is a user
        message after the last turn (not trained on), and the record covers every step so
        far, each starting at its `first_turn`."""
        started = time.perf_counter()
        message: Message = {"role": "user", "content": instruction}
        after = self.turns[-1].completion_ids if self.turns else self.prompt_ids
        ids = self.renderer.observation_ids([message], after_ids=after)
        self.steps.append({"name": step, "first_turn": len(self.turns)})
        self._first_turn = len(self.turns)
        if len(self.state) + len(ids) >= self.config.context_length:
            return self._record(StopReason.context_exhausted, started)
        self.state.observe(ids)
        self.messages.append(message)
        if self.turns:
            turn = self.turns[-1]
            turn.observation_ids = [*(turn.observation_ids or []), *ids]
            turn.observation_messages = [*(turn.observation_messages or []), message]
        return await self._episode(started)

    async def _episode(self, started: float) -> TrajectoryRecord:
        try:
            stop = await self._loop()
        except TimeoutError:
            stop = StopReason.timeout
        except BureauSystemError as exc:
            self.error = exc
            stop = StopReason.system_error
        return self._record(stop, started)

    def _record(self, stop: StopReason, started: float) -> TrajectoryRecord:
        return TrajectoryRecord(
            trajectory_id=self.trajectory_id,
            task_name=self.task_name,
            model=self.model,
            prompt_ids=self.prompt_ids,
            token_ids=self.state.token_ids,
            loss_mask=self.state.loss_mask,
            sampler_logprobs=self.state.sampler_logprobs,
            weight_versions=self.state.weight_versions,
            messages=self.messages,
            tools=self.specs,
            turns=self.turns,
            tool_calls=self.calls,
            stop_reason=stop.value,
            llm_time_s=round(self.llm_time_s, 4),
            tool_time_s=round(self.tool_time_s, 4),
            total_time_s=round(time.perf_counter() - started, 4),
            system_error=str(self.error) if self.error else None,
            steps=[dict(step) for step in self.steps],
        )

    async def _loop(self) -> StopReason:
        cfg = self.config
        failures = 0
        while True:
            if len(self.turns) - self._first_turn >= cfg.max_turns:
                return StopReason.max_turns
            sampled = sum(len(t.completion_ids) for t in self.turns[self._first_turn :])
            room = cfg.context_length - len(self.state)
            if cfg.max_tokens - sampled <= 0:
                return StopReason.max_tokens
            if room <= 0:
                return StopReason.context_exhausted
            budget = min(cfg.max_tokens_per_turn, room, cfg.max_tokens - sampled)
            completion = await self._sample(budget)
            turn = self._record_turn(completion)
            ids = completion.token_ids
            text = self.renderer.decode(ids[:-1] if ids and ids[-1] in self.stop_ids else ids)
            parsed = parse_assistant(text, call_id_prefix=f"call_{len(self.turns)}")
            self.messages.append(_assistant_message(parsed))
            if completion.finish_reason == "abort":
                raise BureauSystemError(SystemErrorKind.engine_error, "the engine aborted the turn")
            if completion.finish_reason == "length":
                return StopReason.context_exhausted if budget == room else StopReason.max_tokens
            if parsed.error is not None:
                turn.parse_error = parsed.error
                failures += 1
                if failures > cfg.max_parse_retries:
                    return StopReason.parse_failures
                observation: list[Message] = [{"role": "user", "content": correction(parsed.error)}]
            elif not parsed.tool_calls:
                return StopReason.answered
            else:
                failures = 0
                observation = [await self._call(call) for call in parsed.tool_calls]
            if not self._observe(turn, observation):
                return StopReason.context_exhausted

    async def _sample(self, budget: int) -> Completion:
        cfg = self.config
        params = SamplingParams(
            max_tokens=budget,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            stop_token_ids=self.stop_ids,
            seed=None if cfg.seed is None else turn_seed(cfg.seed, len(self.turns)),
        )
        completion = await self._bounded(
            self.sampler.complete(list(self.state.token_ids), params, session_id=self.trajectory_id)
        )
        self.llm_time_s += completion.latency_s
        if not completion.token_ids:
            raise BureauSystemError(SystemErrorKind.engine_error, "the engine sampled no token")
        return completion

    def _record_turn(self, completion: Completion) -> TurnRecord:
        self.state.sample(completion.token_ids, completion.logprobs, completion.weight_versions)
        turn = TurnRecord(
            completion_ids=list(completion.token_ids),
            completion_logprobs=list(completion.logprobs),
            weight_versions=list(completion.weight_versions),
            finish_reason=completion.finish_reason,
            engine=completion.engine,
            latency_s=round(completion.latency_s, 4),
        )
        self.turns.append(turn)
        return turn

    def _observe(self, turn: TurnRecord, messages: list[Message]) -> bool:
        """Append `messages` (and, once, the context notice); False when they do not fit."""
        cfg = self.config
        ids = self.renderer.observation_ids(messages, after_ids=turn.completion_ids)
        remaining = cfg.context_length - len(self.state) - len(ids)
        if not self._warned and remaining < cfg.context_warning_fraction * cfg.context_length:
            self._warned = True
            messages = [*messages, {"role": "user", "content": context_notice(max(remaining, 0))}]
            ids = self.renderer.observation_ids(messages, after_ids=turn.completion_ids)
        if len(self.state) + len(ids) >= cfg.context_length:
            return False
        self.state.observe(ids)
        self.messages.extend(messages)
        turn.observation_ids = ids
        turn.observation_messages = messages
        return True

    async def _call(self, call: ToolCall) -> Message:
        turn = len(self.turns)
        started = time.perf_counter()
        if call.name not in self.tool_names:
            text = (
                f"unknown tool {call.name!r}; the tools are: {', '.join(sorted(self.tool_names))}"
            )
            outcome, truncated = "unknown_tool", False
        else:
            try:
                output = await self._bounded(
                    self.tools.call(call.name, call.arguments, self.config.tool_timeout_s)
                )
            except BureauSystemError:
                self.calls.append(
                    ToolCallRecord(
                        turn, call.id, call.name, call.arguments, "system_error",
                        round(time.perf_counter() - started, 4), 0, False,
                    )
                )  # fmt: skip
                raise
            text, truncated = truncate(output.text, self.config.max_tool_output_chars)
            outcome = "tool_failed" if output.failed else "tool_error" if output.is_error else "ok"
        latency = time.perf_counter() - started
        self.tool_time_s += latency
        self.calls.append(
            ToolCallRecord(
                turn, call.id, call.name, call.arguments, outcome, round(latency, 4),
                len(text), truncated,
            )
        )  # fmt: skip
        return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}


def _assistant_message(parsed: ParsedTurn) -> Message:
    message: Message = {"role": "assistant", "content": parsed.content}
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    if parsed.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in parsed.tool_calls
        ]
    return message


def tool_names(specs: Sequence[Message]) -> list[str]:
    return [s["function"]["name"] for s in specs]
