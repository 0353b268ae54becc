"""Completing a reward whose verifier left questions for the LLM judge.

bureau's grader cannot reach a judge from inside the verifier's sandbox (no network, and the
judge's keys must never enter a sandbox), so for `judge` criteria it writes
`judge-requests.json` and no reward (`bureau.grading.judged`). After the verifier, the trial
asks the judge here, on the host, and writes the verdicts into grading.json and the reward:

- a verdict passes or fails its criterion, with the judge's rationale as the reason;
- a judge that answers without a valid verdict fails the criterion (the agent's text may be
  what derailed it, and a policy would learn to derail it on purpose);
- a judge that cannot answer (`JudgeUnavailable`, after its retries) makes the trial a
  `judge_unavailable` system error: masked, never a 0;
- with no judge configured, `missing="fail"` is that same system error, and `missing="skip"`
  grades the task on its other criteria (the judged ones are listed as skipped).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.judge import JudgeClient, JudgeRequest, JudgeUnavailable, Verdict, VerdictError
from bureau.judge.client import CallRecord

if TYPE_CHECKING:
    from bureau.trials.faults import TrialFaults
from bureau.tasks.reward import write_reward_json

JUDGE_REQUESTS = "judge-requests.json"
JUDGE_CALLS = "judge-calls.jsonl"
MissingJudge = Literal["fail", "skip"]


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BureauSystemError(SystemErrorKind.verifier_error, f"{path.name}: {exc}") from exc
    if not isinstance(data, dict):
        raise BureauSystemError(SystemErrorKind.verifier_error, f"{path.name}: not an object")
    return data


async def complete_with_judge(
    verifier_dir: Path,
    judge: JudgeClient | None,
    missing: MissingJudge = "fail",
    faults: TrialFaults | None = None,
) -> None:
    """Ask the judge the verifier's questions; write grading.json and reward.json, and the
    trial's judge calls to judge-calls.jsonl (latency, key index, outcome; never the key)."""
    requests = _read(verifier_dir / JUDGE_REQUESTS).get("requests")
    grading = _read(verifier_dir / "grading.json")
    if not isinstance(requests, list) or not isinstance(grading.get("results"), list):
        raise BureauSystemError(
            SystemErrorKind.verifier_error, f"{JUDGE_REQUESTS} or grading.json is malformed"
        )
    results: list[dict[str, Any]] = list(grading["results"])
    skipped: list[str] = []
    if judge is None:
        if missing == "fail":
            raise JudgeUnavailable(
                f"the rubric has {len(requests)} judge criteria and no judge is configured "
                "(give one, or skip judge criteria)"
            )
        skipped = [str(request.get("id")) for request in requests]
    else:
        try:
            asked = [
                JudgeRequest(
                    question=r["question"], reference=r.get("reference", ""), work=r["work"]
                )
                for r in requests
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise BureauSystemError(
                SystemErrorKind.verifier_error, f"{JUDGE_REQUESTS}: {exc}"
            ) from exc
        calls: list[CallRecord] = []
        fault = None
        if faults is not None:
            fault = functools.partial(faults.injected, "judge_error", "verifier")
        try:
            verdicts = await asyncio.gather(
                *(judge.judge(request, calls=calls, fault=fault) for request in asked),
                return_exceptions=True,
            )
        finally:
            with (verifier_dir / JUDGE_CALLS).open("w", encoding="utf-8") as log:
                log.writelines(json.dumps(dataclasses.asdict(call)) + "\n" for call in calls)
        for request, verdict in zip(requests, verdicts, strict=True):
            if isinstance(verdict, BaseException) and not isinstance(verdict, VerdictError):
                raise verdict
            passed = isinstance(verdict, Verdict) and verdict.passed
            reason = (
                verdict.rationale
                if isinstance(verdict, Verdict)
                else f"the judge gave no valid verdict: {verdict}"
            )
            results.append(
                {
                    "id": request["id"],
                    "type": "judge",
                    "passed": passed,
                    "reason": reason[:200],
                    "description": request.get("description", ""),
                }
            )
    if not results:
        raise BureauSystemError(
            SystemErrorKind.verifier_error, "every criterion was a skipped judge criterion"
        )
    num_passed = sum(bool(r["passed"]) for r in results)
    reward = num_passed / len(results)
    grading.update(
        reward=reward,
        passed=num_passed == len(results),
        num_passed=num_passed,
        num_criteria=len(results),
        results=results,
        skipped=skipped,
    )
    grading.pop("pending", None)
    (verifier_dir / "grading.json").write_text(json.dumps(grading, indent=2) + "\n")
    values = {"reward": reward, "pass": float(num_passed == len(results))}
    values |= {str(r["id"]): float(bool(r["passed"])) for r in results}
    write_reward_json(verifier_dir, values)


def skipped_judge_criteria(trials_dir: Path) -> dict[str, dict[str, int]]:
    """Per task, how many of its trials were graded without each judge criterion (no judge,
    `missing="skip"`), from the grading.json of every trial under `trials_dir` (each step's too).
    Empty when nothing was skipped; a run reports it so that a reward graded on fewer criteria
    is never mistaken for the full rubric's."""
    found: dict[str, dict[str, int]] = {}
    for result in sorted(trials_dir.glob("*/result.json")):
        try:
            task = str(json.loads(result.read_text(encoding="utf-8")).get("task_name"))
        except (OSError, ValueError, AttributeError):
            continue  # a trial that never finished writing its result: counted nowhere
        for grading in sorted(result.parent.rglob("grading.json")):
            try:
                skipped = json.loads(grading.read_text(encoding="utf-8")).get("skipped") or []
            except (OSError, ValueError, AttributeError):
                continue
            for criterion in skipped:
                counts = found.setdefault(task, {})
                counts[str(criterion)] = counts.get(str(criterion), 0) + 1
    return found
