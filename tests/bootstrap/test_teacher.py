"""The teacher's plan, formatting and mistakes, without a model or a sandbox."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from bootstrap_fakes import SHEET, register_task
from pydantic import ValidationError

from bureau.bootstrap.config import MISTAKES, Mistake, MistakeRates
from bureau.bootstrap.teacher import (
    FINAL_MESSAGE,
    GIVE_UP_MESSAGE,
    Criterion,
    Teacher,
    distractor,
    plain_number,
    sheet_of_named_range,
)
from bureau.harness.parse import parse_assistant


def _call(text: str) -> tuple[str, dict[str, object]]:
    parsed = parse_assistant(text)
    assert parsed.error is None and len(parsed.tool_calls) == 1, text
    return parsed.tool_calls[0].name, parsed.tool_calls[0].arguments


def test_the_instruction_gives_the_file_and_the_keys() -> None:
    task = register_task()
    assert task.named_files == ["contracts/contract_register.xlsx"]
    assert task.answer_keys == ["counterparty", "annual_value"]


def test_a_clean_demonstration_reads_writes_and_answers() -> None:
    teacher = Teacher(register_task(), None, random.Random(0))
    assert _call(teacher.next_turn(None)) == (
        "sheet_read",
        {"path": "contracts/contract_register.xlsx"},
    )
    name, arguments = _call(teacher.next_turn(SHEET))
    assert name == "fs_write_text" and arguments["path"] == "output/answer.json"
    assert json.loads(str(arguments["content"])) == {
        "counterparty": "Castillo Systems",
        "annual_value": 2010000,
    }
    assert teacher.next_turn("created output/answer.json") == FINAL_MESSAGE


def test_numbers_get_the_fewest_decimals_the_tolerance_accepts() -> None:
    assert plain_number(2010000.0, 0.001, 0.01) == 2010000
    # tolerance max(0.06, 0.0334) = 0.06; 33.4 is 0.038 off (more than half), 33.44 is not
    assert plain_number(33.43829040417075, 0.001, 0.06) == 33.44
    assert plain_number(10.65, 0.001, 0.01) == 10.65


def test_the_named_range_sheet_comes_from_the_listing() -> None:
    listing = "defined names: TotalRespondents = Summary!$B$6; AvgWTP = Summary!$D$6"
    assert sheet_of_named_range(listing) == "Summary"
    assert sheet_of_named_range("no names") is None


def test_a_wrong_value_is_another_value_from_the_tool_output() -> None:
    rng = random.Random(3)
    numeric = Criterion("annual_value", "numeric", 2010000, 0.001, 0.01)
    assert distractor(numeric, SHEET, rng) in {1, 2, 3, 103, 107, 1075000}
    text = Criterion("counterparty", "text", "Castillo Systems")
    assert distractor(text, SHEET, rng) in {"Contract ID", "Petrov Analytics", "Annual Value"}
    assert distractor(Criterion("passed", "text", "yes"), "", rng) == "no"


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_changes_the_trajectory_as_described(mistake: Mistake) -> None:
    teacher = Teacher(register_task(), mistake, random.Random(1))
    first = teacher.next_turn(None)
    if mistake == "malformed_call":
        assert parse_assistant(first).error is not None
        first = teacher.next_turn("Your last tool call could not be read")
    name, arguments = _call(first)
    if mistake == "wrong_file":
        assert arguments == {"message": "inbox/2025-01-02_hello.eml"} and name == "mail_read"
        return
    second = teacher.next_turn(SHEET)
    if mistake == "give_up":
        assert second == GIVE_UP_MESSAGE
        return
    answer = json.loads(str(_call(second)[1]["content"]))
    gold = {"counterparty": "Castillo Systems", "annual_value": 2010000}
    if mistake == "missing_key":  # the last key asked for is the one left out
        assert answer == {"counterparty": "Castillo Systems"}
    elif mistake == "wrong_value":
        assert answer.keys() == gold.keys()
        assert sum(answer[k] != gold[k] for k in gold) == 1
    else:
        assert answer == gold


def test_mistake_rates_are_honoured() -> None:
    rates = MistakeRates(
        wrong_file=0.1, wrong_value=0.2, missing_key=0.05, malformed_call=0.05, give_up=0.1
    )
    rng = random.Random(0)
    counts = Counter(rates.draw(rng) for _ in range(20000))
    for name in MISTAKES:
        assert counts[name] / 20000 == pytest.approx(getattr(rates, name), abs=0.01)
    assert counts[None] / 20000 == pytest.approx(0.5, abs=0.01)
    off = MistakeRates.off()
    assert {off.draw(rng) for _ in range(100)} == {None}
    with pytest.raises(ValidationError, match="more than 1"):
        MistakeRates(wrong_file=0.6, wrong_value=0.6)


@pytest.mark.parametrize("mistake", [None, "missing_key", "give_up"])
def test_the_answer_can_be_the_final_message(mistake: Mistake | None) -> None:
    teacher = Teacher(register_task(), mistake, random.Random(1), answer_in_message=True)
    assert _call(teacher.next_turn(None))[0] == "sheet_read"
    final = teacher.next_turn(SHEET)
    assert parse_assistant(final).tool_calls == []
    if mistake == "give_up":
        assert final == GIVE_UP_MESSAGE
        return
    answer = json.loads(final)
    gold = {"counterparty": "Castillo Systems", "annual_value": 2010000}
    if mistake is None:
        assert answer == gold
    else:
        assert len(answer) == 1 and answer.items() <= gold.items()
