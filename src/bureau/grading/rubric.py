"""The rubric: the hidden answer key of one task, as a list of binary criteria.

A rubric (`tests/rubric.json` in a Harbor task directory) names the file the agent writes its
answer to, keeps the gold values for reference, and lists 1 to `MAX_CRITERIA` criteria. Each
criterion is one pass/fail check of either a key of the answer file (`numeric`, `text`,
`entity_list`, `judge`) or a deliverable file in the workspace (`file_exists`, `xlsx_cell`,
`docx_content`, `pptx_content`), or several such checks that pass only together (`all_of`).
The criteria form a discriminated union on `type`; unknown keys are rejected so that a typo in
a generated rubric fails loudly instead of silently weakening a check.

Paths are workspace-relative; absolute paths and `..` components are rejected here, and the
grader additionally refuses to follow any path (symlinks included) out of the workspace.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    FiniteFloat,
    JsonValue,
    ValidationError,
    model_validator,
)

from .values import normalize_label

RUBRIC_FORMAT = "bureau-rubric/1"
DEFAULT_REL_TOL = 1e-3
DEFAULT_ABS_TOL = 1e-6
_CELL_ADDRESS_RE = re.compile(r"[A-Z]{1,3}[1-9][0-9]{0,6}")
# Criterion ids become keys of Harbor's flat reward.json next to "reward" and "pass".
_RESERVED_IDS = frozenset({"reward", "pass"})


class RubricError(ValueError):
    """A rubric file that cannot be read or does not validate; the message names file and field."""


def _relative_path(path: str) -> str:
    if not path or path.strip() != path or not path.isprintable():
        raise ValueError("path must be non-empty, printable, without surrounding whitespace")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute():
        raise ValueError(f"path {path!r} must be relative to the workspace")
    if PureWindowsPath(path).drive:
        raise ValueError(f"path {path!r} must not name a drive")
    parts = re.split(r"[\\/]", path)
    if ".." in parts:
        raise ValueError(f"path {path!r} must not contain '..'")
    if all(part in ("", ".") for part in parts):
        raise ValueError(f"path {path!r} does not name a file")
    return path


def _not_bool(value: object) -> object:
    # JSON true/false would otherwise coerce to 1.0/0.0 and hide a rubric bug.
    if isinstance(value, bool):
        raise ValueError("expected must be a number or a string, not a boolean")
    return value


RelativePath = Annotated[str, AfterValidator(_relative_path)]
"""A workspace-relative path without `..` components."""
Number = Annotated[FiniteFloat, BeforeValidator(_not_bool)]
"""A finite number; booleans are rejected."""
Expected = Annotated[FiniteFloat | str, BeforeValidator(_not_bool)]
"""An expected cell value: a number (compared with tolerances) or text (compared normalized)."""
Tolerance = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
"""A non-negative finite tolerance."""


class _Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Unique id within the rubric; becomes a key of reward.json."""
    description: str = ""
    """What the criterion checks, in words, for the results table."""


class NumericCriterion(_Criterion):
    """An answer key holding a number; passes iff |got - expected| <= max(abs_tol, rel_tol*|e|)."""

    type: Literal["numeric"] = "numeric"
    field: str = Field(min_length=1)
    """Key of the answer object."""
    expected: Number
    """The gold number."""
    rel_tol: Tolerance = DEFAULT_REL_TOL
    """Tolerance relative to |expected|."""
    abs_tol: Tolerance = DEFAULT_ABS_TOL
    """Absolute tolerance; the larger of the two applies."""


class TextCriterion(_Criterion):
    """An answer key holding text, compared exactly or normalized, aliases and dates accepted."""

    type: Literal["text"] = "text"
    field: str = Field(min_length=1)
    """Key of the answer object."""
    expected: str
    """The gold text; an ISO date (YYYY-MM-DD) also matches other spellings of that date."""
    mode: Literal["exact", "normalized"] = "normalized"
    """`exact` compares stripped strings; `normalized` compares `normalize_text` forms."""
    aliases: list[str] = Field(default_factory=list)
    """Other accepted answers."""


class EntityListCriterion(_Criterion):
    """An answer key holding a list of names, compared as a normalized set."""

    type: Literal["entity_list"] = "entity_list"
    field: str = Field(min_length=1)
    """Key of the answer object."""
    expected: list[str]
    """The gold items; an empty list (with mode `exact`) means the answer must be empty."""
    mode: Literal["exact", "superset"] = "exact"
    """`exact`: same set; `superset`: every expected item present, extras allowed."""

    @model_validator(mode="after")
    def _empty_needs_exact(self) -> EntityListCriterion:
        if not self.expected and self.mode == "superset":
            raise ValueError(
                "an empty expected list needs mode 'exact' (superset would pass anything)"
            )
        return self


