"""Reading an assistant turn: reasoning, text, and Qwen3-style tool calls.

A tool call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (with optional
whitespace inside the tags). A turn whose tool call does not parse (no closing tag, invalid
JSON, no name, arguments that are not an object) is a parse failure: the harness tells the model
what was wrong and lets it try again. A turn with no tool call at all is the model's final
answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedTurn:
    content: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None
    """Why the turn's tool calls could not be read; None when they could (or there were none)."""


def parse_assistant(text: str, *, call_id_prefix: str = "call") -> ParsedTurn:
    """Split `text` (the decoded turn, without its stop token) into its parts."""
    reasoning = None
    match = _THINK.match(text)
    if match:
        reasoning = match.group(1).strip("\n")
        text = text[match.end() :]
    content = _CALL.sub("", text).strip()
    if text.count(OPEN) != text.count(CLOSE):
        return ParsedTurn(content, reasoning, error=_unbalanced(text))
    calls: list[ToolCall] = []
    for i, body in enumerate(_CALL.findall(text)):
        call, error = _read_call(body, f"{call_id_prefix}_{i}")
        if error is not None:
            return ParsedTurn(content, reasoning, error=f"tool call {i + 1}: {error}")
        assert call is not None
        calls.append(call)
    return ParsedTurn(content, reasoning, calls)


def _unbalanced(text: str) -> str:
    opened, closed = text.count(OPEN), text.count(CLOSE)
    if opened > closed:
        return f"{OPEN} opened {opened} time(s) but closed {closed} time(s)"
    return f"{CLOSE} without a matching {OPEN}"


def _read_call(body: str, call_id: str) -> tuple[ToolCall | None, str | None]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {type(data).__name__}"
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return None, 'missing "name" (a string)'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None, f'"arguments" of {name} is a string that is not a JSON object'
    if not isinstance(arguments, dict):
        return None, f'"arguments" of {name} must be an object, got {type(arguments).__name__}'
    return ToolCall(call_id, name, arguments), None
