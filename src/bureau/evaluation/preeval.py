"""Pre-evaluation: the failure taxonomy of a run over a whole dataset, and the gate on it.

Before training, the untrained policy runs over every training task at training concurrency
(the same trials, harness and engine as the rollouts; `bureau preeval`). Every trial is then
one of:

- **completed**: the verifier gave a reward (a wrong answer is the model's, with its reward);
- **model failure**: no reward, but the agent is to blame (`agent_timeout`, `agent_error`, its
  own tool server broken once it ran: `bureau.evaluation.attempts.agent_is_to_blame`), a
  graded 0 in training;
- **system error**: the machinery's failure, by kind (sandbox, tool server before the agent,
  engine, verifier, judge, upload, internal), masked in training.

The gate passes when system errors are at most `max_rate` of the trials: training on a set
where the machinery fails often would mask, or worse, mis-grade, much of what the policy does.
Each kind lists a few trial folders to start the investigation from. Attempts the machinery
failed and that were retried are counted apart (`retried`, by kind); tasks whose verifier also
failed on their oracle are listed as `task_defects` (fix or remove them).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from bureau.evaluation.attempts import agent_is_to_blame
from bureau.trials.result import COMPLETED, TrialResult

PREEVAL_FILE = "preeval.json"
DEFAULT_MAX_RATE = 0.005


def load_results(trials_dir: Path) -> list[TrialResult]:
    """The final trial results under `trials_dir` (one folder per trial): attempts that were
    retried (listed in a later attempt's `retried`) are counted by that later one."""
    results = [
        TrialResult.model_validate_json(path.read_text())
        for path in sorted(trials_dir.glob("*/result.json"))
    ]
    superseded = {earlier["trial_name"] for r in results for earlier in r.retried}
    return [r for r in results if r.trial_name not in superseded]


def taxonomy(results: list[TrialResult], examples: int = 3) -> dict[str, Any]:
    """Counts, rates and example trial folders of every outcome (see the module docstring)."""
    total = len(results)
    rewards = [r.reward for r in results if r.status == COMPLETED and r.reward is not None]
    model: Counter[str] = Counter()
    system: dict[str, list[str]] = {}
    for result in results:
        if result.status == COMPLETED:
            continue
        started = result.agent_execution.started_at is not None
        if agent_is_to_blame(result.status, started):
            model[result.status] += 1
        else:
            system.setdefault(result.status, []).append(result.trial_name)
    errors = sum(len(names) for names in system.values())
    retried = Counter(earlier["status"] for r in results for earlier in r.retried)
    defects = {r.task_name: r.task_defect for r in results if r.task_defect is not None}
    return {
        "trials": total,
        "completed": {
            "count": len(rewards),
            "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
            "full_reward": sum(1 for r in rewards if r >= 1.0),
        },
        "model_failures": dict(sorted(model.items())),
        "system_errors": {
            kind: {
                "count": len(names),
                "rate": round(len(names) / total, 4),
                "examples": names[:examples],
            }
            for kind, names in sorted(system.items(), key=lambda item: -len(item[1]))
        },
        "system_error_rate": round(errors / total, 4) if total else 0.0,
        "retried": dict(sorted(retried.items())),
        "task_defects": [defects[name] for name in sorted(defects)],
    }


def gate_passes(found: dict[str, Any], max_rate: float = DEFAULT_MAX_RATE) -> bool:
    """Whether the run may go on to training: trials ran, and few failed for the machinery."""
    return bool(found["trials"]) and found["system_error_rate"] <= max_rate


def summarize_preeval(out: Path, max_rate: float) -> tuple[dict[str, Any], Path, bool]:
    """The taxonomy of the trials in `out/trials`, written to `out/preeval.json`; with the
    file and whether the gate passes."""
    found = taxonomy(load_results(out / "trials"))
    return found, write_preeval(out, found, max_rate), gate_passes(found, max_rate)


class PreevalFailed(RuntimeError):
    """The pre-evaluation's gate failed: too many system errors to train on."""

    def __init__(self, found: dict[str, Any], path: Path, max_rate: float) -> None:
        defects = len(found.get("task_defects", []))
        super().__init__(
            f"pre-evaluation: system errors in {found['system_error_rate']:.2%} of "
            f"{found['trials']} trials, above the gate of {max_rate:.2%}"
            + (f"; {defects} broken task(s)" if defects else "")
            + f": see {path} and its example trials, fix the machinery, then train"
        )
        self.found, self.path = found, path


def write_preeval(out: Path, found: dict[str, Any], max_rate: float) -> Path:
    document = {
        "format": "bureau-preeval/1",
        "max_system_error_rate": max_rate,
        "passed": gate_passes(found, max_rate),
        **found,
    }
    path = out / PREEVAL_FILE
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path