class UnsupportedCriterion(_Criterion):
    """An answer key the workspace cannot support: passes iff the key is present and JSON
    null. Any value fails (a made-up answer), and so does a missing key (no answer at all)."""

    type: Literal["unsupported"] = "unsupported"
    field: str = Field(min_length=1)
    """Key of the answer object."""


class MentionsCriterion(_Criterion):
    """An answer key holding a short text that names every one of `terms`, each in one of its
    spellings (whole words of the normalized form, see `normalize_text`). Longer than
    `max_chars` fails, so a text that lists every candidate does not pass."""

    type: Literal["mentions"] = "mentions"
    field: str = Field(min_length=1)
    """Key of the answer object."""
    terms: list[list[str]] = Field(min_length=1)
    """What the text must name: each item a list of accepted spellings."""
    max_chars: int = Field(default=300, ge=20)
    """The longest text that counts."""


class FileExistsCriterion(_Criterion):
    """A deliverable exists, is a non-empty regular file and opens if it is an Office file."""

    type: Literal["file_exists"] = "file_exists"
    path: RelativePath
    """Workspace-relative path of the deliverable."""


class XlsxCellCriterion(_Criterion):
    """One cell of a workbook, addressed by `cell` or by `row_label` + `column` headers."""

    type: Literal["xlsx_cell"] = "xlsx_cell"
    path: RelativePath
    """Workspace-relative path of the workbook."""
    sheet: str | None = None
    """Worksheet name; None means the active sheet."""
    cell: str | None = None
    """A1-style address such as "B2"."""
    row_label: str | None = None
    """Text of the column-A cell of the wanted row."""
    column: str | None = None
    """Text of the row-1 header cell of the wanted column."""
    expected: Expected
    """The gold value: a number (with tolerances) or text (normalized)."""
    rel_tol: Tolerance = DEFAULT_REL_TOL
    """Relative tolerance for a numeric `expected`."""
    abs_tol: Tolerance = DEFAULT_ABS_TOL
    """Absolute tolerance for a numeric `expected`."""

    @model_validator(mode="after")
    def _one_address(self) -> XlsxCellCriterion:
        by_label = self.row_label is not None or self.column is not None
        if self.cell is not None and by_label:
            raise ValueError("give either cell or row_label+column, not both")
        if self.cell is None and (self.row_label is None or self.column is None):
            raise ValueError("give either cell or both row_label and column")
        if self.cell is not None and not _CELL_ADDRESS_RE.fullmatch(self.cell):
            raise ValueError(f"cell {self.cell!r} is not an A1-style address like 'B2'")
        return self


class TableCell(BaseModel):
    """A table cell on a slide, found by row label (first column) and column header (first row)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    row_label: str
    """Text of the first-column cell of the wanted row."""
    column: str
    """Text of the first-row header cell of the wanted column."""
    expected: Expected
    """The gold value: a number (with tolerances) or text (normalized)."""
    rel_tol: Tolerance = DEFAULT_REL_TOL
    """Relative tolerance for a numeric `expected`."""
    abs_tol: Tolerance = DEFAULT_ABS_TOL
    """Absolute tolerance for a numeric `expected`."""


class DocxContentCriterion(_Criterion):
    """Some paragraph of a Word document contains a phrase, optionally in a given style; where
    the instruction names the place (the first heading, a labelled statement), only that place
    counts, so a document that hedges with several candidates fails."""

    type: Literal["docx_content"] = "docx_content"
    path: RelativePath
    """Workspace-relative path of the document."""
    contains: str = Field(min_length=1)
    """Phrase that must occur (normalized substring) in one paragraph or table cell."""
    style: str | None = None
    """Style name the paragraph must have, e.g. "Heading 1"."""
    first: bool = False
    """Only the first paragraph in `style` counts ("whose first heading reads ...")."""
    label: str | None = None
    """The statement's label, colon included ("serve notice by:"): every paragraph that states
    it (case and spacing aside) must contain the whole phrase, so candidates with other values
    fail the criterion."""

    @model_validator(mode="after")
    def _places(self) -> DocxContentCriterion:
        if self.first and self.style is None:
            raise ValueError("first needs a style: the first paragraph in that style")
        if self.label is not None and normalize_label(self.label) not in normalize_label(
            self.contains
        ):
            raise ValueError("label must be part of the phrase in contains")
        return self


class PptxContentCriterion(_Criterion):
    """One slide of a deck meets every condition that is set (title, contains, table cell)."""

    type: Literal["pptx_content"] = "pptx_content"
    path: RelativePath
    """Workspace-relative path of the deck."""
    slide: int | None = Field(default=None, ge=1)
    """1-based slide number; None means any slide."""
    title: str | None = None
    """Text of the title placeholder (normalized equality)."""
    contains: str | None = None
    """Phrase occurring in some text frame or table cell on the slide."""
    table_cell: TableCell | None = None
    """A table cell on the slide and its expected value."""

    @model_validator(mode="after")
    def _some_condition(self) -> PptxContentCriterion:
        if self.title is None and self.contains is None and self.table_cell is None:
            raise ValueError("set at least one of title, contains, table_cell")
        return self


class JudgeCriterion(_Criterion):
    """A question for an LLM judge about the agent's work: the text of an answer key (`field`)
    or a deliverable rendered to text (`path`: docx, pptx, xlsx or a text file), against a
    `reference`. The verifier cannot reach a judge (it has no network): it writes the question
    to judge-requests.json, and whoever runs the trial asks the judge (`bureau.trials.judging`).
    """

    type: Literal["judge"] = "judge"
    field: str | None = Field(default=None, min_length=1)
    """Key of the answer object whose text is judged."""
    path: RelativePath | None = None
    """Workspace-relative path of the deliverable whose text is judged."""
    guidance: str = Field(min_length=1)
    """The question: what the judge should look for."""
    reference: str = ""
    """What a good answer says, for the judge to compare against."""

    @model_validator(mode="after")
    def _one_source(self) -> JudgeCriterion:
        if (self.field is None) == (self.path is None):
            raise ValueError("set exactly one of field (an answer key) or path (a deliverable)")
        return self


MAX_CRITERIA = 10
"""A rubric asks one to ten things, as APEX-Agents' rubrics do (1-10 criteria); so does an
`all_of` criterion of its parts."""

AnswerCriterion = (
    NumericCriterion
    | TextCriterion
    | EntityListCriterion
    | UnsupportedCriterion
    | MentionsCriterion
)
"""A check of one key of the answer file."""
_Checked = (
    AnswerCriterion
    | FileExistsCriterion
    | XlsxCellCriterion
    | DocxContentCriterion
    | PptxContentCriterion
)
PartCriterion = Annotated[_Checked, Field(discriminator="type")]
"""A check the verifier decides itself: any criterion but a judge's or another `all_of`."""


