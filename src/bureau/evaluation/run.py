"""`bureau eval`'s run: every task of a dataset, k attempts each, through the agent harness in
real sandboxes, summarized into `eval.json`.

The trials are the ones `bureau tasks check --agent harness` runs (same engine session, harness
agent, scheduler and trial directories); what is added is the attribution of each trial to an
`AttemptRow` and the report. Attempts at one task must differ, so when a sampling seed is given
each attempt gets its own, derived from (seed, task, attempt index).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from bureau.config import StrictModel, dump_resolved_config
from bureau.evaluation.attempts import row_of
from bureau.evaluation.report import AttemptRow, EvalReport, summarize_attempts
from bureau.harness.loop import HarnessConfig
from bureau.judge.client import JudgeConfig
from bureau.records import TrajectoryRecord
from bureau.tasks.dataset import UNKNOWN, load_dataset
from bureau.tasks.support import require_runnable
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.agents import Agent, AgentContext, AgentResult
from bureau.trials.faults import FaultConfig
from bureau.trials.judging import skipped_judge_criteria

EVAL_FILE = "eval.json"
EVAL_FORMAT = "bureau-eval/2"
"""/2: intervals resample tasks; per-template groups."""
VERSIONED = ("bureau", "torch", "transformers", "mcp", "vllm")


class EvalConfig(StrictModel):
    """Settings of one `bureau eval` run; `harness` is the agent loop's own table."""

    attempts: int = Field(1, ge=1)
    """Attempts per task (k of pass@k)."""
    max_tasks: int | None = Field(None, ge=1)
    """Evaluate only the first N tasks of the dataset."""
    concurrency: int = Field(8, ge=1)
    """Trials in flight at once."""
    max_starting: int = Field(4, ge=1)
    """Sandboxes starting at the same moment."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """bwrap (bubblewrap sandbox) or none (no isolation: unsafe)."""
    agent_timeout_s: float | None = Field(None, gt=0)
    """Cap on each agent's time, on top of the task's own limit."""
    engine: Literal["builtin", "vllm", "url"] = "builtin"
    """builtin (`bureau serve`, started here), vllm (.venv-vllm) or url (running servers)."""
    engine_urls: list[str] = Field(default_factory=list)
    """Running engines for engine = "url"; several are spread by the router."""
    seed: int | None = None
    """Bootstrap seed (0 when unset); also the base of per-attempt sampling seeds when
    harness.seed is unset."""
    bootstrap_resamples: int = Field(2000, ge=1)
    """Resamples of each bootstrap interval."""
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    """Harness limits and sampling."""
    retries: int = Field(2, ge=0)
    """Attempts after the first of a trial the machinery failed (`bureau.trials.retry`), as in
    training; the failed attempts stay in the trials folder."""
    faults: FaultConfig = Field(default_factory=FaultConfig)
    """Faults to inject on purpose, for drills (`bureau.trials.faults`); none by default."""
    judge: JudgeConfig | None = None
    """The LLM judge of judge criteria (keys from the environment or its key file)."""
    missing_judge: Literal["fail", "skip"] = "fail"
    """Judge criteria without a judge: a system error, or graded without them."""


@dataclass(frozen=True)
class EvalTask:
    task: TaskDir
    domain: str
    template: str | None = None
    """task.toml's `[metadata] template`, when the generator wrote one."""
    unseen_kind: bool | None = None
    """task.toml's `[metadata] held_out_kind`: a kind no training split has (None: unsaid)."""


