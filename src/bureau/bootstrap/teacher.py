"""The scripted teacher: what to say in each assistant turn of a starter task.

A starter task names its file in the instruction (`contracts/contract_register.xlsx`) and asks
for a few answer keys. The teacher reads that file with the tool for its type, reads the sheet
that a named range points to when the task is about named ranges, writes
`output/answer.json` with the keys the instruction lists, and ends with a short message (or,
with `answer_in_message`, ends with the answer object itself as its final message, which the
harness writes to `output/answer.json`). Every
call is one that a model could learn to make from what it sees: the path and the keys come from
the instruction, the sheet name from the previous tool output. The values come from the task's
rubric on the host (the teacher knows the answer), formatted as plainly as the tolerance allows.

With `lookup_by_code`, three kinds of starter task are short programs instead
(`code_run_python`): a row lookup (the row of the id the instruction names, the answer keys from
the columns that hold them); a row lookup whose id the instruction does not give but a folder it
names does (a first program lists the folder, and the lookup copies the id from that listing:
two tool calls, the second acting on what the first showed); and named ranges (each name's
value, times 100 when the question asks for percent, or the sheet of the one name given). The
programs are as short as they can be while staying plain Python (single quotes, which JSON
does not escape; no folder creation, since `output/` exists), because a tiny policy pays for
every token it decodes, and they end with `DONE`.

A seeded mistake changes one trajectory the way a weak policy fails: another file is read and
answered from, one value is replaced by another number or name seen in the tool output, one key
is left out, the first call is broken JSON (the harness then asks for a correction), or the
teacher gives up after reading.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bureau.bootstrap.config import Mistake
from bureau.grading.rubric import leaf_criteria

ANSWER_PATH = "output/answer.json"
FINAL_MESSAGE = "I wrote my answer to output/answer.json."
DONE = "Done."
"""The closing message after a program wrote the answer (`lookup_by_code`)."""
GIVE_UP_MESSAGE = "I could not find the answer in the files."
READ_TOOLS = {
    ".xlsx": "sheet_read",
    ".pdf": "pdf_read_pages",
    ".docx": "docx_read",
    ".pptx": "slides_read",
    ".eml": "mail_read",
}
_NAMED_FILE = re.compile(r"`([^`\s]+\.(?:xlsx|pdf|docx|pptx|eml))`")
_NAMED_FOLDER = re.compile(r"`([^`\s]+)/`")
_ANSWER_KEY = re.compile(r"^- `([^`]+)`:", re.MULTILINE)
_DEFINED_NAME = re.compile(r"(\w+) = '?([^'!]+)'?!")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
_ROW_KEY = re.compile(r"\b[A-Z]{1,4}-\d{2,6}\b")
_FILED_KEY = re.compile(r"(?<![A-Za-z0-9])[A-Z]{1,4}-\d{2,6}(?!\d)")
"""A row id at the start of a file name (`C-105_weber-supply-co_supply.pdf`)."""

ToolCall = tuple[str, dict[str, Any]]


@dataclass
class Criterion:
    """One graded answer key: its type, the expected value and the numeric tolerance."""

    key: str
    kind: str
    expected: Any
    rel_tol: float = 0.0
    abs_tol: float = 0.0


@dataclass
class TaskView:
    """What the teacher knows about a task: what the model sees, plus the rubric."""

    name: str
    instruction: str
    criteria: list[Criterion]
    workspace_files: list[str] = field(default_factory=list)
    workspace: Path | None = None
    """The task's workspace on the host (the teacher may look at its files)."""

    @property
    def named_files(self) -> list[str]:
        """Files named in the instruction, in order, without repeats."""
        found = [m for m in _NAMED_FILE.findall(self.instruction) if m != ANSWER_PATH]
        return list(dict.fromkeys(found))

    @property
    def named_folders(self) -> list[str]:
        """Folders the question names (`contracts/executed/`), without the slash (not the
        answer convention's `output/`)."""
        question = self.instruction.split("## Answer keys")[0]
        return list(dict.fromkeys(_NAMED_FOLDER.findall(question)))

    @property
    def row_key(self) -> str | None:
        """The first row id the instruction names (`C-103`), if any."""
        match = _ROW_KEY.search(self.instruction)
        return match.group(0) if match else None

    @property
    def answer_keys(self) -> list[str]:
        """The keys listed under the instruction's answer keys."""
        return _ANSWER_KEY.findall(self.instruction)

    @classmethod
    def from_task_dir(cls, path: Path, name: str, instruction: str) -> TaskView:
        rubric = json.loads((path / "tests" / "rubric.json").read_text())
        criteria = [
            Criterion(
                c["field"], c["type"], _expected(c), c.get("rel_tol", 0.0), c.get("abs_tol", 0.0)
            )
            for c in leaf_criteria(rubric["criteria"])
            if "field" in c
        ]
        workspace = path / "environment" / "workspace"
        files = sorted(
            str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file()
        ) if workspace.is_dir() else []  # fmt: skip
        return cls(name, instruction, criteria, files, workspace if workspace.is_dir() else None)


