"""A run folder read back for its report: what kind of run it is, its steps, its trials.

`bureau train` leaves `metrics.jsonl` (one row per step, and `live/*` rows between steps),
`evals.json` (the held-out evaluations), `trajectories/step-N.parquet` and `trials/train`,
`trials/eval`; `bureau eval` leaves `eval.json`, `trajectories.parquet` and `trials/`;
`bureau preeval` the same and `preeval.json`; `tasks check --agent harness` leaves `run.json`,
`trajectories.parquet` and `trials/`. Every kind has `config.resolved.toml`.

Every rate here is computed the way `bureau eval` computes it: from the trials' verdicts, with
intervals that resample tasks (`bureau.evaluation.report.summarize_attempts`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bureau.evaluation.analysis import task_metadata
from bureau.evaluation.attempts import attempt_from_trial
from bureau.evaluation.preeval import load_results, taxonomy
from bureau.evaluation.report import AttemptRow, EvalReport, GroupReport, summarize_attempts
from bureau.trials.result import TrialResult

RunKind = Literal["train", "eval", "preeval", "check"]

# Where each kind of run keeps its trials (relative to the run folder), and what they are.
TRIAL_SETS = (
    ("trials/train", "training rollouts"),
    ("trials/eval", "evaluations"),
    ("preeval/trials", "pre-evaluation"),
    ("trials", "trials"),
)
RESAMPLES = 1000


class NotARun(ValueError):
    """The folder is no run that `bureau report` knows."""


@dataclass
class TrialSet:
    """The final attempts of one trials folder, with what they came to."""

    label: str
    key: str
    """Its folder relative to the run's (`trials/train`, `trials`, ...)."""
    folder: Path
    rows: list[AttemptRow]
    report: EvalReport | None
    taxonomy: dict[str, Any]
    stop_reasons: Counter[str]
    turns: list[int]
    sampled_tokens: list[int]
    seconds: list[float]


@dataclass
class StepInterval:
    """One step's trained rollouts: Pass@1 and reward with task-resampled intervals."""

    step: int
    overall: GroupReport


@dataclass
class Run:
    path: Path
    kind: RunKind
    facts: dict[str, Any]
    """Model, dataset, start, wall time: what the page's header shows."""
    config_text: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    live: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    step_intervals: list[StepInterval] = field(default_factory=list)
    trial_sets: list[TrialSet] = field(default_factory=list)
    preeval: dict[str, Any] | None = None
    eval_report: EvalReport | None = None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotARun(f"{path}: not readable JSON ({exc})") from exc


def run_kind(path: Path) -> RunKind:
    if (path / "metrics.jsonl").is_file():
        return "train"
    if (path / "preeval.json").is_file():
        return "preeval"
    if (path / "eval.json").is_file():
        return "eval"
    if (path / "run.json").is_file() and (path / "trials").is_dir():
        return "check"
    raise NotARun(
        f"{path}: no metrics.jsonl (bureau train), eval.json (bureau eval), preeval.json "
        "(bureau preeval) or run.json with trials/ (bureau tasks check --agent harness)"
    )


