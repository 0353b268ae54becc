"""A scripted tool-using agent that looks for a task's evidence as a careful person would, to
measure how much looking a task takes.

The starter teacher (`teacher.py`) reads the one file its instruction names. Standard and hard
tasks name no file: the facts are spread over several documents of a crowded workspace, among
older versions, near-duplicates and unrelated work. The explorer knows which files hold the
answer (the files the task's oracle needs, `bureau.checks.oracle_reads`, like the teacher knows
the rubric) but finds them only through the tools a model has:

1. `fs_tree` of the workspace, two levels deep;
2. `fs_search_content` for each of the instruction's search terms (record ids such as
   `C-1042`, proper names, quoted titles; at most `MAX_TERMS`), and `fs_search_content`
   restricted to calendars when the task is about dates;
3. reads the files the searches found, the instruction's own named files first, then those
   that matched more of the terms, then more hits (ties in the order found), each with the
   tool for its type: `sheet_list` then `sheet_read` of each sheet, `pdf_read_pages`,
   `mail_read`, `docx_read`, `slides_read`, `cal_events`, `chat_read`, `fs_read_text`. It
   stops once every file it must find has been read (`task_targets`: the files the answer
   needs, else the files the oracle opens);
4. a file the searches never surfaced is found by listing its folder (`fs_list`), then read;
5. writes `output/answer.json` with the answers the rubric's field criteria accept (null and a
   reason naming the missing facts where the files cannot support one) and ends with a short
   message.

Its tool calls are thus a count of what finding and reading the evidence takes, given one
sensible search policy: the reads of files that turned out not to be evidence are the cost of
the crowd. It does not build file deliverables (a workbook, a memo): their criteria fail, and
the figures report its reward beside its calls.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Generator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bureau.bootstrap.scripted import HarnessScriptAgent, ScriptedSampler
from bureau.bootstrap.teacher import (
    ANSWER_PATH,
    FINAL_MESSAGE,
    ScriptedTurns,
    TaskView,
    ToolCall,
    call_text,
    gold_answer,
    write_call,
)
from bureau.harness.agent import HarnessAgent
from bureau.harness.loop import HarnessConfig
from bureau.harness.render import Renderer
from bureau.trials.agents import AgentContext, AgentResult

MAX_TERMS = 4
MAX_SHEETS = 8
MAX_READS = 120
_ID = re.compile(r"\b[A-Z]{1,5}-\d{2,6}\b")
_PROPER = re.compile(r"\b[A-Z][a-z]+(?: (?:of |& )?[A-Z][a-z]+)+\b")
_QUOTED = re.compile(r"[\"“]([^\"”\n]{4,60})[\"”]")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_HIT = re.compile(r"^(\S+) \(", re.MULTILINE)
_SHEET = re.compile(r"^- (.+?): [A-Z]+\d+(?::[A-Z]+\d+)? \(", re.MULTILINE)
_DATES = re.compile(r"\b(deadline|meeting|calendar|date|day|schedule|milestone)s?\b", re.I)
# Words that open sentences or headings of every instruction: not search terms.
_COMMON = {"How", "Answer", "Write", "Use", "Each", "The", "If", "When", "What", "Which"}


def search_terms(instruction: str) -> list[str]:
    """The instruction's most specific words to search for: record ids, quoted titles, then
    proper names (of two words or more), at most `MAX_TERMS`, without repeats."""
    question = instruction.split("## How to answer")[0].split("## Answer keys")[0]
    terms = _ID.findall(question) + _QUOTED.findall(question)
    names = [n for n in _PROPER.findall(question) if n.split()[0] not in _COMMON]
    terms += names
    ticked = [t for t in _BACKTICKED.findall(question) if "/" not in t and "." not in t]
    terms += [t for t in ticked if len(t) >= 4 and not t.islower()]
    return list(dict.fromkeys(t.strip() for t in terms if t.strip()))[:MAX_TERMS]


def read_calls(path: str, sheets: list[str] | None = None) -> list[ToolCall]:
    """The calls that read `path` whole with the tool for its type (after `sheet_list` for a
    workbook: `sheets` are its sheet names)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        if sheets is None:
            return [("sheet_list", {"path": path})]
        return [("sheet_read", {"path": path, "sheet": s}) for s in sheets[:MAX_SHEETS]]
    if suffix == ".pdf":
        return [("pdf_read_pages", {"path": path})]
    if suffix == ".eml":
        return [("mail_read", {"message": path.removeprefix("mail/")})]
    if suffix == ".docx":
        return [("docx_read", {"path": path})]
    if suffix == ".pptx":
        return [("slides_read", {"path": path})]
    if suffix == ".ics":
        window = {"start": "2000-01-01", "end": "2100-01-01"}
        return [("cal_events", {**window, "calendar": Path(path).name})]
    if suffix == ".json" and path.startswith("chat/"):
        return [("chat_read", {"channel": Path(path).stem, "limit": 200})]
    return [("fs_read_text", {"path": path})]


