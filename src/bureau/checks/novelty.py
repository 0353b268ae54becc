"""What a held-out task must copy that training never showed: copy novelty per template.

A program that answers a task copies three kinds of text, a task's *spans* (`task_spans`).
From the prompt: the file paths its question names and the values the question is about (the
contract id `C-105`, the named range `WACC`): the oracle's parameters that the instruction
states verbatim. From what it observes in the files: the oracle's other parameters, which the
instruction does not state (the id of the one contract a folder holds, found by listing it).
And the answer's values (a counterparty's name, a number), read from the files.

A held-out span is *novel* when no training instruction holds it as a whole token-delimited
substring (`C-105` is not in `C-1050`; letters and digits are what a span may not run into)
and no training answer or observed value equals it. A template whose held-out tasks need no
novel span at all measures in-distribution skill, not transfer: a policy could pass them by
reproducing what it saw in training (`TemplateNovelty.needs_nothing_new`). The flag is about
what a program must copy (prompt and observed spans): a task whose only novel spans are answer
values a program reads from the files (a number in a workbook) asks nothing new of a policy
that copies the right names into that program; the answer spans are counted apart.

Characters can be new where the spans are not. With a tokenizer, each span is encoded alone
with a leading space (the way it sits in a sentence or a JSON value) and two shares are
measured against the tokens of the training side (its instructions, and its answers encoded
as the spans are): the spans' tokens whose id never occurs there, and the token bigrams of the
novel spans that never occur there, which is what catches a digit never seen in a position
(the demo's eval contract ids start with digits training's never do).

`load_task_spans` reads a built dataset; `planned_task_spans` plans a build as
`overlap.planned_instructions` does, without writing it, for the full default splits in seconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal, Protocol

from bureau.checks.overlap import PlannedWorld, load_tasks, plan_worlds, template_of
from bureau.tasks.taskdir import TaskDir
from bureau.worlds.builder import BuildConfig
from bureau.worlds.spec import ANSWER_FILE
from bureau.worlds.taskwriter import ANSWER_CONVENTION, task_instruction

Source = Literal["instruction", "files", "answer"]
EXAMPLES = 5
"""Novel spans kept per template as examples."""
FLOAT_DECIMALS = 6
"""A float answer's text is its JSON text once rounded here, which drops binary noise
(6489.285000000001 is 6489.285)."""

_CONVENTION = re.compile(
    rf"^{re.escape(ANSWER_CONVENTION.splitlines()[0])}$.*?(?=^# |\Z)", re.MULTILINE | re.DOTALL
)
"""The answer convention every bureau instruction ends with, up to the next step's title."""
_PATH = re.compile(r"`([^`\s]*/[^`\s]*)`")
_ALNUM = re.compile(r"[^\W_]+")
"""A run of letters and digits: what a span may not run into at either end."""
_OMITTED_PARAMS = frozenset({"template", "step"})
"""Keys params.json adds to the oracle's parameters: which program and which step to run."""


