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

from bureau.evaluation.report import AttemptRow
from bureau.trials.attempt import (
    AGENT_KINDS,
    AGENT_PHASE_KINDS,
    PASS_KEY,
    AttemptOutcome,
    agent_is_to_blame,
    outcome_of,
    verifier_passed,
)
from bureau.trials.result import TrialResult

__all__ = [
    "AGENT_KINDS",
    "AGENT_PHASE_KINDS",
    "PASS_KEY",
    "agent_is_to_blame",
    "attempt_from_trial",
    "row_of",
    "verifier_passed",
]


def row_of(
    outcome: AttemptOutcome,
    domain: str,
    template: str | None = None,
    *,
    unseen_kind: bool | None = None,
) -> AttemptRow:
    """The eval row of one attempt (`bureau.trials.attempt` decided who failed)."""
    name = outcome.result.task_name
    if outcome.error is not None:
        kind = outcome.error.value
        return AttemptRow(
            name, domain, None, None, system_error=kind, template=template, unseen_kind=unseen_kind
        )
    failure = outcome.agent_failure.value if outcome.agent_failure is not None else None
    reward = outcome.reward if outcome.reward is not None else 0.0
    return AttemptRow(
        name,
        domain,
        bool(outcome.passed),
        reward,
        agent_failure=failure,
        template=template,
        unseen_kind=unseen_kind,
    )


def attempt_from_trial(result: TrialResult, domain: str, template: str | None = None) -> AttemptRow:
    """The eval row of one finished trial, with no trajectory to join."""
    return row_of(outcome_of(result, None), domain, template)
