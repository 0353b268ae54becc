"""System errors: failures of the machinery, never of the model.

A trial that fails for one of these reasons carries no reward: it is masked from training and
reported. Every boundary (sandbox, tool server, verifier, engine, judge) raises `SystemError_`
with the kind that names its source, so a report can count failures by cause.
"""

from __future__ import annotations

from enum import StrEnum


class SystemErrorKind(StrEnum):
    sandbox_start_timeout = "sandbox_start_timeout"
    sandbox_start_failed = "sandbox_start_failed"
    sandbox_crashed = "sandbox_crashed"
    sandbox_unavailable = "sandbox_unavailable"
    tool_server_failed = "tool_server_failed"
    agent_timeout = "agent_timeout"
    agent_error = "agent_error"
    verifier_timeout = "verifier_timeout"
    verifier_error = "verifier_error"
    reward_file_missing = "reward_file_missing"
    upload_failed = "upload_failed"
    engine_error = "engine_error"
    engine_timeout = "engine_timeout"
    engine_unavailable = "engine_unavailable"
    internal_error = "internal_error"


class BureauSystemError(Exception):
    """A failure attributed to one part of the system, with its kind."""

    def __init__(self, kind: SystemErrorKind, message: str) -> None:
        super().__init__(f"{kind.value}: {message}")
        self.kind = kind
        self.message = message
