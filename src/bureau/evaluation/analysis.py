"""`bureau analyze RUN`: why trajectories failed, from the evidence a run leaves on disk.

Each trial attempt (`trials/<name>/`: result.json, agent/record.json, verifier/) yields
*incidents*, events where the machinery or a tool failed, with the place they happened:

- the attempt's system-error status (a retried attempt's too, marked recovered);
- a tool call whose server died or hung and was restarted (`tool_failed`): `tool_defect`;
- a tool error a tool raised on its own fault (`internal_error: ...` from a non-code tool):
  `tool_defect`; an ImportError or `command not found` in the code tool: `missing_dependency`;
- an engine request that was sent again (`engine_resends` in agent/metadata.json):
  `infrastructure`;
- a verifier run that crashed and was run again (`verifier_reruns`): `verifier`;
- a judge call that failed (`judge-calls.jsonl`): `infrastructure`.

Then each final attempt that failed (a system error, or a reward below 1) gets one root cause:
its status's cause; else the first incident the agent could see (a failed tool call, a missing
dependency) with its turn; else `model`, with what the model did wrong: ran out of turns, of
context or of time, malformed calls, gave up (no deliverable), a missing key or a wrong value.

It never reads `injected_faults`: `check_against_truth` compares its findings with them.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean, quantiles
from typing import Any

from bureau.errors import SystemErrorKind as Kind
from bureau.trials.faults import FAULT_CAUSES
from bureau.trials.judging import JUDGE_CALLS
from bureau.trials.result import TrialResult

CAUSES = ("model", "tool_defect", "missing_dependency", "harness", "verifier", "infrastructure")
ANALYSIS_FILE = "analysis.json"
REPORT_FILE = "analysis.md"

STATUS_CAUSES: dict[str, str] = {
    **{k.value: "infrastructure" for k in Kind},
    Kind.tool_server_failed.value: "tool_defect",  # once the agent ran; before, infrastructure
    Kind.agent_timeout.value: "model",
    Kind.agent_error.value: "harness",
    Kind.internal_error.value: "harness",
    Kind.verifier_timeout.value: "verifier",
    Kind.verifier_error.value: "verifier",
    Kind.reward_file_missing.value: "verifier",
}
_MISSING_DEPENDENCY = re.compile(
    r"ModuleNotFoundError|ImportError|No module named|command not found|: not found\b"
)
_STOP_DETAILS = {
    "max_turns": "ran out of turns",
    "max_tokens": "ran out of tokens",
    "context_exhausted": "ran out of context",
    "parse_failures": "malformed tool calls",
    "timeout": "ran out of time",
}


@dataclass
class Incident:
    cause: str
    kind: str
    detail: str = ""
    turn: int | None = None
    call: int | None = None  # index among the tool calls sent to the server
    send: int | None = None  # index among the engine requests sent, resends included
    recovered: bool = False


@dataclass
class Attempt:
    trial: str
    task: str
    status: str
    reward: float | None
    final: bool
    incidents: list[Incident] = field(default_factory=list)
    root_cause: str | None = None
    detail: str = ""
    turn: int | None = None
    template: str = "?"
    domain: str = "?"
    seconds: float | None = None
    limit_s: float | None = None


def trials_folder(run: Path) -> Path:
    """A run folder's trials/ (eval, preeval, bootstrap record), or the folder itself."""
    return run / "trials" if (run / "trials").is_dir() else run


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def task_metadata(path: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if path not in cache:
        try:
            data = tomllib.loads((Path(path) / "task.toml").read_text(encoding="utf-8"))
            cache[path] = dict(data.get("metadata") or {})
        except (OSError, ValueError):
            cache[path] = {}
    return cache[path]


def _tool_incidents(record: dict[str, Any]) -> list[Incident]:
    outputs = {
        m.get("tool_call_id"): str(m.get("content") or "")
        for m in record.get("messages", [])
        if m.get("role") == "tool"
    }
    found: list[Incident] = []
    sent = 0
    for call in record.get("tool_calls", []):
        if call["outcome"] == "unknown_tool":
            continue
        index, sent = sent, sent + 1
        where = {"turn": call["turn"], "call": index}
        text = outputs.get(call["call_id"], "")
        code_tool = call["name"].startswith("code_")
        missing = _MISSING_DEPENDENCY.search(text) if code_tool else None
        if call["outcome"] == "tool_failed":
            found.append(
                Incident("tool_defect", "tool_failed", call["name"], **where, recovered=True)
            )
        elif missing is not None:  # in the program's output, whether or not it failed
            found.append(
                Incident("missing_dependency", "missing_dependency", missing.group(0), **where)
            )
        elif (
            call["outcome"] == "tool_error" and not code_tool and text.startswith("internal_error")
        ):
            found.append(
                Incident("tool_defect", "internal_error", f"{call['name']}: {text[:120]}", **where)
            )
    return found


def _model_detail(record: dict[str, Any] | None, grading: dict[str, Any] | None) -> str:
    stop = (record or {}).get("stop_reason")
    if stop in _STOP_DETAILS:
        return _STOP_DETAILS[stop]
    reasons = [
        str(r.get("reason", "")) for r in (grading or {}).get("results", []) if not r.get("passed")
    ]
    if reasons and all(reason.endswith(" missing") for reason in reasons):
        return "gave up (no deliverable)"
    if any(reason.startswith("no key") for reason in reasons):
        return "missing key"
    return "wrong value" if reasons else "failed"


def read_attempt(trial_dir: Path, final: bool, meta_cache: dict[str, dict[str, Any]]) -> Attempt:
    result = TrialResult.model_validate_json((trial_dir / "result.json").read_text())
    record = _json(trial_dir / "agent" / "record.json")
    grading = _json(trial_dir / "verifier" / "grading.json")
    config = _json(trial_dir / "config.json") or {}
    meta = task_metadata(result.task_id.get("path", ""), meta_cache)
    attempt = Attempt(
        result.trial_name, result.task_name, result.status, result.reward, final,
        template=str(meta.get("template", "?")), domain=str(meta.get("domain", "?")),
    )  # fmt: skip
    if result.finished_at is not None:
        attempt.seconds = (result.finished_at - result.started_at).total_seconds()
    if "agent_timeout_s" in config:
        starts = 2 * (
            config.get("sandbox_start_timeout_s", 120) + config.get("tool_server_timeout_s", 60)
        )
        runs = 1 + config.get("verifier_reruns", 0)
        attempt.limit_s = (
            config["agent_timeout_s"] + runs * config.get("verifier_timeout_s", 0) + starts
        )
    incidents = attempt.incidents
    if record is not None:
        incidents += _tool_incidents(record)
    metadata = _json(trial_dir / "agent" / "metadata.json") or result.agent_metadata
    for event in metadata.get("engine_resends", []) or []:
        incidents.append(
            Incident("infrastructure", str(event.get("kind")), str(event.get("message", ""))[:120],
                     send=event.get("send"), recovered=True)
        )  # fmt: skip
    for event in result.verifier_reruns:
        incidents.append(
            Incident("verifier", event["kind"], event["message"][:120], recovered=True)
        )
    calls = trial_dir / "verifier" / JUDGE_CALLS
    if calls.is_file():
        for line in calls.read_text(encoding="utf-8").splitlines():
            call = json.loads(line)
            if call["outcome"] not in ("ok", "invalid_verdict"):
                incidents.append(
                    Incident(
                        "infrastructure",
                        f"judge_{call['outcome']}",
                        str(call.get("detail", "")),
                        recovered=True,
                    )
                )
    if result.system_error:
        started = result.agent_execution.started_at is not None
        cause = STATUS_CAUSES.get(result.status, "infrastructure")
        if result.status == Kind.tool_server_failed.value and not started:
            cause = "infrastructure"
        message = result.exception_info.exception_message if result.exception_info else ""
        incidents.append(Incident(cause, result.status, message[:200], recovered=not final))
    if final:
        _root_cause(attempt, record, grading)
        if attempt.root_cause == "model" and "verifier_failed_on_output" in (
            result.verifier_result or {}
        ):
            attempt.detail = "its output broke the verifier (the oracle's did not)"
    return attempt


def _root_cause(
    attempt: Attempt, record: dict[str, Any] | None, grading: dict[str, Any] | None
) -> None:
    last_turn = len((record or {}).get("turns", [])) or None
    if attempt.status != "completed":
        status = attempt.incidents[-1]
        attempt.root_cause, attempt.detail, attempt.turn = status.cause, status.kind, last_turn
        if attempt.status == Kind.agent_timeout.value:
            attempt.detail = "ran out of time"
        return
    if attempt.reward is not None and attempt.reward >= 1.0:
        return
    seen = [i for i in attempt.incidents if i.turn is not None]
    if seen:
        first = min(seen, key=lambda i: i.turn or 0)
        attempt.root_cause, attempt.detail, attempt.turn = (
            first.cause,
            f"{first.kind}: {first.detail}",
            first.turn,
        )
        return
    attempt.root_cause, attempt.detail, attempt.turn = (
        "model",
        _model_detail(record, grading),
        last_turn,
    )


def analyze(run: Path, examples: int = 3) -> dict[str, Any]:
    """The analysis of a run folder (see the module docstring), as a JSON-ready dict."""
    trials = trials_folder(run)
    dirs = sorted(p.parent for p in trials.glob("*/result.json"))
    superseded: set[str] = set()
    for d in dirs:
        for earlier in (_json(d / "result.json") or {}).get("retried", []):
            superseded.add(earlier["trial_name"])
    cache: dict[str, dict[str, Any]] = {}
    attempts = [read_attempt(d, d.name not in superseded, cache) for d in dirs]
    finals = [a for a in attempts if a.final]
    failed = [a for a in finals if a.root_cause is not None]
    causes: dict[str, dict[str, Any]] = {}
    for cause in CAUSES:
        mine = [a for a in failed if a.root_cause == cause]
        details = Counter(a.detail.split(":")[0] for a in mine)
        causes[cause] = {
            "count": len(mine),
            "share_of_failures": round(len(mine) / len(failed), 4) if failed else 0.0,
            "details": dict(details.most_common()),
            "examples": [
                {"trial": a.trial, "turn": a.turn, "detail": a.detail[:200]}
                for a in mine[:examples]
            ],
        }
    incidents = Counter((i.cause, i.kind, i.recovered) for a in attempts for i in a.incidents)
    return {
        "format": "bureau-analysis/1",
        "run": str(run),
        "attempts": len(attempts),
        "final_attempts": len(finals),
        "retried_attempts": len(attempts) - len(finals),
        "completed": sum(a.status == "completed" for a in finals),
        "system_errors": sum(a.status != "completed" for a in finals),
        "failures": len(failed),
        "mean_reward": round(fmean(a.reward for a in finals if a.reward is not None), 4)
        if any(a.reward is not None for a in finals)
        else None,
        "root_causes": causes,
        "incidents": [
            {"cause": c, "kind": k, "recovered": r, "count": n}
            for (c, k, r), n in sorted(incidents.items())
        ],
        "tools": tool_table(trials, [a.trial for a in attempts]),
        "templates": _rates(finals, "template"),
        "domains": _rates(finals, "domain"),
        "overran": [a.trial for a in attempts if a.seconds and a.limit_s and a.seconds > a.limit_s],
        "trials": [asdict(a) for a in attempts],
    }


def _rates(finals: list[Attempt], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Attempt]] = defaultdict(list)
    for a in finals:
        groups[getattr(a, key)].append(a)
    return {
        name: {
            "attempts": len(group),
            "failures": sum(a.root_cause is not None for a in group),
            "failure_rate": round(sum(a.root_cause is not None for a in group) / len(group), 4),
            "model_failures": sum(a.root_cause == "model" for a in group),
            "system_errors": sum(a.status != "completed" for a in group),
        }
        for name, group in sorted(groups.items())
    }


