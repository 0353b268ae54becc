"""What a task's answer needs, and the scripted explorer that finds it through the tools.

The files an oracle needs are found by moving each file it opens away and grading its answer
without it: for the long-horizon templates they are exactly the four files their specs list,
and an oracle that scans the whole mailbox needs only the message that matters. The explorer
then runs as a real trial (sandbox, MCP tools, verifier, the harness) on those tasks: it
searches, reads every needed file among the ones the search turned up, and answers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bureau.bootstrap.explorer import Explorer, explore, read_calls, search_terms
from bureau.bootstrap.teacher import Criterion, TaskView
from bureau.checks.oracle_reads import needed_files, trace_reads
from bureau.harness.loop import HarnessConfig
from bureau.worlds.builder import MANIFEST, BuildConfig, build_split

LONG = {"law.termination_plan", "consulting.milestone_invoice", "banking.bid_deadline_terms"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("effort") / "eval"
    # 40 tasks a world: a whole cycle of its templates (briefs drawn 18 times in it).
    build_split(BuildConfig("eval", 3, 120, 4, out, files_per_world=30, jobs=1))
    return out, json.loads((out / MANIFEST).read_text())["tasks"]


def test_search_terms_are_the_instructions_specific_words() -> None:
    text = (
        "# Termination plan\n\nFor contract C-1042 with Fontaine Systems, the notice in "
        '"Master Supply Agreement" and what Ana Weber wrote.\n\n## Answer keys\n\n'
        "- `serve_date`: the day\n\n## How to answer\n\nWrite output/answer.json."
    )
    assert search_terms(text) == [
        "C-1042",
        "Master Supply Agreement",
        "Fontaine Systems",
        "Ana Weber",
    ]
    assert search_terms("# Title\n\nWhat is the total?\n") == []


def test_each_kind_of_file_is_read_with_its_tool() -> None:
    assert read_calls("models/m.xlsx") == [("sheet_list", {"path": "models/m.xlsx"})]
    assert [c[1]["sheet"] for c in read_calls("models/m.xlsx", ["P&L", "BS"])] == ["P&L", "BS"]
    assert read_calls("mail/inbox/a.eml") == [("mail_read", {"message": "inbox/a.eml"})]
    assert read_calls("chat/legal-ops.json")[0][0] == "chat_read"
    assert read_calls("calendar/legal_deadlines.ics")[0][1]["calendar"] == "legal_deadlines.ics"
    assert read_calls("notes/a.md") == [("fs_read_text", {"path": "notes/a.md"})]


def test_the_explorer_stops_once_every_needed_file_is_read() -> None:
    """Pure: observations fed by hand. The search finds three files; the needed one is the
    second by hits, so the first (a distractor) is read too, then the answer is written."""
    view = TaskView(
        "t",
        "# T\n\nFor contract C-1042 of Fontaine Systems.\n\n## Answer keys\n\n- `x`: x\n",
        [Criterion("x", "numeric", 5.0)],
    )
    explorer = Explorer(view, ["contracts/b.pdf"])
    turns = [explorer.next_turn(None)]  # the tree
    hits = (
        "3 matches:\nnotes/a.md (line 1): C-1042\nnotes/a.md (line 9): C-1042\n"
        "contracts/b.pdf (page 1): C-1042"
    )
    turns.append(explorer.next_turn("tree"))  # search C-1042
    turns.append(explorer.next_turn(hits))  # search Fontaine Systems
    turns.append(explorer.next_turn("no match"))  # reads notes/a.md first (two hits)
    turns.append(explorer.next_turn("text"))  # then contracts/b.pdf
    turns.append(explorer.next_turn("pdf text"))  # writes the answer
    turns.append(explorer.next_turn("written"))
    assert explorer.calls == [
        "fs_tree", "fs_search_content", "fs_search_content", "fs_read_text", "pdf_read_pages",
        "fs_write_text",
    ]  # fmt: skip
    assert explorer.read == ["notes/a.md", "contracts/b.pdf"]
    call = json.loads(turns[-2].split("<tool_call>")[1].split("</tool_call>")[0])
    assert json.loads(call["arguments"]["content"]) == {"x": 5}
    assert "<tool_call>" not in turns[-1]


def test_needed_files_are_fewer_than_the_oracle_opens(
    built: tuple[Path, list[dict[str, Any]]],
) -> None:
    """The long-horizon templates need three or four files of as many kinds; the law one
    exactly the four its spec lists. (The others' specs list a file the answer can do without:
    a rejected change request's decision email, since without an approval nothing changes; a
    model whose figure the board deck repeats.)"""
    out, tasks = built
    for task in (t for t in tasks if t["template"] in LONG):
        opened = trace_reads(out / task["path"]).files
        needed = needed_files(out / task["path"], opened)
        assert set(needed) <= set(opened)
        assert len(needed) >= 3 and len({Path(f).suffix for f in needed}) >= 3, needed
        if task["template"] == "law.termination_plan":
            assert needed == sorted(task["evidence"])
    # An oracle that reads the mail for the latest word on a contract needs one message.
    scanning = [t for t in tasks if t["template"] == "law.notice_current"]
    assert scanning, sorted({t["template"] for t in tasks})
    opened = trace_reads(out / scanning[0]["path"]).files
    needed = needed_files(out / scanning[0]["path"], opened)
    assert sum(f.startswith("mail/") for f in needed) == 1 and len(opened) > len(needed), (
        needed,
        opened,
    )


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_explorer_finds_and_reads_the_evidence_in_a_sandboxed_trial(
    built: tuple[Path, list[dict[str, Any]]], tiny_model: Path, tmp_path: Path
) -> None:
    out, tasks = built
    chosen = list({t["template"]: t for t in tasks if t["template"] in LONG}.values())
    rows = explore(
        [out / t["path"] for t in chosen], tiny_model, HarnessConfig(max_turns=80), tmp_path,
        concurrency=2,
    )  # fmt: skip
    assert len(rows) == len(chosen) == 3
    for row in rows:
        assert not row.system_error, row
        assert row.evidence == row.evidence_read >= 3, row
        assert row.tool_calls >= row.files_read + 2 >= 6, row  # the tree and a search at least
        assert row.reward == 1.0, row  # the answer keys, written after the reads
        assert row.stop_reason == "answered", row
    written = [
        json.loads(line) for line in (tmp_path / "explorations.jsonl").read_text().splitlines()
    ]
    assert [w["task"] for w in written] == [r.task for r in rows]


def test_the_gold_answer_of_an_infeasible_task_is_null_with_its_reason(
    built: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """A task the files cannot support: the teacher's view reads its `unsupported` and
    `mentions` criteria, and the answer built from them (null, and a reason naming each term)
    passes the task's rubric."""
    from bureau.bootstrap.teacher import gold_answer
    from bureau.checks.offline import grade_workspace

    out, tasks = built
    infeasible = [t for t in tasks if t["infeasible"]]
    assert infeasible, sorted({t["template"] for t in tasks})
    for task in infeasible:
        folder = out / task["path"]
        view = TaskView.from_task_dir(folder, task["task_id"], "")
        answer = gold_answer(view.criteria)
        assert None in answer.values() and isinstance(answer["unsupported_reason"], str)
        workspace = tmp_path / task["task_id"]
        (workspace / "output").mkdir(parents=True)
        (workspace / "output" / "answer.json").write_text(json.dumps(answer))
        reward, passed, failed = grade_workspace(folder, workspace, tmp_path / "verifier")
        assert passed and reward == 1.0, failed