def _expected(criterion: dict[str, Any]) -> Any:
    """The answer that passes a field criterion: its `expected` value; for `unsupported`, null;
    for `mentions`, a sentence naming each term in its first spelling."""
    if criterion["type"] == "unsupported":
        return None
    if criterion["type"] == "mentions":
        named = ", ".join(spellings[0] for spellings in criterion["terms"])
        return f"The files do not support it: {named}."[: criterion.get("max_chars", 300)]
    return criterion["expected"]


def plain_number(value: float, rel_tol: float, abs_tol: float) -> int | float:
    """`value` with the fewest decimals that the grader's tolerance still accepts."""
    if float(value).is_integer():
        return int(value)
    tolerance = max(abs_tol, rel_tol * abs(value)) or 1e-9
    for decimals in range(7):
        rounded = round(value, decimals)
        if abs(rounded - value) <= tolerance * 0.5:
            return int(rounded) if decimals == 0 else rounded
    return value


def gold_answer(criteria: list[Criterion]) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    for c in criteria:
        if c.kind == "numeric":
            answer[c.key] = plain_number(float(c.expected), c.rel_tol, c.abs_tol)
        else:
            answer[c.key] = c.expected
    return answer


def read_call(path: str) -> ToolCall:
    """The tool call that reads `path` whole, by its extension."""
    tool = READ_TOOLS.get(Path(path).suffix, "fs_read_text")
    if tool == "mail_read":
        return tool, {"message": path.removeprefix("mail/")}
    return tool, {"path": path}


def answer_columns(workbook: Path, key: str, criteria: list[Criterion]) -> dict[str, str] | None:
    """For each criterion, the header of the column whose cell, in the first row of the first
    sheet that holds `key`, equals the expected value (None if a criterion has no such cell)."""
    import openpyxl

    rows = list(openpyxl.load_workbook(workbook, read_only=True).active.values)
    return columns_of(rows, key, criteria)


def columns_of(
    rows: list[tuple[Any, ...]], key: str, criteria: list[Criterion]
) -> dict[str, str] | None:
    """`answer_columns` on a sheet's rows (the first one the header)."""
    row = next((r for r in rows[1:] if key in r), None)
    if row is None:
        return None
    columns: dict[str, str] = {}
    for c in criteria:
        for header, value in zip(rows[0], row, strict=False):
            if isinstance(header, str) and _same(value, c):
                columns[c.key] = header
                break
        else:
            return None
    return columns


def _same(value: Any, c: Criterion) -> bool:
    if c.kind == "numeric":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        tolerance = max(c.abs_tol, c.rel_tol * abs(float(c.expected)), 1e-9)
        return abs(float(value) - float(c.expected)) <= tolerance
    return isinstance(value, str) and value == c.expected


def lookup_call(path: str, key: str, columns: dict[str, str]) -> ToolCall:
    """A `code_run_python` call that finds the row of `path` holding `key` and writes the
    answer keys from the named columns of that row to output/answer.json."""
    picks = ",".join(f"{_q(k)}:d[{_q(h)}]" for k, h in columns.items())
    code = (
        "import json,openpyxl\n"
        f"r=list(openpyxl.load_workbook({_q(path)}).active.values)\n"
        f"d=dict(zip(r[0],next(x for x in r if {_q(key)} in x)))\n"
        f"json.dump({{{picks}}},open({_q(ANSWER_PATH)},'w'))\n"
    )
    return "code_run_python", {"code": code}


def listing_call(folder: str) -> ToolCall:
    """A `code_run_python` call that prints the names in `folder`, sorted."""
    return "code_run_python", {"code": f"import os\nprint(sorted(os.listdir({_q(folder)})))\n"}