class Explorer(ScriptedTurns):
    """The turns of one exploring trajectory; `next_turn(observation)` as the teacher's."""

    def __init__(self, task: TaskView, evidence: list[str], *, max_reads: int = MAX_READS) -> None:
        self.task = task
        self.evidence = list(dict.fromkeys(evidence))
        self.max_reads = max_reads
        self.read: list[str] = []
        """The files read, in order."""
        self.calls: list[str] = []
        """The tools called, in order."""

    def _call(self, call: ToolCall) -> str:
        self.calls.append(call[0])
        return call_text(call)

    def _turns(self) -> Generator[str, str, None]:
        yield self._call(("fs_tree", {"path": ".", "max_depth": 2}))
        hits: Counter[str] = Counter()
        terms: dict[str, set[str]] = {}
        order: dict[str, int] = {}
        searches = [
            (t, {"query": t, "max_matches": 200}) for t in search_terms(self.task.instruction)
        ]
        if _DATES.search(self.task.instruction.split("## Answer keys")[0]):
            searches.append(("calendar", {"query": "BEGIN:VEVENT", "file_glob": "*.ics"}))
        for term, arguments in searches:
            found = yield self._call(("fs_search_content", arguments))
            for path in _HIT.findall(found):
                hits[path] += 1
                terms.setdefault(path, set()).add(term)
                order.setdefault(path, len(order))
        named = [f for f in self.task.named_files if f != ANSWER_PATH]
        # Files that match more of the terms first, then more hits, then the order found.
        ranked = named + sorted(
            (p for p in hits if p not in named and not p.startswith("output/")),
            key=lambda p: (-len(terms[p]), -hits[p], order[p]),
        )
        wanted = set(self.evidence)
        for path in ranked:
            if wanted <= set(self.read) or len(self.read) >= self.max_reads:
                break
            yield from self._read(path)
        for path in self.evidence:
            if path not in self.read and len(self.read) < self.max_reads:
                folder = str(Path(path).parent)
                yield self._call(("fs_list", {"path": folder}))
                yield from self._read(path)
        answer = gold_answer(self.task.criteria)
        if answer:
            order_keys = {k: i for i, k in enumerate(self.task.answer_keys)}
            answer = dict(sorted(answer.items(), key=lambda kv: order_keys.get(kv[0], 99)))
            yield self._call(write_call(answer))
        yield FINAL_MESSAGE

    def _read(self, path: str) -> Generator[str, str, None]:
        self.read.append(path)
        calls = read_calls(path)
        for call in calls:
            seen = yield self._call(call)
            if call[0] == "sheet_list":
                for more in read_calls(path, _SHEET.findall(seen)):
                    yield self._call(more)


def explorer_summary(explorer: Explorer) -> dict[str, Any]:
    """What a record's metadata keeps of one exploration."""
    wanted = set(explorer.evidence)
    return {
        "tool_calls": len(explorer.calls),
        "files_read": len(explorer.read),
        "evidence": len(wanted),
        "evidence_read": len(wanted & set(explorer.read)),
        "calls_by_tool": dict(Counter(explorer.calls)),
        "read": json.dumps(explorer.read),
    }


EXPLORER_MODEL = "scripted-explorer"