def tool_table(trials: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per tool: calls, tool errors, failed calls (server restarted), latency mean/p50/p95."""
    latency: dict[str, list[float]] = defaultdict(list)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    for name in names:
        record = _json(trials / name / "agent" / "record.json")
        for call in (record or {}).get("tool_calls", []):
            latency[call["name"]].append(float(call["latency_s"]))
            outcomes[call["name"]][call["outcome"]] += 1
    table = {}
    for tool, values in sorted(latency.items()):
        cuts = quantiles(values, n=20, method="inclusive") if len(values) > 1 else values * 19
        counts = outcomes[tool]
        table[tool] = {
            "calls": len(values),
            "tool_errors": counts["tool_error"],
            "failed": counts["tool_failed"] + counts["system_error"],
            "error_rate": round((len(values) - counts["ok"]) / len(values), 4),
            "latency_mean_s": round(fmean(values), 4),
            "latency_p50_s": round(cuts[9], 4),
            "latency_p95_s": round(cuts[18], 4),
        }
    return table


def check_against_truth(analysis: dict[str, Any], run: Path) -> dict[str, Any]:
    """Compare the analysis with the faults injected (each attempt's `injected_faults`): the
    share of faults attributed to their cause at their place, and the faults that ended in a
    failure the analysis put on the model."""
    trials = trials_folder(run)
    by_trial = {t["trial"]: t for t in analysis["trials"]}
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    as_model: list[dict[str, Any]] = []
    for name, attempt in by_trial.items():
        result = _json(trials / name / "result.json") or {}
        unused = [Incident(**i) for i in attempt["incidents"]]
        for fault in result.get("injected_faults", []):
            kind = fault["fault"]
            match = _match(fault, unused)
            per_kind[kind]["injected"] += 1
            if match is not None:
                unused.remove(match)
                per_kind[kind]["attributed"] += 1
            if attempt["final"] and attempt["root_cause"] == "model" and kind in AGENT_VISIBLE:
                as_model.append({"trial": name, "fault": kind})
    injected = sum(c["injected"] for c in per_kind.values())
    attributed = sum(c["attributed"] for c in per_kind.values())
    return {
        "injected": injected,
        "attributed": attributed,
        "attributed_share": round(attributed / injected, 4) if injected else None,
        "per_kind": {k: dict(v) for k, v in sorted(per_kind.items())},
        "counted_as_model_failures": as_model,
    }


AGENT_VISIBLE = frozenset({"tool_hang", "tool_server_kill", "sandbox_kill"})
_FAULT_STATUS = {"sandbox_kill": Kind.sandbox_crashed.value, "disk_full": Kind.storage_full.value}


def _match(fault: dict[str, Any], incidents: list[Incident]) -> Incident | None:
    kind, cause = fault["fault"], FAULT_CAUSES[fault["fault"]]
    for incident in incidents:
        if incident.cause != cause:
            continue
        if kind in ("tool_hang", "tool_server_kill") and (
            incident.call == fault.get("call") or incident.kind == Kind.tool_server_failed
        ):
            return incident
        if kind.startswith("engine_") and (
            incident.send == fault.get("send")
            or (incident.send is None and incident.kind.startswith("engine_"))
        ):
            return incident
        if kind in _FAULT_STATUS and incident.kind == _FAULT_STATUS[kind]:
            return incident
        if kind == "verifier_crash" and incident.kind in (
            Kind.reward_file_missing,
            Kind.verifier_error,
        ):
            return incident
        if kind == "judge_error" and incident.kind.startswith("judge_"):
            return incident
    return None


def write_analysis(run: Path, analysis: dict[str, Any], truth: dict[str, Any] | None) -> Path:
    """analysis.json (with the drill check under `truth`, when faults were injected) and the
    Markdown report, in the run folder; the report's path."""
    document = dict(analysis)
    if truth is not None:
        document["truth"] = truth
    (run / ANALYSIS_FILE).write_text(json.dumps(document, indent=2) + "\n")
    (run / REPORT_FILE).write_text(markdown(analysis, truth))
    return run / REPORT_FILE


def markdown(analysis: dict[str, Any], truth: dict[str, Any] | None = None) -> str:
    a = analysis
    lines = [
        f"# Analysis of {a['run']}",
        "",
        f"{a['final_attempts']} trials ({a['retried_attempts']} attempts retried): "
        f"{a['completed']} completed, {a['system_errors']} system errors, "
        f"{a['failures']} failed or below reward 1; mean reward {a['mean_reward']}.",
        "",
        "## Root causes",
        "",
        "| cause | failures | share | what | examples (trial, turn) |",
        "|---|---:|---:|---|---|",
    ]
    for cause, row in a["root_causes"].items():
        what = ", ".join(f"{k} {n}" for k, n in row["details"].items())
        shown = "; ".join(f"`{e['trial']}` turn {e['turn']}" for e in row["examples"])
        lines.append(
            f"| {cause} | {row['count']} | {row['share_of_failures']:.1%} | {what} | {shown} |"
        )
    lines += ["", "## Incidents", "", "| cause | kind | recovered | count |", "|---|---|---|---:|"]
    lines += [
        f"| {i['cause']} | {i['kind']} | {'yes' if i['recovered'] else 'no'} | {i['count']} |"
        for i in a["incidents"]
    ]
    lines += [
        "",
        "## Tools",
        "",
        "| tool | calls | tool errors | failed | error rate | mean s | p50 s | p95 s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {tool} | {t['calls']} | {t['tool_errors']} | {t['failed']} | {t['error_rate']:.1%} "
        f"| {t['latency_mean_s']} | {t['latency_p50_s']} | {t['latency_p95_s']} |"
        for tool, t in a["tools"].items()
    ]
    for title, key in (("Templates", "templates"), ("Domains", "domains")):
        lines += [
            "",
            f"## {title}",
            "",
            "| name | trials | failures | rate | model | system errors |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {name} | {r['attempts']} | {r['failures']} | {r['failure_rate']:.1%} "
            f"| {r['model_failures']} | {r['system_errors']} |"
            for name, r in a[key].items()
        ]
    if a["overran"]:
        lines += ["", f"Trials past their time limits: {', '.join(a['overran'])}"]
    if truth is not None:
        lines += [
            "",
            "## Drill check (injected faults)",
            "",
            f"{truth['attributed']} of {truth['injected']} injected faults attributed to their "
            f"cause ({truth['attributed_share']}); "
            f"{len(truth['counted_as_model_failures'])} counted as model failures.",
            "",
            "| fault | injected | attributed |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {k} | {v.get('injected', 0)} | {v.get('attributed', 0)} |"
            for k, v in truth["per_kind"].items()
        ]
    return "\n".join(lines) + "\n"
