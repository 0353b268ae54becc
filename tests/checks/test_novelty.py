"""Copy novelty (`bureau tasks overlap`'s second table): spans of hand-made tasks, their
novelty against a hand-made training side, token and bigram shares on a character tokenizer,
then one small built starter pair through the command."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bureau.checks.novelty import (
    SeenText,
    Span,
    TaskSpans,
    find_novelty,
    load_task_spans,
    planned_task_spans,
    task_spans,
)
from bureau.cli.main import app
from bureau.worlds.builder import BuildConfig, build_split
from bureau.worlds.taskwriter import ANSWER_CONVENTION

QUESTION = """# Register lookup: C-105

Look up contract C-105 in `contracts/contract_register.xlsx` (not C-1050) and the named
range WACC, for 2026 and contracts over USD 1,620,000. Write a memo to `output/memo.docx`.

## Answer keys

Write `output/answer.json` with these keys:

- `counterparty`: string
"""
INSTRUCTION = QUESTION + "\n" + ANSWER_CONVENTION


def test_spans_of_a_task() -> None:
    params = {
        "cid": "C-105",
        "names": ["WACC", "EBITDA"],  # EBITDA is not in the instruction: taken from the files
        "range": {"year": 2026, "min_value": 1620000, "rounding": 2},  # 2: not as a word
        "prefix": "C-10",  # only inside C-105 and C-1050: not in the prompt
        "format": "YYYY-MM-DD",  # only in the answer convention: not in the prompt
    }
    gold = {
        "counterparty": "Fontaine Supply Co",
        "annual_value": 700000,
        "rate": 6489.285000000001,
        "ids": ["C-105", "C-7"],  # C-105 is copied from the prompt: once, as an instruction span
        "passed": True,  # booleans and nulls are not copied
        "cap": None,
    }
    assert task_spans(INSTRUCTION, params, gold) == [
        Span("contracts/contract_register.xlsx", "instruction"),
        Span("output/memo.docx", "instruction"),  # output/answer.json and `/workspace` are not
        Span("C-105", "instruction"),
        Span("WACC", "instruction"),
        Span("EBITDA", "files"),
        Span("2026", "instruction"),
        Span("1,620,000", "instruction"),  # as the instruction writes it
        Span("C-10", "files"),
        Span("YYYY-MM-DD", "files"),
        Span("Fontaine Supply Co", "answer"),
        Span("700000", "answer"),
        Span("6489.285", "answer"),  # binary noise rounded away
        Span("C-7", "answer"),
    ]


def test_a_span_occurs_only_token_delimited() -> None:
    seen = SeenText(
        [
            "Look up contract C-1050 for Fontaine Supply Co.\n\nThe rest of it.",
            "Read contracts/executed/C-206_weber.pdf and the WACC.",
        ]
    )
    assert "C-1050" in seen and "Fontaine Supply Co" in seen and "WACC" in seen
    assert "C-105" not in seen  # only inside C-1050
    assert "C-206" in seen  # an underscore delimits, a letter or digit does not
    assert "Supply Co." in seen and "Fontaine Supply" in seen
    assert "ontaine" not in seen and "Co. The" not in seen  # across paragraphs
    assert "WAC" not in seen and "?" not in seen


def test_novelty_against_training() -> None:
    train = [
        TaskSpans(
            "a",
            "t",
            "Look up contract C-1050 in `contracts/contract_register.xlsx`.",
            (Span("C-1050", "instruction"), Span("Fontaine Supply Co", "answer")),
        )
    ]
    held_out = [
        TaskSpans(
            "x",
            "t",
            "Look up contract C-105 in `contracts/contract_register.xlsx`.",
            (
                Span("contracts/contract_register.xlsx", "instruction"),  # in an instruction
                Span("C-105", "instruction"),  # novel: training has only C-1050
                Span("Fontaine Supply Co", "answer"),  # a training answer
                Span("Fontaine", "answer"),  # novel: not equal to one, in no instruction
            ),
        ),
        TaskSpans("y", "t", "", (Span("C-1050", "instruction"),)),
        TaskSpans(
            "z", "u", "", (Span("C-1050", "instruction"), Span("Fontaine Supply Co", "answer"))
        ),
        # Only an answer value is new: a program that copies the prompt's names reads it.
        TaskSpans("w", "v", "", (Span("C-1050", "instruction"), Span("Fontaine", "answer"))),
    ]
    report = find_novelty(train, held_out)
    t, u = report.templates["t"], report.templates["u"]
    assert (t.tasks, t.instruction_spans, t.answer_spans) == (2, 3, 2)
    assert (t.novel_instruction_spans, t.novel_answer_spans, t.tasks_needing_new) == (1, 1, 1)
    assert (t.share("spans"), t.share("tasks"), t.share("tokens")) == (2 / 5, 1 / 2, None)
    assert t.examples == ["C-105", "Fontaine"] and not t.needs_nothing_new
    assert u.needs_nothing_new and u.share("spans") == 0.0
    v = report.templates["v"]
    assert v.needs_nothing_new and (v.tasks_needing_new, v.tasks_needing_new_answer) == (0, 1)
    assert report.needs_nothing_new == ["u", "v"]
    assert (report.overall.tasks, report.overall.spans, report.overall.novel_spans) == (4, 9, 3)
    written = json.loads(json.dumps(report.to_dict()))
    assert written["templates"]["u"]["needs_nothing_new"] is True
    assert written["all"]["novel_spans_share"] == round(3 / 9, 4)
    assert written["tokenized"] is False and written["all"]["novel_tokens_share"] is None


class CharTokenizer:
    """One token per character, its code point the id."""

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        assert not add_special_tokens
        return [ord(c) for c in text]


def test_token_and_bigram_shares() -> None:
    # Training shows the ids of "a", "b", " ", "c" and (from its answer " d") "d"; its bigrams
    # are ab, b_, _c and _d.
    train = [TaskSpans("a", "t", "ab c", (Span("d", "answer"),))]
    held_out = [
        TaskSpans(
            "x",
            "t",
            "",
            (
                Span("ab", "instruction"),  # seen: " ab", no new id, bigrams not counted
                Span("ca", "answer"),  # novel: " ca", no new id; _c seen, ca new
                Span("e", "answer"),  # novel: " e", e new; _e new
            ),
        )
    ]
    row = find_novelty(train, held_out, CharTokenizer()).templates["t"]
    assert (row.tokens, row.novel_tokens) == (8, 1)
    assert (row.novel_span_bigrams, row.novel_bigrams) == (3, 2)
    assert (row.share("tokens"), row.share("bigrams")) == (1 / 8, 2 / 3)


def test_a_multi_step_task_copies_what_each_step_does(tmp_path: Path) -> None:
    task = tmp_path / "task"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /workspace\n")
    config = '[task]\nname = "bureau/m"\n[metadata]\ntemplate = "t.multi"\n'
    (task / "task.toml").write_text(config + '[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n')
    steps = {
        "one": ("Build `output/book.xlsx` from the Core Peers tab.", "Core Peers", 5),
        "two": ("Now add FY2025E to `output/book.xlsx`.", "FY2025E", "Core Peers"),
    }
    for name, (question, value, gold) in steps.items():
        part = task / "steps" / name
        (part / "tests").mkdir(parents=True)
        (part / "solution").mkdir()
        (part / "instruction.md").write_text(f"# Step {name}\n\n{question}\n")
        (part / "tests" / "test.sh").write_text("#!/usr/bin/env bash\n")
        (part / "tests" / "test.sh").chmod(0o755)
        (part / "tests" / "rubric.json").write_text(json.dumps({"gold": {"k": gold}}))
        params = {"template": "t.multi", "step": name, "value": value}
        (part / "solution" / "params.json").write_text(json.dumps(params))
    (found,) = load_task_spans(task)
    assert (found.task, found.template) == ("bureau/m", "t.multi")
    assert found.spans == (
        Span("output/book.xlsx", "instruction"),
        Span("Core Peers", "instruction"),
        Span("5", "answer"),
        Span("FY2025E", "instruction"),
    )
    assert "# Step one" in found.instruction and "# Step two" in found.instruction


def test_overlap_command_reports_novelty(tmp_path: Path, tokenizer_cache: Path) -> None:
    """A small built starter pair: the planned spans are the built ones, and the command's
    report has a novelty row per held-out template."""
    train = BuildConfig("train", 3, 24, 0, tmp_path / "train", "starter", jobs=1)
    held_out = BuildConfig("eval", 3, 24, 0, tmp_path / "eval", "starter", jobs=1)
    build_split(train)
    build_split(held_out)
    assert planned_task_spans(held_out) == load_task_spans(held_out.out)
    report = tmp_path / "overlap.json"
    args = ["tasks", "overlap", str(train.out), str(held_out.out), "--report", str(report)]
    result = CliRunner().invoke(app, [*args, "--tokenizer-cache", str(tokenizer_cache)])
    assert result.exit_code == 0, result.output
    assert "novel in " in result.output  # the examples under the novelty table
    novelty = json.loads(report.read_text())["novelty"]
    params = held_out.out.glob("*/solution/params.json")
    assert set(novelty["templates"]) == {json.loads(p.read_text())["template"] for p in params}
    assert (novelty["vocab"], novelty["tokenized"]) == ("qwen3-demo", True)
    assert (novelty["train_tasks"], novelty["held_out_tasks"]) == (24, 24)
    for row in novelty["templates"].values():
        assert row["tasks"] > 0 and row["spans"] > 0 and row["novel_tokens_share"] is not None


def test_a_value_observed_in_the_files_counts_as_copied() -> None:
    """A prompt that names only a folder asks nothing new, but the id the program copies from
    that folder's listing can be: the template then needs a new span."""
    train = [TaskSpans("a", "w", "List `contracts/executed/`.", (Span("C-105", "files"),))]
    held_out = [
        TaskSpans("x", "w", "List `contracts/executed/`.", (Span("C-777", "files"),)),
        TaskSpans("y", "v", "List `contracts/executed/`.", (Span("C-105", "files"),)),
    ]
    report = find_novelty(train, held_out)
    w, v = report.templates["w"], report.templates["v"]
    assert (w.files_spans, w.novel_files_spans, w.tasks_needing_new) == (1, 1, 1)
    assert not w.needs_nothing_new and v.needs_nothing_new  # C-105: training copied it too
    assert report.needs_nothing_new == ["v"]
