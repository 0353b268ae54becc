"""From a finished trial to an eval attempt: who failed, the agent or the machinery?

An eval must not let a policy turn a failure into an exclusion. So a trial without a reward is
excluded only when the machinery failed on its own: the sandbox did not start, the engine or
the verifier broke, the workspace could not be uploaded, bureau had a bug. Everything the agent
controls is a graded failure with reward 0:

- `agent_timeout` and `agent_error`: the agent overran its time or crashed;
- `tool_server_failed` once the agent has started: a tool that hangs or dies under the agent's
  own calls (the agent crashed its tool). Before the agent runs, the same kind means the server
  never came up, which is the machinery's failure.

The verdict of a graded trial is the verifier's own `pass` flag in reward.json (1 only when every
rubric criterion passed); a reward of 1.0 is only the fallback for verifiers that write no such
flag (plain Harbor tasks with reward.txt).
"""

from __future__ import annotations

from collections.abc import Mapping

from bureau.errors import SystemErrorKind
from bureau.evaluation.report import AttemptRow
from bureau.trials.result import TrialResult

PASS_KEY = "pass"

AGENT_KINDS = frozenset({SystemErrorKind.agent_timeout.value, SystemErrorKind.agent_error.value})
"""Failures that are the agent's wherever they happen."""

AGENT_PHASE_KINDS = frozenset({SystemErrorKind.tool_server_failed.value})
"""Failures that are the agent's once its run has started (before, the machinery's)."""


def verifier_passed(values: Mapping[str, float], reward: float) -> bool:
    """The verdict in a verifier's reward values: its `pass` flag, else `reward >= 1.0`."""
    if PASS_KEY in values:
        return values[PASS_KEY] == 1
    return reward >= 1.0


def agent_is_to_blame(status: str, agent_started: bool) -> bool:
    """Whether a trial's system-error `status` is the agent's failure (see module docstring)."""
    return status in AGENT_KINDS or (agent_started and status in AGENT_PHASE_KINDS)


def attempt_from_trial(result: TrialResult, domain: str, template: str | None = None) -> AttemptRow:
    """The eval row of one finished trial."""
    name = result.task_name
    if result.system_error:
        if agent_is_to_blame(result.status, result.agent_execution.started_at is not None):
            return AttemptRow(
                name, domain, False, 0.0, agent_failure=result.status, template=template
            )
        return AttemptRow(name, domain, None, None, system_error=result.status, template=template)
    if result.reward is None:  # `completed` without a reward is a bug in bureau, not a zero
        error = SystemErrorKind.internal_error.value
        return AttemptRow(name, domain, None, None, system_error=error, template=template)
    values = (result.verifier_result or {}).get("rewards") or {}
    passed = verifier_passed(values, result.reward)
    return AttemptRow(name, domain, passed, result.reward, template=template)