def load_eval_tasks(root: Path, max_tasks: int | None = None) -> list[EvalTask]:
    """The tasks of a dataset folder (or a single task folder) with their domains.

    The domain is task.toml's `[metadata] domain` (bureau's generator writes it), else the
    manifest's, else "unknown". Raises TaskFormatErrors for a broken dataset or task, or one
    the local runtime cannot run as written (`bureau.tasks.support.require_runnable`).
    """
    if (root / "task.toml").exists():
        pairs = [(root, UNKNOWN)]
    else:
        dataset = load_dataset(root)
        pairs = [(dataset.root / e.path, e.domain) for e in dataset.entries]
    if max_tasks is not None:
        pairs = pairs[:max_tasks]
    tasks = []
    for path, manifest_domain in pairs:
        task = load_task_dir(path)
        require_runnable(task)
        domain = task.config.metadata.get("domain")
        template = task.config.metadata.get("template")
        unseen = task.config.metadata.get("held_out_kind")
        tasks.append(
            EvalTask(
                task,
                domain if isinstance(domain, str) else manifest_domain,
                template if isinstance(template, str) else None,
                unseen if isinstance(unseen, bool) else None,
            )
        )
    return tasks


def attempt_seed(base: int, task: str, attempt: int) -> int:
    """A sampling seed for one attempt, stable across runs and distinct across attempts."""
    digest = hashlib.sha256(f"{base}\0{task}\0{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF  # what every engine accepts


class SeededAttempts(Agent):
    """Hands each attempt at a task its own sampling seed, then runs the harness agent.

    The scheduler starts trials in an order of its own, so the index is the count of attempts
    at that task started so far: the set of seeds per task is fixed, whichever trial gets which.
    """

    name = "harness"
    version = "1"
    uses_tools = True
    supports_steps = True
    """Each step of a multi-step task goes to the one harness agent of the attempt."""

    def __init__(
        self,
        make_agent: Callable[[int], Agent],
        base: int,
        started: Counter[str],
        groups: list[str] | None = None,
    ):
        self.make_agent = make_agent
        self.base = base
        self.started = started
        self.groups = groups

    def tool_groups(self) -> list[str] | None:
        return self.groups

    def trajectory(self) -> TrajectoryRecord | None:
        agent: Agent | None = getattr(self, "_agent", None)
        return agent.trajectory() if agent is not None else None

    async def run(self, ctx: AgentContext) -> AgentResult:
        agent: Agent | None = getattr(self, "_agent", None)
        if agent is None:  # the attempt's first (or only) step
            index = self.started[ctx.task.name]
            self.started[ctx.task.name] += 1
            agent = self._agent = self.make_agent(attempt_seed(self.base, ctx.task.name, index))
        return await agent.run(ctx)


@dataclass
class EvalRun:
    report: EvalReport
    rows: list[AttemptRow]
    wall_time_s: float
    out: Path
    judge_criteria_skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per task, the judge criteria graded without (see `skipped_judge_criteria`)."""


def run_eval(
    dataset: Path,
    tasks: list[EvalTask],
    model: Path,
    config: EvalConfig,
    out: Path,
    on_result: Callable[[], None] | None = None,
) -> EvalRun:
    """Run `config.attempts` attempts at each of `tasks` (from `dataset`) and write `eval.json`,
    `trajectories.parquet`, the trial directories and the resolved config into `out`.
    `on_result` is called as each trial finishes."""
    started = time.perf_counter()
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    model = model.resolve()
    out.mkdir(parents=True, exist_ok=True)
    dump_resolved_config(config, out)
    rows, sandboxes = _run_trials(tasks, model, config, out, on_result or (lambda: None))
    seed = config.seed if config.seed is not None else 0
    report = summarize_attempts(
        rows, seed=seed, k=config.attempts, resamples=config.bootstrap_resamples
    )
    wall = time.perf_counter() - started
    document: dict[str, Any] = {
        "format": EVAL_FORMAT,
        "model": str(model),
        "dataset": str(dataset.resolve()),
        "started": started_at,
        "wall_time_s": round(wall, 3),
        "config": config.model_dump(mode="json"),
        "sandboxes": sandboxes,
        "versions": versions(),
        **report.model_dump(mode="json", exclude={"format"}),  # this file's format says it
        # Judge criteria graded without (no judge, `missing_judge = "skip"`): per task, the
        # criterion ids and how many of its trials left each out.
        "judge_criteria_skipped": skipped_judge_criteria(out / "trials"),
    }
    (out / EVAL_FILE).write_text(json.dumps(document, indent=2) + "\n")
    return EvalRun(report, rows, wall, out, document["judge_criteria_skipped"])


def read_eval_report(path: Path) -> EvalReport:
    """The report of an `eval.json` that `run_eval` wrote (a run folder or the file itself);
    ValueError naming the file when it is not one, or of another format."""
    file = path / EVAL_FILE if path.is_dir() else path
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{file}: not a readable eval.json ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != EVAL_FORMAT:
        found = document.get("format") if isinstance(document, dict) else None
        raise ValueError(f"{file}: format {found!r}, expected {EVAL_FORMAT!r} (rerun the eval)")
    fields = {k: v for k, v in document.items() if k in EvalReport.model_fields and k != "format"}
    try:
        return EvalReport.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"{file}: {exc}") from exc


def versions() -> dict[str, str | None]:
    """Versions of Python and the packages that shape a result."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _run_trials(
    tasks: list[EvalTask],
    model: Path,
    config: EvalConfig,
    out: Path,
    on_result: Callable[[], None],
) -> tuple[list[AttemptRow], str]:
    """The attempts, and how the sandboxes were held to their limits."""
    from transformers import AutoTokenizer

    from bureau.harness.agent import HarnessAgent, harness_tool_groups
    from bureau.harness.render import Renderer
    from bureau.inference.session import engine_session
    from bureau.judge import JudgeClient
    from bureau.records import write_parquet
    from bureau.sandbox import get_runtime
    from bureau.trials.attempt import AttemptOutcome
    from bureau.trials.defects import TaskDefects
    from bureau.trials.faults import FaultInjector
    from bureau.trials.retry import RetryPolicy
    from bureau.trials.scheduler import SchedulerConfig, run_attempts
    from bureau.trials.trial import TrialConfig

    harness = config.harness
    trials_dir = out / "trials"
    trials_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    renderer = Renderer(tokenizer, enable_thinking=harness.enable_thinking)
    base_seed = harness.seed if harness.seed is not None else config.seed
    runtime = get_runtime("local", isolation=config.isolation)
    attempts = [t.task for t in tasks for _ in range(config.attempts)]
    try:
        with engine_session(
            config.engine, model, config.engine_urls, out, harness.context_length
        ) as (sampler, clients):
            started: Counter[str] = Counter()

            def harness_agent(seed: int | None) -> Agent:
                settings = harness if seed is None else harness.model_copy(update={"seed": seed})
                return HarnessAgent(sampler, renderer, settings, model.name)

            def make_agent() -> Agent:
                if base_seed is None:
                    return harness_agent(None)
                return SeededAttempts(
                    harness_agent, base_seed, started, harness_tool_groups(harness)
                )

            async def main() -> list[AttemptOutcome]:
                judge = JudgeClient(config.judge) if config.judge is not None else None
                try:
                    if judge is not None:
                        await judge.__aenter__()
                    return await run_attempts(
                        attempts,
                        make_agent,
                        runtime,
                        trials_dir,
                        trial_config=TrialConfig(
                            max_agent_timeout_s=config.agent_timeout_s,
                            missing_judge=config.missing_judge,
                        ),
                        judge=judge,
                        config=SchedulerConfig(
                            concurrency=config.concurrency, max_starting=config.max_starting
                        ),
                        on_result=lambda _: on_result(),
                        retry=RetryPolicy(max_retries=config.retries),
                        faults=FaultInjector(config.faults),
                        defects=TaskDefects(runtime, out / "oracle-checks"),
                    )
                finally:
                    if judge is not None:
                        await judge.__aexit__(None, None, None)
                    for client in clients:
                        await client.aclose()

            outcomes = asyncio.run(main())
    finally:
        runtime.close()
    write_parquet([o.record for o in outcomes], out / "trajectories.parquet")
    by_name = {t.task.name: t for t in tasks}
    rows = [
        row_of(o, (t := by_name[o.result.task_name]).domain, t.template, unseen_kind=t.unseen_kind)
        for o in outcomes
    ]
    return rows, runtime.enforcement