class Encoder(Protocol):
    """A tokenizer, as far as this module needs one (a Hugging Face tokenizer is one)."""

    def encode(self, text: str, *, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class Span:
    text: str
    source: Source
    """`instruction`: copied from the prompt; `files`: a value the program needs that the
    prompt does not state (found in the files); `answer`: a gold value, read from the files."""


@dataclass(frozen=True)
class TaskSpans:
    task: str
    template: str
    instruction: str
    """Everything the agent is told (each step's instruction, for a multi-step task)."""
    spans: tuple[Span, ...]


def task_spans(instruction: str, params: Mapping[str, Any], gold: Mapping[str, Any]) -> list[Span]:
    """What an answer to one task (or one step) must copy, each text once.

    Instruction spans: the backticked file paths outside the answer convention (the answer
    file aside), then every string of `params` (and every number, as written or with thousands
    separators) that the instruction outside the convention holds, token-delimited. Files
    spans: the strings of `params` the instruction does not hold (what a program must take from
    what it observes). Answer spans: every string and number of `gold` (JSON text; `null` and
    booleans are not copied). A text met twice counts once, as its first span."""
    question = _CONVENTION.sub("", instruction)
    found = [Span(p, "instruction") for p in _PATH.findall(question) if p != ANSWER_FILE]
    for value in _leaves(params):
        if isinstance(value, str):
            if value.strip():
                found.append(Span(value, "instruction" if _occurs(value, question) else "files"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            # As JSON writes it, else as a sentence does (1620000 as "USD 1,620,000").
            forms = [json.dumps(value), *([f"{value:,}"] if isinstance(value, int) else [])]
            found += [Span(form, "instruction") for form in forms if _occurs(form, question)][:1]
    found += [Span(text, "answer") for text in answer_texts(gold)]
    return _unique(found)


def answer_texts(gold: Mapping[str, Any]) -> list[str]:
    """The gold answer's strings and numbers (as JSON text), in order."""
    texts = []
    for value in _leaves(gold):
        if isinstance(value, str) and value.strip():
            texts.append(value)
        elif isinstance(value, float):
            texts.append(json.dumps(round(value, FLOAT_DECIMALS)))
        elif isinstance(value, int) and not isinstance(value, bool):
            texts.append(json.dumps(value))
    return texts


def load_task_spans(root: Path) -> list[TaskSpans]:
    """Every task's spans from a built dataset (or one task folder)."""
    return [spans_of(task) for task, _ in load_tasks(root)]


def spans_of(task: TaskDir) -> TaskSpans:
    """A loaded task's spans: each step's, from its instruction, `solution/params.json` and
    `tests/rubric.json`'s gold, for a multi-step task. A task without params or a rubric (a
    plain Harbor task) has only its instruction's paths."""
    parts = [task.for_step(str(s.get("name", ""))) for s in task.steps] or [task]
    spans = _unique(s for p in parts for s in task_spans(p.instruction, *_params_and_gold(p)))
    return TaskSpans(task.name, template_of(task), task.prompt, tuple(spans))


def planned_task_spans(cfg: BuildConfig) -> list[TaskSpans]:
    """The spans of the tasks that building `cfg` would write, in the dataset's order, without
    writing them (`overlap.plan_worlds`): the full default splits in seconds."""
    return plan_worlds(cfg, _world_spans)


def _world_spans(world: PlannedWorld) -> list[TaskSpans]:
    starter = world.ctx.difficulty == "starter"
    found = []
    for j, spec in enumerate(world.specs):
        parts = [part for _, part in spec.steps] or [spec]
        # Through JSON, as a build writes them: tuples become lists, keys strings.
        spans = _unique(
            span
            for part in parts
            for span in task_spans(
                task_instruction(part, starter=starter),
                _params(json.loads(json.dumps(part.oracle))),
                json.loads(json.dumps(part.gold)),
            )
        )
        prompt = task_instruction(spec, starter=starter)
        found.append(TaskSpans(world.task_name(j), spec.template, prompt, tuple(spans)))
    return found


def _params_and_gold(part: TaskDir) -> tuple[dict[str, Any], dict[str, Any]]:
    params_file = part.solution_dir / "params.json"
    rubric_file = part.tests_dir / "rubric.json"
    params = json.loads(params_file.read_text("utf-8")) if params_file.is_file() else {}
    rubric = json.loads(rubric_file.read_text("utf-8")) if rubric_file.is_file() else {}
    gold = rubric.get("gold") if isinstance(rubric, dict) else None
    return (
        _params(params) if isinstance(params, dict) else {},
        gold if isinstance(gold, dict) else {},
    )


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in _OMITTED_PARAMS}


def _unique(spans: Iterable[Span]) -> list[Span]:
    """Each text once, as its first span."""
    first: dict[str, Span] = {}
    for span in spans:
        first.setdefault(span.text, span)
    return list(first.values())


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _delimited(text: str, start: int, end: int) -> bool:
    return (start == 0 or not _ALNUM.match(text, start - 1)) and (
        end == len(text) or not _ALNUM.match(text, end)
    )


def _occurs(span: str, text: str) -> bool:
    """`span` in `text` with no letter or digit right before or after it."""
    start = text.find(span)
    while start >= 0:
        if _delimited(text, start, start + len(span)):
            return True
        start = text.find(span, start + 1)
    return False


class SeenText:
    """Texts indexed by their letter-and-digit runs, to ask whether a span occurs in one of
    them token-delimited: only the places where the span's rarest run occurs are compared,
    so the training side of the default splits answers thousands of spans in well under a
    second. The texts are kept as their distinct paragraphs (the answer convention once)."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.paragraphs = sorted({p for text in texts for p in text.split("\n\n")})
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for n, paragraph in enumerate(self.paragraphs):
            for run in _ALNUM.finditer(paragraph):
                self.postings.setdefault(run.group(), []).append((n, run.start()))

    def __contains__(self, span: object) -> bool:
        if not isinstance(span, str) or not span:
            return False
        runs = list(_ALNUM.finditer(span))
        if not runs:
            return any(_occurs(span, p) for p in self.paragraphs)
        rarest = min(runs, key=lambda run: len(self.postings.get(run.group(), ())))
        for n, start in self.postings.get(rarest.group(), ()):
            begin, paragraph = start - rarest.start(), self.paragraphs[n]
            if (
                begin >= 0
                and paragraph.startswith(span, begin)
                and _delimited(paragraph, begin, begin + len(span))
            ):
                return True
        return False


@dataclass
class TemplateNovelty:
    """Copy novelty of one template's held-out tasks (or of all of them)."""

    tasks: int = 0
    instruction_spans: int = 0
    files_spans: int = 0
    answer_spans: int = 0
    novel_instruction_spans: int = 0
    novel_files_spans: int = 0
    novel_answer_spans: int = 0
    tasks_needing_new: int = 0
    """Tasks with at least one novel span to copy into a program (instruction or files)."""
    tasks_needing_new_answer: int = 0
    """Tasks with at least one novel answer span."""
    tokens: int = 0
    novel_tokens: int = 0
    """The spans' tokens whose id the training side never holds (0 without a tokenizer)."""
    novel_span_bigrams: int = 0
    novel_bigrams: int = 0
    """The novel spans' token bigrams the training side never holds."""
    examples: list[str] = field(default_factory=list)

    @property
    def spans(self) -> int:
        return self.instruction_spans + self.files_spans + self.answer_spans

    @property
    def novel_spans(self) -> int:
        return self.novel_instruction_spans + self.novel_files_spans + self.novel_answer_spans

    @property
    def needs_nothing_new(self) -> bool:
        """No held-out task of the template has a span to copy, from its prompt or from what
        it observes, that training never showed (answer values read from the files aside)."""
        return self.tasks > 0 and self.novel_instruction_spans + self.novel_files_spans == 0

    def share(self, measure: str) -> float | None:
        """`spans`, `tasks`, `tokens` or `bigrams`: the novel share, None with nothing to
        count (no spans, or no tokenizer)."""
        novel, total = {
            "spans": (self.novel_spans, self.spans),
            "tasks": (self.tasks_needing_new, self.tasks),
            "tokens": (self.novel_tokens, self.tokens),
            "bigrams": (self.novel_bigrams, self.novel_span_bigrams),
        }[measure]
        return novel / total if total else None

    def to_dict(self) -> dict[str, Any]:
        shares = {
            f"novel_{m}_share": None if (v := self.share(m)) is None else round(v, 4)
            for m in ("spans", "tasks", "tokens", "bigrams")
        }
        return {
            **vars(self),
            "spans": self.spans,
            "novel_spans": self.novel_spans,
            **shares,
            "needs_nothing_new": self.needs_nothing_new,
        }


@dataclass
class NoveltyReport:
    train_tasks: int
    held_out_tasks: int
    tokenized: bool
    """Whether the token and bigram counts were measured (a tokenizer was given)."""
    templates: dict[str, TemplateNovelty] = field(default_factory=dict)
    overall: TemplateNovelty = field(default_factory=TemplateNovelty)

    @property
    def needs_nothing_new(self) -> list[str]:
        """The templates whose held-out tasks copy nothing new."""
        return sorted(name for name, row in self.templates.items() if row.needs_nothing_new)

    def to_dict(self) -> dict[str, Any]:
        return {
            "train_tasks": self.train_tasks,
            "held_out_tasks": self.held_out_tasks,
            "tokenized": self.tokenized,
            "needs_nothing_new": self.needs_nothing_new,
            "all": self.overall.to_dict(),
            "templates": {name: t.to_dict() for name, t in sorted(self.templates.items())},
        }


def find_novelty(
    train: Sequence[TaskSpans], held_out: Sequence[TaskSpans], tokenizer: Encoder | None = None
) -> NoveltyReport:
    """Each held-out task's spans against what training shows: every training instruction's
    text and every training answer and observed value (see the module docstring)."""
    seen_text = SeenText(t.instruction for t in train)
    # What training programs wrote or copied from the files counts as shown, as its prompts do.
    seen_answers = {s.text for t in train for s in t.spans if s.source != "instruction"}
    tokens = _SeenTokens(tokenizer, seen_text.paragraphs, seen_answers) if tokenizer else None
    novel: dict[str, bool] = {}
    report = NoveltyReport(len(train), len(held_out), tokens is not None)
    for task in held_out:
        row = report.templates.setdefault(task.template or "(none)", TemplateNovelty())
        needs_new = {"instruction": False, "files": False, "answer": False}
        for span in task.spans:
            if span.text not in novel:
                novel[span.text] = span.text not in seen_answers and span.text not in seen_text
            for counts in (row, report.overall):
                _count(counts, span, novel[span.text], tokens)
            needs_new[span.source] |= novel[span.text]
        for counts in (row, report.overall):
            counts.tasks += 1
            counts.tasks_needing_new += needs_new["instruction"] or needs_new["files"]
            counts.tasks_needing_new_answer += needs_new["answer"]
    return report


def _count(row: TemplateNovelty, span: Span, novel: bool, tokens: _SeenTokens | None) -> None:
    if span.source == "instruction":
        row.instruction_spans += 1
        row.novel_instruction_spans += novel
    elif span.source == "files":
        row.files_spans += 1
        row.novel_files_spans += novel
    else:
        row.answer_spans += 1
        row.novel_answer_spans += novel
    if novel and len(row.examples) < EXAMPLES and span.text not in row.examples:
        row.examples.append(span.text)
    if tokens is not None:
        ids = tokens.encode(span.text)
        row.tokens += len(ids)
        row.novel_tokens += sum(i not in tokens.ids for i in ids)
        if novel:
            pairs = list(pairwise(ids))
            row.novel_span_bigrams += len(pairs)
            row.novel_bigrams += sum(p not in tokens.bigrams for p in pairs)


class _SeenTokens:
    """The token ids and id bigrams of the training side: its instructions (their distinct
    paragraphs, encoded one by one) and its answers, encoded as spans are."""

    def __init__(self, tokenizer: Encoder, paragraphs: Iterable[str], answers: Iterable[str]):
        self.tokenizer = tokenizer
        self._spans: dict[str, list[int]] = {}
        self.ids: set[int] = set()
        self.bigrams: set[tuple[int, int]] = set()
        encoded = [tokenizer.encode(p, add_special_tokens=False) for p in paragraphs]
        for ids in [*encoded, *(self.encode(text) for text in answers)]:
            self.ids.update(ids)
            self.bigrams.update(pairwise(ids))

    def encode(self, span: str) -> list[int]:
        """A span alone, with the space before it that it has in a sentence or a JSON value."""
        if span not in self._spans:
            self._spans[span] = self.tokenizer.encode(" " + span, add_special_tokens=False)
        return self._spans[span]