def read_metrics(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The step rows (last one per step, as a resumed run may repeat a step) and the `live/*`
    rows of a `metrics.jsonl`; a line cut short by a kill is skipped."""
    steps: dict[int, dict[str, Any]] = {}
    live: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or "step" not in row:
            continue
        if "data/group_ids" in row:
            steps[int(row["step"])] = row
        elif any(k.startswith("live/") for k in row):
            live.append(row)
    return [steps[s] for s in sorted(steps)], live


def load_run(path: Path) -> Run:
    """Read a run folder of any kind `bureau report` knows; `NotARun` naming the folder or
    file otherwise."""
    path = Path(path)
    if not path.is_dir():
        raise NotARun(f"{path}: no such run folder")
    kind = run_kind(path)
    config = path / "config.resolved.toml"
    run = Run(
        path,
        kind,
        {},
        config.read_text(encoding="utf-8") if config.is_file() else "",
    )
    meta: dict[str, dict[str, Any]] = {}
    results_by_set: dict[str, dict[str, TrialResult]] = {}
    for relative, label in TRIAL_SETS:
        folder = path / relative
        if not folder.is_dir() or not any(folder.glob("*/result.json")):
            continue
        if relative == "trials" and kind == "train":
            continue  # its subfolders are the sets
        results = load_results(folder)
        results_by_set[relative] = {r.trial_name: r for r in results}
        run.trial_sets.append(_trial_set(label, relative, folder, results, meta))
    if kind == "train":
        run.steps, run.live = read_metrics(path / "metrics.jsonl")
        if (path / "evals.json").is_file():
            run.evals = list(_json(path / "evals.json"))
        if run.evals and all(e.get("held_out", True) for e in run.evals):
            for found in run.trial_sets:
                if found.key == "trials/eval":
                    found.label = "held-out evaluations"
        run.step_intervals = _step_intervals(
            path / "trajectories", results_by_set.get("trials/train", {}), meta
        )
        if (path / "preeval" / "preeval.json").is_file():
            run.preeval = _json(path / "preeval" / "preeval.json")
        run.facts = _train_facts(run)
    else:
        document = _json(path / ("run.json" if kind == "check" else "eval.json"))
        if kind == "preeval":
            run.preeval = _json(path / "preeval.json")
        if kind != "check":
            from bureau.evaluation.run import read_eval_report

            try:
                run.eval_report = read_eval_report(path)
            except ValueError as exc:
                raise NotARun(str(exc)) from exc
        run.facts = {
            "model": document.get("model"),
            "dataset": document.get("dataset"),
            "started": document.get("started"),
            "wall time": f"{document['wall_time_s']:.0f} s" if "wall_time_s" in document else None,
            "engine": document.get("engine") or (document.get("config") or {}).get("engine"),
        }
    run.facts = {k: v for k, v in run.facts.items() if v not in (None, "")}
    return run


def _domain_template(result: TrialResult, meta: dict[str, dict[str, Any]]) -> tuple[str, str]:
    found = task_metadata(str(result.task_id.get("path", "")), meta)
    return str(found.get("domain") or "unknown"), str(found.get("template") or "unknown")


def _row(result: TrialResult, meta: dict[str, dict[str, Any]]) -> AttemptRow:
    domain, template = _domain_template(result, meta)
    return attempt_from_trial(result, domain, template)


def _trial_set(
    label: str,
    key: str,
    folder: Path,
    results: list[TrialResult],
    meta: dict[str, dict[str, Any]],
) -> TrialSet:
    rows = [_row(r, meta) for r in results]
    agent = [r.agent_metadata or {} for r in results]
    seconds = [(r.finished_at - r.started_at).total_seconds() for r in results if r.finished_at]
    return TrialSet(
        label,
        key,
        folder,
        rows,
        summarize_attempts(rows, seed=0, resamples=RESAMPLES) if rows else None,
        taxonomy(results),
        Counter(str(a["stop_reason"]) for a in agent if a.get("stop_reason")),
        [int(a["num_turns"]) for a in agent if "num_turns" in a],
        [int(a["num_sampled_tokens"]) for a in agent if "num_sampled_tokens" in a],
        seconds,
    )


def _step_intervals(
    folder: Path, results: dict[str, TrialResult], meta: dict[str, dict[str, Any]]
) -> list[StepInterval]:
    """Per step, the rollouts it trained on (`trajectories/step-N.parquet`), joined to their
    trials for the verdict."""
    from bureau.records.parquet import read_columns

    found = []
    for file in sorted(folder.glob("step-*.parquet")):
        step = int(file.stem.split("-")[1])
        names = [row["trial_name"] for row in read_columns(file, ["trial_name"])]
        rows = [_row(results[n], meta) for n in names if n in results]
        if rows:
            report = summarize_attempts(rows, seed=step, resamples=RESAMPLES)
            found.append(StepInterval(step, report.overall))
    return found


def _train_facts(run: Run) -> dict[str, Any]:
    import tomllib

    try:
        config = tomllib.loads(run.config_text) if run.config_text else {}
    except ValueError:
        config = {}
    steps = run.steps
    span = steps[-1]["time"] - steps[0]["time"] + steps[0].get("time/step_s", 0.0) if steps else 0
    return {
        "model": (config.get("model") or {}).get("path"),
        "training tasks": (config.get("data") or {}).get("train"),
        "held-out tasks": (config.get("data") or {}).get("eval"),
        "engines": _engines(config),
        "steps": f"{len(steps)} of {config.get('steps', '?')}",
        "wall time of the steps": f"{span:.0f} s" if steps else None,
    }


def _engines(config: dict[str, Any]) -> str | None:
    engines = config.get("engines") or {}
    if not engines:
        return None
    return f"{engines.get('count', 1)} × {engines.get('kind', '?')}"