def named_range_call(path: str, picks: list[tuple[str, str, str]]) -> ToolCall:
    """A `code_run_python` call that reads named ranges of the workbook at `path` and writes
    the answer keys to output/answer.json: `picks` holds (answer key, defined name, what),
    `what` being `value`, `percent` (the value times 100) or `sheet` (the sheet it is on)."""
    reads = {"value": "round(v({})[1],2)", "percent": "round(v({})[1]*100,2)", "sheet": "v({})[0]"}
    answer = ",".join(f"{_q(key)}:{reads[what].format(_q(name))}" for key, name, what in picks)
    code = (
        "import json,openpyxl\n"
        f"b=openpyxl.load_workbook({_q(path)},data_only=True)\n"
        "def v(n):\n"
        " s,c=next(b.defined_names[n].destinations)\n"
        " return s,b[s][c].value\n"
        f"json.dump({{{answer}}},open({_q(ANSWER_PATH)},'w'))\n"
    )
    return "code_run_python", {"code": code}


def _q(text: str) -> str:
    """`text` as a single-quoted Python string literal."""
    if "'" in text or "\\" in text or "\n" in text:
        return repr(text)
    return f"'{text}'"


def call_text(call: ToolCall) -> str:
    name, arguments = call
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def malformed_text(call: ToolCall) -> str:
    """The call with its closing brace lost: not JSON, so the harness answers a correction."""
    return call_text(call).replace("}}\n</tool_call>", "}\n</tool_call>")


def write_call(answer: dict[str, Any]) -> ToolCall:
    content = json.dumps(answer)
    return "fs_write_text", {"path": ANSWER_PATH, "content": content, "mode": "overwrite"}


def sheet_of_named_range(observation: str) -> str | None:
    """The sheet that the first defined name of a `sheet_list` output points to."""
    match = _DEFINED_NAME.search(observation)
    return match.group(2) if match else None