@dataclass
class ExplorerAgent(HarnessScriptAgent):
    """The explorer through the real harness over the trial's MCP tools (one step)."""

    evidence: dict[str, list[str]]
    """Task name -> the files it must find (`task_targets`)."""
    name = "explorer"
    version = "1"

    async def run(self, ctx: AgentContext) -> AgentResult:
        view = TaskView.from_task_dir(ctx.task.path, ctx.task.name, ctx.task.instruction)
        explorer = Explorer(view, self.evidence.get(ctx.task.name, []))
        harness = HarnessAgent(
            ScriptedSampler(self.renderer, explorer), self.renderer, self.config, EXPLORER_MODEL
        )
        self._harness = harness
        result = await harness.run(ctx)
        result.metadata.update(explorer_summary(explorer))
        return result


@dataclass
class Exploration:
    """One task explored: the explorer's counts, its reward and what the harness did."""

    task: str
    template: str
    difficulty: str
    evidence: int
    evidence_read: int
    files_read: int
    tool_calls: int
    reward: float | None
    system_error: bool
    stop_reason: str | None
    truncated_outputs: int
    context_notices: int
    parse_retries: int
    trajectory_tokens: int


def explore(
    tasks: list[Path],
    model: Path,
    harness: HarnessConfig,
    out: Path,
    *,
    isolation: str = "bwrap",
    concurrency: int = 2,
    agent_timeout_s: float = 1800.0,
    evidence: dict[str, list[str]] | None = None,
) -> list[Exploration]:
    """Run the explorer on every task as a real trial (sandbox, MCP tool servers, verifier)
    with `harness`; `model` gives the tokenizer. Its targets are `evidence` (task name ->
    files), by default `task_targets` of each task.
    Multi-step tasks are left out (the explorer plays one step). Records go to
    `out/trajectories.parquet`, one row per task to `out/explorations.jsonl`."""
    from transformers import AutoTokenizer

    from bureau.checks.oracle_reads import task_targets
    from bureau.harness.loop import harness_events
    from bureau.records import write_parquet
    from bureau.sandbox import get_runtime
    from bureau.tasks.taskdir import load_task_dir, step_names
    from bureau.trials.scheduler import SchedulerConfig, run_attempts
    from bureau.trials.trial import TrialConfig

    loaded = [load_task_dir(p) for p in tasks if not step_names(p)]
    targets = evidence if evidence is not None else {t.name: task_targets(t.path) for t in loaded}
    tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    renderer = Renderer(tokenizer, enable_thinking=harness.enable_thinking)
    runtime = get_runtime("local", isolation=isolation)
    (out / "trials").mkdir(parents=True, exist_ok=True)

    async def main() -> list[Any]:
        return await run_attempts(
            loaded,
            lambda: ExplorerAgent(renderer, harness, targets),
            runtime,
            out / "trials",
            trial_config=TrialConfig(max_agent_timeout_s=agent_timeout_s),
            config=SchedulerConfig(concurrency=concurrency, max_starting=2),
        )

    try:
        outcomes = asyncio.run(main())
    finally:
        runtime.close()
    write_parquet([o.record for o in outcomes], out / "trajectories.parquet")
    meta = {t.name: t.config.metadata for t in loaded}
    rows = []
    for outcome in sorted(outcomes, key=lambda o: o.result.task_name):
        result, record = outcome.result, outcome.record
        info = result.agent_metadata
        task_meta = meta.get(result.task_name, {})
        events = harness_events(record)
        rows.append(
            Exploration(
                task=result.task_name,
                template=str(task_meta.get("template", "")),
                difficulty=str(task_meta.get("difficulty", "")),
                evidence=int(info.get("evidence", 0)),
                evidence_read=int(info.get("evidence_read", 0)),
                files_read=int(info.get("files_read", 0)),
                tool_calls=int(info.get("tool_calls", 0)),
                reward=result.reward,
                system_error=result.system_error,
                stop_reason=record.stop_reason,
                truncated_outputs=events["truncated results"],
                context_notices=events["context notices"],
                parse_retries=events["unparsable calls"],
                trajectory_tokens=len(record.token_ids),
            )
        )
    with (out / "explorations.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(asdict(row)) + "\n")
    return rows
