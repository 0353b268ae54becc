"""System errors: failures of the machinery, never of the model.

A trial that fails for one of these reasons carries no reward: it is masked from training and
reported. Every boundary (sandbox, tool server, verifier, engine, judge) raises `SystemError_`
with the kind that names its source, so a report can count failures by cause.
"""

from __future__ import annotations

from enum import StrEnum


class SystemErrorKind(StrEnum):
    """Where a trial failed without a verdict, and whose failure that is.

    A policy under RL learns anything that turns a 0 into a masked trial, so each kind says
    whether the agent can cause it. The agent's kinds (`AGENT_KINDS` and, once the agent has
    started, `AGENT_PHASE_KINDS` in `bureau.trials.attempt`) are graded failures with
    reward 0 in training and evaluation alike; only the rest are masked and reported.
    """

    sandbox_start_timeout = "sandbox_start_timeout"
    """The sandbox did not start in time. Before the agent exists: the machinery's."""
    sandbox_start_failed = "sandbox_start_failed"
    """The sandbox could not be created (bwrap, Docker). The machinery's."""
    sandbox_crashed = "sandbox_crashed"
    """The sandbox died under a host operation (upload, download, exec). The agent's processes
    are confined by rlimits, a pid limit, a memory cgroup and tmpfs quotas that fail its own
    calls instead (`tests/sandbox/test_sandbox_attacks.py`), so this is the machinery's."""
    sandbox_unavailable = "sandbox_unavailable"
    """No runtime on this machine (bubblewrap missing, no Docker daemon). The machinery's."""
    tool_server_failed = "tool_server_failed"
    """An MCP tool server did not start, or died or hung. Before the agent runs it is the
    machinery's; after, the agent's own calls did it (a crashed or hung tool): reward 0."""
    agent_timeout = "agent_timeout"
    """The agent ran past its time limit. The agent's (slow tools and long outputs are its
    choices): reward 0."""
    agent_error = "agent_error"
    """The agent raised (for the harness agent: an error in its own turn handling). The
    agent's: reward 0."""
    verifier_timeout = "verifier_timeout"
    """tests/test.sh ran past its timeout. The verifier runs in its own storage and /tmp with
    capped answer and office-file sizes, and a deliverable that takes more than
    `bureau.grading.workspace.MAX_OPEN_SECONDS` to open fails its criterion, so the agent's
    files cannot fill or stall it: the machinery's."""
    verifier_error = "verifier_error"
    """The verifier could not run or its output could not be read. The machinery's (the
    agent's files are read with caps and a malformed deliverable fails its criterion). Where
    the task's oracle then passes the same verifier, the agent's output broke it: the trial is
    graded 0 instead (`bureau.trials.defects`)."""
    reward_file_missing = "reward_file_missing"
    """The verifier finished without writing a reward. The reward files are emptied and owned
    by the verifier phase, out of the agent's reach, so this is the task's or bureau's bug."""
    upload_failed = "upload_failed"
    """Task files or tests could not be copied into the sandbox. The machinery's."""
    engine_error = "engine_error"
    """The inference engine answered with an error. The machinery's."""
    engine_timeout = "engine_timeout"
    """The engine gave no answer in time. The machinery's (generation is bounded by the
    harness's token limits, so a long answer ends as a truncation, not a timeout)."""
    engine_unavailable = "engine_unavailable"
    """No engine could be reached (stopped, restarting, not started). The machinery's."""
    judge_unavailable = "judge_unavailable"
    """The LLM judge gave no answer after its retries (rate limits, server errors, timeouts,
    no connection, every key refused). The machinery's. A judge that answers without a valid
    verdict is not this: the agent's text may have caused it, so the criterion fails."""
    storage_full = "storage_full"
    """The host's trial folder ran out of space (ENOSPC, EDQUOT) while bureau wrote to it. What
    reaches the trial folder from the agent is bounded (its record by the token limits), and
    the files it hands to a separate verifier are left out when they do not fit, never a
    system error; so this is the machinery's, and the trial is retried."""
    internal_error = "internal_error"
    """A bug in bureau (for example a completed trial without a reward). The machinery's."""


class BureauSystemError(Exception):
    """A failure attributed to one part of the system, with its kind."""

    def __init__(self, kind: SystemErrorKind, message: str) -> None:
        super().__init__(f"{kind.value}: {message}")
        self.kind = kind
        self.message = message
