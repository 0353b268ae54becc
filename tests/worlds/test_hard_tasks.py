"""The harder shapes of task. Long-horizon templates need four files of four kinds, and their
planted contradictions matter: an answer that takes the stale day (the one an older email or
the calendar entry's "originally" note gives) fails. Infeasible tasks want null and a reason:
a made-up value, a hedge (a value and a reason) and a bare null all fail, and null on an
answerable task fails too. A multi-step task's second step works on the first one's
deliverable, offline and in a sandbox. A hard world is crowded past 500 files and 10,000
messages, and its tasks keep an oracle that scores 1.0."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tomllib
from datetime import date, datetime
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest

from bureau.checks.offline import check_tasks, grade_workspace, run_oracle
from bureau.sandbox import get_runtime
from bureau.tasks.dataset import validate_dataset
from bureau.tasks.taskdir import load_task_dir, read_prompt
from bureau.trials.agents import NopAgent, OracleAgent
from bureau.trials.trial import run_trial
from bureau.worlds.builder import MANIFEST, BuildConfig, build_split
from bureau.worlds.fabric import long_date

LONG = {
    # template: (answer key that holds the calendar's day, part of its calendar entry's summary,
    # filled from the gold answer and the oracle's parameters)
    "law.termination_plan": ("serve_date", "Serve termination notice: {contract_id} "),
    "consulting.milestone_invoice": ("invoice_date", "({milestone})"),
    "banking.bid_deadline_terms": ("bid_deadline", "final bid deadline"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("shapes") / "eval"
    # 40 tasks a world: a whole cycle of its templates (briefs drawn 18 times in it), so each
    # shape below is there.
    build_split(
        BuildConfig("eval", 3, 120, 4, out, files_per_world=30, jobs=1, judge_criteria=True)
    )
    return out, json.loads((out / MANIFEST).read_text())["tasks"]


@pytest.fixture(scope="module")
def split(built: tuple[Path, list[dict[str, Any]]]) -> tuple[Path, list[dict[str, Any]]]:
    out, tasks = built
    return out, [t for t in tasks if t["template"] in LONG]


def test_each_domain_has_a_task_needing_four_files_of_four_kinds(
    split: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, tasks = split
    assert {t["template"] for t in tasks} == set(LONG)
    for task in tasks:
        evidence = task["evidence"]
        assert len(evidence) == 4 and len({Path(f).suffix for f in evidence}) == 4, evidence
        workspace = out / task["path"] / "environment" / "workspace"
        assert all((workspace / f).is_file() for f in evidence), evidence
    outcomes = check_tasks([out / t["path"] for t in tasks], "oracle", jobs=1)
    assert [(o.task_id, o.reward) for o in outcomes if o.reward != 1.0] == []


def _originally(workspace: Path, summary: str) -> tuple[str, str]:
    """(current day, day before it moved) of the calendar entry whose summary has `summary`."""
    for ics in workspace.glob("calendar/*.ics"):
        text = re.sub(r"\r?\n[ \t]", "", ics.read_text())
        for event in text.split("BEGIN:VEVENT")[1:]:
            if summary in event:
                start = re.search(r"DTSTART;VALUE=DATE:(\d{8})", event)
                was = re.search(r"originally \w+ (\d{2} \w+ \d{4})", event)
                assert start and was, event
                current = datetime.strptime(start.group(1), "%Y%m%d").date().isoformat()
                return current, datetime.strptime(was.group(1), "%d %B %Y").date().isoformat()
    raise AssertionError(f"no calendar entry {summary!r}")


def _body(path: Path) -> str:
    message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
    body = message.get_body(preferencelist=("plain",))
    return " ".join(body.get_content().split()) if body is not None else ""


def test_the_stale_day_fails_and_the_current_one_passes(
    split: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, tasks = split
    for task in tasks:
        task_dir = out / task["path"]
        gold = json.loads((task_dir / "tests" / "rubric.json").read_text())["gold"]
        key, summary = LONG[task["template"]]
        workspace = tmp_path / task["task_id"]
        shutil.copytree(task_dir / "environment" / "workspace", workspace)
        params = json.loads((task_dir / "solution" / "params.json").read_text())
        current, stale = _originally(workspace, summary.format(**gold, **params))
        assert gold[key] == current != stale
        # The older email or note that gives the stale day is in the workspace too.
        said = long_date(date.fromisoformat(stale))
        assert any(said in _body(mail) for mail in workspace.glob("mail/**/*.eml")), said
        verifier = tmp_path / f"{task['task_id']}-logs"
        verifier.mkdir()
        answer = workspace / "output" / "answer.json"
        answer.parent.mkdir(exist_ok=True)
        answer.write_text(json.dumps(gold))
        assert grade_workspace(task_dir, workspace, verifier)[0] == 1.0
        answer.write_text(json.dumps({**gold, key: stale}))
        reward, passed, failed = grade_workspace(task_dir, workspace, verifier)
        assert not passed and reward < 1.0 and failed, task["task_id"]


def _grade(task_dir: Path, answer: dict[str, Any], tmp: Path) -> tuple[float, list[str]]:
    workspace, verifier = tmp / "workspace", tmp / "verifier"
    shutil.rmtree(tmp, ignore_errors=True)
    (workspace / "output").mkdir(parents=True)
    verifier.mkdir()
    (workspace / "output" / "answer.json").write_text(json.dumps(answer))
    reward, _, failed = grade_workspace(task_dir, workspace, verifier)
    return reward, failed


def test_infeasible_tasks_want_null_and_the_reason_and_nothing_else(
    built: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, tasks = built
    infeasible = [t for t in tasks if t["infeasible"]]
    assert {t["domain"] for t in infeasible} == {"law", "consulting", "banking"}
    outcomes = check_tasks([out / t["path"] for t in infeasible], "oracle", jobs=1)
    assert [(o.task_id, o.error) for o in outcomes if o.reward != 1.0] == []
    for task in infeasible:
        task_dir = out / task["path"]
        rubric = json.loads((task_dir / "tests" / "rubric.json").read_text())
        meta = tomllib.loads((task_dir / "task.toml").read_text())["metadata"]
        assert meta["infeasible"] is True
        assert "unsupported_reason" in (task_dir / "instruction.md").read_text()
        nulls = [c["field"] for c in rubric["criteria"] if c["type"] == "unsupported"]
        (mention,) = [c for c in rubric["criteria"] if c["type"] == "mentions"]
        reason = "Not in the files: " + ", ".join(group[0] for group in mention["terms"]) + "."
        answered = {k: v for k, v in rubric["gold"].items() if v is not None}
        right = {**answered, **dict.fromkeys(nulls), "unsupported_reason": reason}
        assert _grade(task_dir, right, tmp_path / "right")[0] == 1.0
        made_up = {**right, **dict.fromkeys(nulls, 1_000_000)}
        made_up.pop("unsupported_reason")
        reward, failed = _grade(task_dir, made_up, tmp_path / "made-up")
        assert reward <= 1 - (len(nulls) + 1) / len(rubric["criteria"]) + 1e-9, failed
        hedge = {**made_up, "unsupported_reason": reason}  # a value and a reason
        assert _grade(task_dir, hedge, tmp_path / "hedge")[0] < 1.0
        bare = {**right}
        bare.pop("unsupported_reason")  # null with no reason
        assert _grade(task_dir, bare, tmp_path / "bare")[0] < 1.0
        every = {**right, "unsupported_reason": reason + " " + "candidate " * 40}
        assert _grade(task_dir, every, tmp_path / "long")[0] < 1.0  # no listing everything


def test_null_on_an_answerable_task_scores_nothing(
    built: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, tasks = built
    twins = {"law.liability_cap", "consulting.sow_milestone", "banking.model_line_item"}
    for task in [t for t in tasks if t["template"] in twins]:
        task_dir = out / task["path"]
        gold = json.loads((task_dir / "tests" / "rubric.json").read_text())["gold"]
        abstain = {**dict.fromkeys(gold), "unsupported_reason": "Not in the files."}
        assert _grade(task_dir, abstain, tmp_path / task["task_id"])[0] == 0.0


def test_a_multi_step_task_builds_on_its_first_step(
    built: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, tasks = built
    multi = [t for t in tasks if t["steps"]]
    assert {t["template"] for t in multi} == {
        "law.renewal_pipeline",
        "consulting.billing_plan",
        "banking.comps_valuation",
    }
    report = validate_dataset(out, require_solution=True)
    assert report.ok, report.summary()
    for task in multi:
        task_dir = out / task["path"]
        config = tomllib.loads((task_dir / "task.toml").read_text())
        names = task["steps"]
        assert [step["name"] for step in config["steps"]] == names and len(names) == 2
        assert not (task_dir / "instruction.md").exists()  # each step has its own prompt
        second = (task_dir / "steps" / names[1] / "instruction.md").read_text()
        assert re.search(r"`output/\w+\.xlsx`", second), second  # the first step's workbook
        prompt = load_task_dir(task_dir).prompt  # every step's, in order
        assert prompt == read_prompt(task_dir) and prompt.endswith(second)
    dirs = [out / t["path"] for t in multi]
    for mode, expected in (("oracle", 1.0), ("empty", 0.0)):
        outcomes = check_tasks(dirs, mode, jobs=1)  # type: ignore[arg-type]
        assert [(o.task_id, o.reward, o.error) for o in outcomes if o.reward != expected] == []
    # The second step reads the first one's workbook: without it, its oracle has nothing.
    for task, task_dir in zip(multi, dirs, strict=True):
        workspace = tmp_path / task["task_id"]
        shutil.copytree(task_dir / "environment" / "workspace", workspace)
        with pytest.raises(FileNotFoundError):
            run_oracle(task_dir / "steps" / task["steps"][1], workspace, tmp_path)


def test_a_memo_in_prose_has_its_facts_checked_and_its_prose_judged(
    built: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """consulting.fee_update_memo: the rubric checks the memo's total and approved ids; the
    judge (built with --judge-criteria) reads the prose against a reference that gives every
    change request's outcome, the rejected ones too."""
    out, tasks = built
    task = next(t for t in tasks if t["template"] == "consulting.fee_update_memo")
    task_dir = out / task["path"]
    rubric = json.loads((task_dir / "tests" / "rubric.json").read_text())
    (judged,) = [c for c in rubric["criteria"] if c["type"] == "judge"]
    assert judged["path"] == "output/fee_update_memo.docx"
    approved = set(rubric["gold"]["approved_change_requests"])
    named = set(re.findall(r"CR-\d+", judged["reference"]))
    assert approved and approved < named  # a rejected request is in the reference too
    assert "not approved" in judged["reference"]
    workspace = tmp_path / "workspace"
    shutil.copytree(task_dir / "environment" / "workspace", workspace)
    run_oracle(task_dir, workspace, tmp_path / "verifier")
    reward, passed, failed = grade_workspace(task_dir, workspace, tmp_path / "verifier")
    assert (reward, passed) == (1.0, True), failed  # offline: the judge criterion left out
    # A memo whose prose is right but which leaves out the line the rubric reads fails it.
    import docx

    memo = workspace / "output" / "fee_update_memo.docx"
    document = docx.Document(str(memo))
    for paragraph in document.paragraphs:
        if paragraph.text.startswith("approved change requests:"):
            paragraph.text = "The client approved some of the requests."
    document.save(str(memo))
    reward, passed, failed = grade_workspace(task_dir, workspace, tmp_path / "verifier")
    assert not passed and any("approved" in reason for reason in failed), failed