class AllOfCriterion(_Criterion):
    """Several checks that count as one: it passes only when every part passes. One item of a
    brief (`bureau.worlds.briefs`) is one, so a brief of four items has four criteria and its
    reward is the share of items answered in full, not of the keys among them. Each part has
    an id of its own (unique in the rubric) and its own verdict in grading.json."""

    type: Literal["all_of"] = "all_of"
    criteria: list[PartCriterion] = Field(min_length=1, max_length=MAX_CRITERIA)
    """The parts, in order."""


Criterion = Annotated[_Checked | JudgeCriterion | AllOfCriterion, Field(discriminator="type")]


class Rubric(BaseModel):
    """The hidden answer key of one task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["bureau-rubric/1"] = "bureau-rubric/1"
    """Schema version."""
    task_id: str = Field(min_length=1)
    """Id of the task this rubric grades."""
    answer_file: RelativePath = "output/answer.json"
    """Workspace-relative path of the agent's JSON answer object."""
    gold: dict[str, JsonValue] = Field(default_factory=dict)
    """Gold answer values, for reference; grading uses the criteria only."""
    criteria: list[Criterion] = Field(min_length=1, max_length=MAX_CRITERIA)
    """The binary checks; the reward is the fraction that pass."""

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        ids = [c.id for c in self.criteria]
        ids += [p.id for c in self.criteria if isinstance(c, AllOfCriterion) for p in c.criteria]
        duplicates = sorted({cid for cid in ids if ids.count(cid) > 1})
        if duplicates:
            raise ValueError(f"criterion ids must be unique, repeated: {duplicates}")
        reserved = sorted(_RESERVED_IDS.intersection(ids))
        if reserved:
            raise ValueError(f"criterion ids {reserved} are reserved reward.json keys")
        return self


def leaf_criteria(criteria: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rubric file's criteria (as JSON objects) with every `all_of` replaced by its parts:
    the individual checks, for tools that read what a rubric accepts (the scripted agents)."""
    leaves: list[dict[str, Any]] = []
    for criterion in criteria:
        parts = criterion.get("criteria") if criterion.get("type") == "all_of" else None
        if isinstance(parts, list):
            leaves.extend(p for p in parts if isinstance(p, dict))
        else:
            leaves.append(criterion)
    return leaves


def load_rubric(path: Path) -> Rubric:
    """Read and validate a rubric file; raise `RubricError` naming the file and the bad field."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"rubric {path}: cannot read: {type(exc).__name__}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RubricError(f"rubric {path}: not valid JSON at line {exc.lineno}: {exc.msg}") from exc
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise RubricError(f"rubric {path}: {problems}") from exc
