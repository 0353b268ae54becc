"""What a domain generator hands the builder: world context in, task specs out.

A domain module (`bureau.worlds.domains.<name>`) exposes `build(ctx) -> facts` to write the
world's files and a list of `Template`s that turn those facts into `TaskSpec`s. Criteria are
plain dicts in the `bureau-rubric/1` schema that `bureau.grading` reads; the helpers below build
them so every template states its checks the same way.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .render.calendar import CalendarEvent, write_ics
from .render.documents import DocSpec, write_docx
from .render.messages import ChatMessage, Email, write_chat, write_eml
from .render.pdf import PdfDoc
from .render.sheets import WorkbookSpec, write_workbook
from .render.slides import DeckSpec, write_pptx

Domain = Literal["law", "consulting", "banking"]
DOMAINS: tuple[Domain, ...] = ("law", "consulting", "banking")
Difficulty = Literal["starter", "standard", "hard"]
Kind = Literal["fact", "multi_hop", "compute", "reconcile", "deliverable"]

ANSWER_FILE = "output/answer.json"
OUTPUT_DIR = "output"


@dataclass
class PdfProbe:
    """Where a task's answer sits in a PDF, for measuring naive text extraction.

    The naive reader takes `pypdf`'s stream-order text, finds `label`, and reads the first
    number after it. The probe says whether that would give `expected`.
    """

    file: str
    label: str
    expected: float
    layout: Literal["two_column", "table"]


@dataclass
class TaskSpec:
    template: str
    kind: Kind
    title: str
    question: str
    answer_keys: dict[str, str]
    criteria: list[dict[str, Any]]
    gold: dict[str, Any]
    oracle: dict[str, Any]
    signature: str
    deliverables: dict[str, str] = field(default_factory=dict)  # path -> what it must hold
    pdf_probe: PdfProbe | None = None
    judged: list[dict[str, Any]] = field(default_factory=list)
    """LLM-judge criteria the template offers; a build adds them with --judge-criteria."""
    evidence: list[str] = field(default_factory=list)
    """The workspace files whose facts the answer needs (each read by the oracle), for the
    files-per-answer figure of the difficulty ladder; empty where a template does not say."""
    steps: list[tuple[str, TaskSpec]] = field(default_factory=list)
    """A multi-step task (Harbor's `[[steps]]`): each named step's own prompt, answer keys,
    criteria and oracle, run in order in one sandbox; a later step works on what an earlier
    one produced. The task's own question and criteria are then unused."""
    infeasible: bool = False
    """The files cannot support the asked answer: the rubric wants null and the reason
    (`unsupported`, `mentions`), and a made-up value scores nothing."""
    held_out_kind: bool = False
    """Its template is a held-out kind (`Template.held_out`): set when the task is chosen."""


@dataclass
class Template:
    name: str
    kind: Kind
    make: Callable[[Any, random.Random, int], TaskSpec | None]
    difficulties: tuple[Difficulty, ...] = ("standard",)
    """Where the template is offered; a hard world offers every standard template too."""
    held_out: bool = False
    """A held-out kind: no training split gets it, so an eval can report how the policy does
    on kinds of task it never trained on (`held_out_kind` in task.toml's metadata)."""
    weight: int = 1
    """How many of a world's draws the template gets against 1 for most (`builder.choose_tasks`):
    the briefs (`bureau.worlds.briefs`) are drawn about as often as all other templates together."""


@dataclass
class WorldContext:
    world_id: str
    domain: Domain
    split: str
    difficulty: Difficulty
    company: str
    workspace: Path
    rng: random.Random
    n_files: int
    files: list[str] = field(default_factory=list)
    file_notes: dict[str, str] = field(default_factory=dict)
    """What a reader should know of a file that its name does not say (a scan's text layer)."""
    render: bool = True
    """False when only the world's tasks are wanted (`builder.plan_instructions`): the
    workbooks, documents and decks are not serialised (most of a build's time), everything else
    runs as in a build, so the same random draws give the same facts and tasks."""

    @property
    def email_domain(self) -> str:
        return self.company.split()[0].lower() + ".example.com"

    def path(self, rel: str) -> Path:
        target = self.workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel in self.files:
            raise ValueError(f"world {self.world_id}: file {rel} written twice")
        self.files.append(rel)
        return target

    def pdf(self, rel: str, title: str, **kwargs: str) -> PdfDoc:
        return PdfDoc(self.path(rel), title, **kwargs)

    def xlsx(self, rel: str, spec: WorkbookSpec) -> None:
        target = self.path(rel)
        if self.render:
            write_workbook(target, spec)

    def docx(self, rel: str, spec: DocSpec) -> None:
        target = self.path(rel)
        if self.render:
            write_docx(target, spec)

    def pptx(self, rel: str, spec: DeckSpec) -> None:
        target = self.path(rel)
        if self.render:
            write_pptx(target, spec)

    def email(self, rel: str, mail: Email) -> str:
        if not self.render:  # attachments may be unwritten; the Message-ID does not use them
            mail = dataclasses.replace(mail, attachments=[])
        return write_eml(self.path(rel), mail, domain=self.email_domain)

    def chat(self, rel: str, channel: str, members: list[str], msgs: list[ChatMessage]) -> None:
        write_chat(self.path(rel), channel, members, msgs)

    def calendar(self, rel: str, name: str, zone: str, events: list[CalendarEvent]) -> None:
        write_ics(self.path(rel), name, zone, events)


# -- criteria -------------------------------------------------------------------------------
def numeric(
    field_: str, expected: float, description: str, *, rel_tol: float = 1e-3, abs_tol: float = 0.01
) -> dict[str, Any]:
    return {
        "type": "numeric",
        "description": description,
        "field": field_,
        "expected": expected,
        "rel_tol": rel_tol,
        "abs_tol": abs_tol,
    }


def text(
    field_: str, expected: str, description: str, *, aliases: list[str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "text",
        "description": description,
        "field": field_,
        "expected": expected,
        "mode": "normalized",
    }
    if aliases:
        out["aliases"] = aliases
    return out


def entities(
    field_: str, expected: list[str], description: str, *, mode: str = "exact"
) -> dict[str, Any]:
    return {
        "type": "entity_list",
        "description": description,
        "field": field_,
        "expected": expected,
        "mode": mode,
    }


def judge(path: str, guidance: str, reference: str, description: str) -> dict[str, Any]:
    """An LLM-judge criterion on a deliverable's text (see bureau.grading.judged)."""
    return {
        "type": "judge",
        "description": description,
        "path": path,
        "guidance": guidance,
        "reference": reference,
    }


UNSUPPORTED_REASON = "unsupported_reason"
"""The answer key that says why a null answer key has no answer (`taskwriter.ABSTAIN`)."""


def unsupported(field_: str, description: str) -> dict[str, Any]:
    """The key must be JSON null: the files do not support an answer."""
    return {"type": "unsupported", "description": description, "field": field_}


def mentions(terms: list[list[str]], description: str) -> dict[str, Any]:
    """`unsupported_reason` must name each term (in one of its spellings), briefly."""
    return {
        "type": "mentions",
        "description": description,
        "field": UNSUPPORTED_REASON,
        "terms": terms,
        "max_chars": 300,
    }


def file_exists(path: str, description: str) -> dict[str, Any]:
    return {"type": "file_exists", "description": description, "path": path}


def xlsx_cell(
    path: str,
    sheet: str,
    expected: float | str,
    description: str,
    *,
    row_label: str,
    column: str,
) -> dict[str, Any]:
    return {
        "type": "xlsx_cell",
        "description": description,
        "path": path,
        "sheet": sheet,
        "row_label": row_label,
        "column": column,
        "expected": expected,
        "rel_tol": 1e-3,
        "abs_tol": 0.01,
    }


def docx_content(
    path: str,
    contains: str,
    description: str,
    *,
    style: str | None = None,
    first: bool = False,
    label: str | None = None,
) -> dict[str, Any]:
    """`first`: only the first paragraph in `style` counts; `label`: every paragraph stating
    it must state `contains` (see `bureau.grading.documents`)."""
    return {
        "type": "docx_content",
        "description": description,
        "path": path,
        "contains": contains,
        "style": style,
        "first": first,
        "label": label,
    }


def pptx_content(
    path: str,
    description: str,
    *,
    title: str | None = None,
    contains: str | None = None,
    table_cell: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "type": "pptx_content",
        "description": description,
        "path": path,
        "slide": None,
        "title": title,
        "contains": contains,
        "table_cell": table_cell,
    }


def phrasing(rng: random.Random, options: Sequence[str]) -> str:
    """One of a template's phrasings of the same request, drawn from the template's `rng`.

    Every option asks for exactly the same thing (the same facts, entities, numbers, dates,
    rounding and backticked paths); only the wording differs, so that training and evaluation
    datasets do not share instruction text word for word.
    """
    if not options:
        raise ValueError("a template needs at least one phrasing")
    return options[rng.randrange(len(options))]
