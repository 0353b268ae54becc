"""Evaluation: Pass@1, mean reward and pass@k of a model on a dataset, with intervals.

`stats` holds the estimators (Wilson, percentile bootstrap, unbiased pass@k), `report` turns
neutral per-attempt rows into an `EvalReport` (shared with the RL loop), `attempts` decides for
each finished trial whether the agent failed (a graded zero) or the machinery did (excluded),
and `run` drives `bureau eval` (imported lazily: it needs the harness and its extras).
"""

from bureau.evaluation.attempts import agent_is_to_blame, attempt_from_trial, verifier_passed
from bureau.evaluation.report import (
    AttemptRow,
    EvalReport,
    GroupReport,
    MeanEstimate,
    RateEstimate,
    TaskReport,
    summarize_attempts,
)
from bureau.evaluation.stats import bootstrap_mean_interval, k_levels, pass_at_k, wilson_interval

__all__ = [
    "AttemptRow",
    "EvalReport",
    "GroupReport",
    "MeanEstimate",
    "RateEstimate",
    "TaskReport",
    "agent_is_to_blame",
    "attempt_from_trial",
    "bootstrap_mean_interval",
    "k_levels",
    "pass_at_k",
    "summarize_attempts",
    "verifier_passed",
    "wilson_interval",
]