def distractor(criterion: Criterion, seen: str, rng: random.Random) -> Any:
    """A wrong value for `criterion`, taken from the tool output `seen` when it can be."""
    expected = criterion.expected
    if criterion.kind == "numeric":
        tolerance = max(criterion.abs_tol, criterion.rel_tol * abs(float(expected)), 1e-9)
        numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(seen)]
        numbers = [n for n in numbers if abs(n - float(expected)) > tolerance]
        value = rng.choice(numbers) if numbers else float(expected) * rng.choice((0.5, 1.5, 2.0))
        return plain_number(value, criterion.rel_tol, criterion.abs_tol)
    names = [n for n in dict.fromkeys(_NAME.findall(seen)) if n not in json.dumps(expected)]
    if criterion.kind == "entity_list":
        items = list(expected)
        if items and (not names or rng.random() < 0.5):
            return items[:-1]
        return [*items, rng.choice(names)] if names else [*items, "Unknown"]
    if isinstance(expected, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", expected):
        day = dt.date.fromisoformat(expected) + dt.timedelta(days=rng.choice((-7, -1, 1, 14)))
        return day.isoformat()
    if isinstance(expected, str) and expected.lower() in ("yes", "no"):
        return "no" if expected.lower() == "yes" else "yes"
    return rng.choice(names) if names else f"{expected} Group"


class ScriptedTurns:
    """Turns from a generator: `next_turn(observation)` gives the next assistant text.

    The observation is the text the harness appended since the previous turn (a tool result, a
    correction), None before the first turn. Subclasses write `_turns()`, which yields each
    turn's text and receives the observation that followed it.
    """

    def _turns(self) -> Generator[str, str, None]:
        raise NotImplementedError

    def next_turn(self, observation: str | None) -> str:
        if not hasattr(self, "_script"):
            self._script = self._turns()
            return next(self._script)
        try:
            return self._script.send(observation or "")
        except StopIteration:
            # Past the script (the harness kept going): answer again and stop.
            return FINAL_MESSAGE


class Teacher(ScriptedTurns):
    """The turns of one starter-task trajectory (see the module docstring)."""

    def __init__(
        self,
        task: TaskView,
        mistake: Mistake | None,
        rng: random.Random,
        *,
        answer_in_message: bool = False,
        lookup_by_code: bool = False,
    ) -> None:
        self.task = task
        self.lookup_by_code = lookup_by_code
        self.mistake = mistake
        self.rng = rng
        self.answer_in_message = answer_in_message

    def _targets(self) -> list[str]:
        named = self.task.named_files or self.task.workspace_files[:1]
        if self.mistake == "wrong_file":
            others = [f for f in self.task.workspace_files if f not in named]
            kinds = (".xlsx",) if self.lookup_by_code else tuple(READ_TOOLS)
            same_kind = [f for f in others if Path(f).suffix in kinds]
            if same_kind or others:
                return [self.rng.choice(same_kind or others)]
        return named

    def _turns(self) -> Generator[str, str, None]:
        plan = self._code_plan()
        if plan is not None:
            yield from self._code_turns(*plan)
            return
        listing = self._listing_plan()
        if listing is not None:
            yield from self._listing_turns(*listing)
            return
        names = self._named_range_plan()
        if names is not None:
            yield from self._named_range_turns(*names)
            return
        seen: list[str] = []
        for index, path in enumerate(self._targets()):
            call = read_call(path)
            named_range = path.endswith(".xlsx") and "named range" in self.task.instruction
            if named_range:
                call = ("sheet_list", {"path": path})
            if self.mistake == "malformed_call" and index == 0:
                yield malformed_text(call)
            seen.append((yield call_text(call)))
            sheet = sheet_of_named_range(seen[-1]) if named_range else None
            if sheet is not None:
                seen.append((yield call_text(("sheet_read", {"path": path, "sheet": sheet}))))
        if self.mistake == "give_up":
            yield GIVE_UP_MESSAGE
            return
        answer = self._answer("\n".join(seen))
        if self.answer_in_message:
            yield json.dumps(answer)
            return
        yield call_text(write_call(answer))
        yield FINAL_MESSAGE

    def _code_plan(self) -> tuple[str, str, dict[str, str], list[str]] | None:
        """(file, row id, answer key -> column, every column) when the task is a row lookup
        that `lookup_by_code` solves: one spreadsheet named, a row id in the instruction, and
        every answer in a cell of that row."""
        named, key, root = self.task.named_files, self.task.row_key, self.task.workspace
        if not self.lookup_by_code or key is None or root is None or len(named) != 1:
            return None
        if not named[0].endswith(".xlsx") or not (root / named[0]).is_file():
            return None
        import openpyxl

        rows = list(openpyxl.load_workbook(root / named[0], read_only=True).active.values)
        columns = columns_of(rows, key, self.task.criteria) if rows else None
        if columns is None:
            return None
        return named[0], key, columns, [h for h in rows[0] if isinstance(h, str)]

    def _code_turns(
        self, path: str, key: str, columns: dict[str, str], headers: list[str]
    ) -> Generator[str, str, None]:
        if self.mistake == "give_up":
            yield GIVE_UP_MESSAGE
            return
        yield from self._one_program(self._lookup_program(path, key, columns, headers))

    def _lookup_program(
        self, path: str, key: str, columns: dict[str, str], headers: list[str]
    ) -> ToolCall:
        """The row lookup with this trajectory's mistake, if it is one a lookup can make."""
        if self.mistake == "wrong_file":
            path = self._targets()[0]
        elif self.mistake == "wrong_value":
            wrong = self.rng.choice(list(columns))
            others = [h for h in headers if h != columns[wrong]]
            if others:
                columns = {**columns, wrong: self.rng.choice(others)}
        elif self.mistake == "missing_key" and len(columns) > 1:
            columns = dict(columns)
            del columns[self._forgotten(list(columns))]
        order = {k: i for i, k in enumerate(self.task.answer_keys)}
        columns = dict(sorted(columns.items(), key=lambda kv: order.get(kv[0], len(order))))
        return lookup_call(path, key, columns)

    def _listing_plan(self) -> tuple[str, str, str, dict[str, str], list[str]] | None:
        """(folder, register, row id, answer key -> column, every column) when the instruction
        names one folder and one spreadsheet and no row id, and the folder holds one file whose
        name starts with a row id of that spreadsheet: list the folder, then look the id up."""
        folders, named, root = self.task.named_folders, self.task.named_files, self.task.workspace
        if not self.lookup_by_code or self.task.row_key is not None or root is None:
            return None
        if len(folders) != 1 or len(named) != 1 or not named[0].endswith(".xlsx"):
            return None
        if not (root / folders[0]).is_dir() or not (root / named[0]).is_file():
            return None
        filed = [_FILED_KEY.match(f.name) for f in (root / folders[0]).iterdir()]
        keys = [m.group(0) for m in filed if m]
        if len(keys) != 1:
            return None
        import openpyxl

        rows = list(openpyxl.load_workbook(root / named[0], read_only=True).active.values)
        columns = columns_of(rows, keys[0], self.task.criteria) if rows else None
        if columns is None:
            return None
        return folders[0], named[0], keys[0], columns, [h for h in rows[0] if isinstance(h, str)]

    def _listing_turns(
        self, folder: str, path: str, key: str, columns: dict[str, str], headers: list[str]
    ) -> Generator[str, str, None]:
        """List the folder, copy the id from what the listing printed into the lookup."""
        listing = listing_call(folder)
        if self.mistake == "malformed_call":
            yield malformed_text(listing)
        seen = yield call_text(listing)
        if self.mistake == "give_up":
            yield GIVE_UP_MESSAGE
            return
        found = _FILED_KEY.search(seen.split("--- stdout ---")[-1] if seen else "")
        program = self._lookup_program(path, found.group(0) if found else key, columns, headers)
        yield call_text(program)
        yield DONE

    def _named_range_plan(self) -> tuple[str, list[tuple[str, str, str]], list[str]] | None:
        """(file, [(answer key, defined name, value|percent|sheet)], every defined name) when
        the task asks for named ranges of one spreadsheet that `lookup_by_code` reads with one
        program: each answer key is a name's value (times 100 when the instruction asks for
        percent), or the sheet of the only name the instruction gives."""
        named, root = self.task.named_files, self.task.workspace
        instruction = self.task.instruction
        if not self.lookup_by_code or root is None or len(named) != 1:
            return None
        if "named range" not in instruction or not named[0].endswith(".xlsx"):
            return None
        if not (root / named[0]).is_file():
            return None
        import openpyxl

        book = openpyxl.load_workbook(root / named[0], read_only=False, data_only=True)
        every = list(book.defined_names)
        asked = [n for n in every if re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", instruction)]
        if not asked:
            return None
        percent = "percent" in instruction.split("## Answer keys")[0]  # the question asks
        picks: list[tuple[str, str, str]] = []
        for c in self.task.criteria:
            if c.key == "sheet" and len(asked) == 1:
                picks.append((c.key, asked[0], "sheet"))
                continue
            match = [n for n in asked if n.lower() == c.key.lower()]
            if c.key == "value" and len(asked) == 1:
                match = asked
            if len(match) != 1 or c.kind != "numeric":
                return None
            picks.append((c.key, match[0], "percent" if percent else "value"))
        return named[0], picks, every

    def _named_range_turns(
        self, path: str, picks: list[tuple[str, str, str]], every: list[str]
    ) -> Generator[str, str, None]:
        if self.mistake == "give_up":
            yield GIVE_UP_MESSAGE
            return
        if self.mistake == "wrong_file":
            path = self._targets()[0]
        elif self.mistake == "wrong_value":
            values = [i for i, (_, _, what) in enumerate(picks) if what != "sheet"]
            k = self.rng.choice(values)
            key, name, what = picks[k]
            others = [n for n in every if n != name]
            if what == "percent":
                picks = [*picks[:k], (key, name, "value"), *picks[k + 1 :]]  # forgot the x100
            elif others:
                picks = [*picks[:k], (key, self.rng.choice(others), what), *picks[k + 1 :]]
        elif self.mistake == "missing_key" and len(picks) > 1:
            forgotten = self._forgotten([key for key, _, _ in picks])
            picks = [p for p in picks if p[0] != forgotten]
        yield from self._one_program(named_range_call(path, picks))

    def _one_program(self, call: ToolCall) -> Generator[str, str, None]:
        """The program's call (broken first with `malformed_call`), then the closing message."""
        if self.mistake == "malformed_call":
            yield malformed_text(call)
        yield call_text(call)
        yield DONE

    def _forgotten(self, keys: list[str]) -> str:
        """The key a `missing_key` mistake leaves out: the last one the instruction asks for,
        as someone who stops early would. Always the same one, so the mistake is one decision
        (go on, or close the answer) that a policy copies as often as the teacher made it."""
        order = {k: i for i, k in enumerate(self.task.answer_keys)}
        return max(keys, key=lambda k: order.get(k, len(order)))

    def _answer(self, seen: str) -> dict[str, Any]:
        criteria = self.task.criteria
        answer = gold_answer(criteria)
        if self.mistake == "wrong_file":
            answer = {c.key: distractor(c, seen, self.rng) for c in criteria}
        elif self.mistake == "wrong_value" and criteria:
            wrong = self.rng.choice(criteria)
            answer[wrong.key] = distractor(wrong, seen, self.rng)
        elif self.mistake == "missing_key" and answer:
            del answer[self._forgotten(list(answer))]
        # The instruction's key order (the grader ignores order; a model sees this one).
        order = {k: i for i, k in enumerate(self.task.answer_keys)}
        return dict(sorted(answer.items(), key=lambda kv: order.get(kv[0], len(order))))