def test_a_multi_step_task_runs_in_a_sandbox_step_by_step(
    built: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, tasks = built
    task = load_task_dir(out / next(t for t in tasks if t["steps"])["path"])
    runtime = get_runtime("local", root=tmp_path / "sandboxes")
    try:
        for agent, expected in ((OracleAgent(), 1.0), (NopAgent(), 0.0)):
            done = asyncio.run(run_trial(task, agent, runtime, tmp_path / agent.name))
            assert done.exception_info is None, done.exception_info
            steps = (done.verifier_result or {})["step_results"]
            assert [s["rewards"]["reward"] for s in steps] == [expected, expected]
            assert done.reward == expected
    finally:
        runtime.close()


def test_a_hard_world_is_crowded_and_its_oracle_scores_one(tmp_path: Path) -> None:
    report = build_split(BuildConfig("eval", 1, 12, 2, tmp_path / "hard", "hard", jobs=1))
    (world,) = json.loads((tmp_path / "hard" / MANIFEST).read_text())["worlds"]
    assert 500 <= world["n_files"] <= 700
    assert world["messages"]["mail"] + world["messages"]["chat"] >= 10_000
    assert report["difficulty"] == "hard"
    dirs = sorted(p for p in (tmp_path / "hard").iterdir() if (p / "task.toml").exists())
    assert [(o.task_id, o.error) for o in check_tasks(dirs, "oracle", jobs=1) if not o.ok] == []
