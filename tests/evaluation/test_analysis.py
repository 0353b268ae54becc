"""`bureau analyze`: root causes, incidents and tables from hand-made trial folders, and the
check against injected faults."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bureau.evaluation.analysis import analyze, check_against_truth, markdown, write_analysis
from bureau.trials.result import ExceptionInfo, TrialResult

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def call(turn: int, name: str, outcome: str, latency: float = 0.1) -> dict[str, Any]:
    return {
        "turn": turn, "call_id": f"c{turn}_{name}", "name": name, "arguments": {},
        "outcome": outcome, "latency_s": latency, "output_chars": 10, "truncated": False,
    }  # fmt: skip


def trial(
    root: Path,
    name: str,
    *,
    status: str = "completed",
    reward: float | None = 1.0,
    calls: list[dict[str, Any]] | None = None,
    outputs: dict[str, str] | None = None,
    stop: str = "answered",
    reasons: list[str] | None = None,
    retried: list[str] | None = None,
    resends: list[dict[str, Any]] | None = None,
    reruns: list[dict[str, str]] | None = None,
    judge_outcomes: list[str] | None = None,
    faults: list[dict[str, Any]] | None = None,
    agent_ran: bool = True,
    seconds: float = 10.0,
) -> None:
    folder = root / "trials" / name
    (folder / "agent").mkdir(parents=True)
    (folder / "verifier").mkdir()
    task = root / "tasks" / name.split("__")[0]
    if not task.exists():
        task.mkdir(parents=True)
        domain = "law" if "law" in name else "banking"
        (task / "task.toml").write_text(
            f'[metadata]\ndomain = "{domain}"\ntemplate = "{domain}.t"\n'
        )
    result = TrialResult(
        task_name=name.split("__")[0], trial_name=name, trial_uri="", task_id={"path": str(task)},
        task_checksum="", agent_info={"name": "harness"}, status=status, reward=reward,
        retried=[{"trial_name": r, "status": "sandbox_crashed"} for r in retried or []],
        verifier_reruns=reruns or [], injected_faults=faults or [], started_at=T0,
        finished_at=T0 + timedelta(seconds=seconds),
    )  # fmt: skip
    if agent_ran:
        result.agent_execution.started_at = T0
    if status != "completed":
        result.exception_info = ExceptionInfo(
            exception_type="X", exception_message=f"{status}: boom", exception_traceback="",
            occurred_at=T0,
        )  # fmt: skip
    (folder / "result.json").write_text(result.model_dump_json())
    (folder / "config.json").write_text(
        json.dumps({"agent_timeout_s": 60, "verifier_timeout_s": 30, "verifier_reruns": 2})
    )
    calls = calls or []
    messages = [
        {
            "role": "tool",
            "tool_call_id": c["call_id"],
            "content": (outputs or {}).get(c["name"], "ok"),
        }
        for c in calls
    ]
    record = {"tool_calls": calls, "messages": messages, "turns": [{}] * 4, "stop_reason": stop}
    (folder / "agent" / "record.json").write_text(json.dumps(record))
    (folder / "agent" / "metadata.json").write_text(json.dumps({"engine_resends": resends or []}))
    if reasons is not None:
        results = [{"id": f"c{i}", "passed": False, "reason": r} for i, r in enumerate(reasons)]
        (folder / "verifier" / "grading.json").write_text(json.dumps({"results": results}))
    if judge_outcomes:
        lines = [json.dumps({"outcome": o, "detail": ""}) for o in judge_outcomes]
        (folder / "verifier" / "judge-calls.jsonl").write_text("\n".join(lines) + "\n")


def build_run(root: Path) -> None:
    trial(root, "law-a__1")  # passed
    trial(root, "law-b__1", reward=0.0, reasons=["expected 5 ±0.01, got 4"])
    trial(root, "law-c__1", reward=0.0, reasons=["no key 'fee' in output/answer.json"])
    trial(root, "law-d__1", reward=0.0, reasons=["output/answer.json missing"] * 2)
    trial(root, "bank-e__1", reward=0.0, stop="max_turns", reasons=["output/answer.json missing"])
    trial(
        root, "bank-f__1", reward=0.0, reasons=["got 1"],
        calls=[call(1, "pdf_read_pages", "ok", 0.2), call(2, "sheet_read", "tool_failed", 3.0)],
        faults=[{"fault": "tool_hang", "call": 1}],
    )  # fmt: skip
    trial(
        root, "bank-g__1", reward=0.5, reasons=["got 2"],
        calls=[call(1, "code_run_python", "tool_error", 0.4)],
        outputs={"code_run_python": "Traceback...\nModuleNotFoundError: No module named 'polars'"},
    )  # fmt: skip
    trial(
        root, "bank-h__1", reward=0.0, reasons=["got 3"],
        calls=[call(1, "sheet_read", "tool_error", 0.1)],
        outputs={"sheet_read": "internal_error: KeyError: 'x'"},
    )  # fmt: skip
    # A sandbox killed under the agent, then retried from scratch and passed.
    trial(
        root, "law-i__1", status="sandbox_crashed", reward=None,
        faults=[{"fault": "sandbox_kill", "call": 0}, {"fault": "engine_stall", "send": 0}],
        resends=[{"request": 0, "send": 0, "kind": "engine_timeout", "message": "stall"}],
    )  # fmt: skip
    trial(
        root, "law-i__2", retried=["law-i__1"],
        reruns=[{"kind": "reward_file_missing", "message": "killed"}],
        judge_outcomes=["server_error", "ok"],
        faults=[{"fault": "verifier_crash"}, {"fault": "judge_error"}],
    )  # fmt: skip
    trial(root, "law-j__1", status="agent_error", reward=None)
    trial(root, "law-k__1", status="engine_error", reward=None, seconds=600.0)
    # A fault without evidence: not attributed.
    trial(root, "law-l__1", faults=[{"fault": "engine_error", "send": 5}])


def test_root_causes_follow_the_evidence(tmp_path: Path) -> None:
    build_run(tmp_path)
    found = analyze(tmp_path)
    by_trial = {t["trial"]: t for t in found["trials"]}
    expected = {
        "law-a__1": (None, ""),
        "law-b__1": ("model", "wrong value"),
        "law-c__1": ("model", "missing key"),
        "law-d__1": ("model", "gave up (no deliverable)"),
        "bank-e__1": ("model", "ran out of turns"),
        "bank-f__1": ("tool_defect", "tool_failed: sheet_read"),
        "bank-g__1": ("missing_dependency", "missing_dependency: ModuleNotFoundError"),
        "bank-h__1": ("tool_defect", "internal_error: sheet_read: internal_error: KeyError: 'x'"),
        "law-i__2": (None, ""),
        "law-j__1": ("harness", "agent_error"),
        "law-k__1": ("infrastructure", "engine_error"),
    }
    for name, (cause, detail) in expected.items():
        assert (by_trial[name]["root_cause"], by_trial[name]["detail"]) == (cause, detail), name
    assert by_trial["bank-f__1"]["turn"] == 2
    assert not by_trial["law-i__1"]["final"] and by_trial["law-i__1"]["root_cause"] is None
    assert found["final_attempts"] == 12 and found["retried_attempts"] == 1
    assert found["system_errors"] == 2 and found["failures"] == 9
    causes = found["root_causes"]
    assert causes["model"]["count"] == 4 and causes["tool_defect"]["count"] == 2
    assert causes["model"]["share_of_failures"] == round(4 / 9, 4)
    incidents = {(i["cause"], i["kind"], i["recovered"]): i["count"] for i in found["incidents"]}
    assert incidents[("infrastructure", "sandbox_crashed", True)] == 1
    assert incidents[("infrastructure", "engine_timeout", True)] == 1
    assert incidents[("verifier", "reward_file_missing", True)] == 1
    assert incidents[("infrastructure", "judge_server_error", True)] == 1
    assert incidents[("infrastructure", "engine_error", False)] == 1
    # Per-tool table: sheet_read had 2 calls (3.0 s, 0.1 s), one failed, one error.
    sheet = found["tools"]["sheet_read"]
    assert (sheet["calls"], sheet["tool_errors"], sheet["failed"]) == (2, 1, 1)
    assert sheet["error_rate"] == 1.0 and sheet["latency_mean_s"] == 1.55
    domains = found["domains"]
    assert domains["banking"]["attempts"] == 4 and domains["banking"]["failures"] == 4
    assert domains["law"]["failure_rate"] == 0.625  # b, c, d, j, k of 8
    assert found["overran"] == ["law-k__1"]  # 600 s against 60 + 3 x 30 + 2 x (120 + 60)


def test_the_check_against_injected_faults(tmp_path: Path) -> None:
    build_run(tmp_path)
    found = analyze(tmp_path)
    truth = check_against_truth(found, tmp_path)
    assert truth["injected"] == 6 and truth["attributed"] == 5
    assert truth["per_kind"]["engine_error"] == {"injected": 1}
    assert truth["per_kind"]["sandbox_kill"] == {"injected": 1, "attributed": 1}
    assert truth["counted_as_model_failures"] == []
    report = markdown(found, truth)
    assert "5 of 6 injected faults" in report and "| tool_defect | 2 |" in report


def test_a_visible_fault_the_analysis_missed_counts_as_a_model_failure(tmp_path: Path) -> None:
    trial(
        tmp_path, "law-x__1", reward=0.0, reasons=["got 1"],
        faults=[{"fault": "tool_server_kill", "call": 0}],
    )  # fmt: skip
    truth = check_against_truth(analyze(tmp_path), tmp_path)
    assert truth["attributed"] == 0
    assert truth["counted_as_model_failures"] == [
        {"trial": "law-x__1", "fault": "tool_server_kill"}
    ]


def test_the_command_writes_both_reports_and_gates_a_drill(tmp_path: Path) -> None:
    build_run(tmp_path)
    run = [sys.executable, "-m", "bureau.cli.main", "analyze", str(tmp_path)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "drill check: 5 of 6 injected faults" in done.stdout
    saved = json.loads((tmp_path / "analysis.json").read_text())
    assert saved["truth"]["attributed"] == 5 and (tmp_path / "analysis.md").is_file()
    gated = subprocess.run([*run, "--min-attributed", "0.95"], capture_output=True, timeout=120)
    assert gated.returncode == 1
    missing = subprocess.run(
        [*run[:-1], str(tmp_path / "nothing")], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "expected a run folder" in missing.stdout
    write_analysis(tmp_path, analyze(tmp_path), None)
    assert "truth" not in json.loads((tmp_path / "analysis.json").read_text())
