"""A trial's result and its directory, laid out the way Harbor lays out its trials.

    <trials_dir>/<trial_name>/
        config.json          what was run: task, agent, runtime, timeouts
        result.json          status, reward, phase timings, error (Harbor's field names where
                             Harbor has one: task_name, trial_name, agent_info, verifier_result,
                             exception_info, environment_setup, agent_setup, agent_execution,
                             verifier)
        agent/               the agent's logs
        verifier/            reward.json or reward.txt, grading.json, test-stdout.txt
        exception.txt        the traceback, when the trial ended in a system error

`status` is `completed` (the verifier produced a reward) or the kind of system error. A system
error never carries a reward: training masks it and the report counts it by kind.
"""

from __future__ import annotations

import hashlib
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bureau.errors import BureauSystemError, SystemErrorKind

COMPLETED = "completed"


def now() -> datetime:
    return datetime.now(UTC)


class Timing(BaseModel):
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class ExceptionInfo(BaseModel):
    exception_type: str
    exception_message: str
    exception_traceback: str
    occurred_at: datetime

    @classmethod
    def of(cls, exc: BaseException) -> ExceptionInfo:
        return cls(
            exception_type=type(exc).__name__,
            exception_message=str(exc),
            exception_traceback="".join(traceback.format_exception(exc)),
            occurred_at=now(),
        )


class TrialResult(BaseModel):
    task_name: str
    trial_name: str
    trial_uri: str
    task_id: dict[str, str]
    task_checksum: str
    agent_info: dict[str, str]
    status: str = COMPLETED
    """`completed`, or the SystemErrorKind that ended the trial."""
    reward: float | None = None
    verifier_result: dict[str, Any] | None = None
    exception_info: ExceptionInfo | None = None
    started_at: datetime = Field(default_factory=now)
    finished_at: datetime | None = None
    environment_setup: Timing = Field(default_factory=Timing)
    agent_setup: Timing = Field(default_factory=Timing)
    agent_execution: Timing = Field(default_factory=Timing)
    verifier: Timing = Field(default_factory=Timing)
    agent_metadata: dict[str, Any] = Field(default_factory=dict)
    retried: list[dict[str, str]] = Field(default_factory=list)
    """Earlier attempts at this trial that the machinery failed (`trials.retry`): each one's
    trial name and status; their directories are kept."""
    verifier_reruns: list[dict[str, str]] = Field(default_factory=list)
    """Verifier runs that crashed before the one that counted (`TrialConfig.verifier_reruns`):
    each one's kind and message."""
    task_defect: dict[str, Any] | None = None
    """Set when this trial's verifier failed and so did the task's oracle
    (`trials.defects`): the task is broken, and dropped for the rest of the run."""
    injected_faults: list[dict[str, Any]] = Field(default_factory=list)
    """Faults injected on purpose in this attempt (`trials.faults`): the truth a drill checks
    the analysis against."""

    @property
    def system_error(self) -> bool:
        return self.status != COMPLETED

    def fail(self, kind: SystemErrorKind, exc: BaseException) -> None:
        """Record the first system error; later ones (during teardown) do not overwrite it."""
        if self.status == COMPLETED:
            self.status = kind.value
            self.reward = None
            self.exception_info = ExceptionInfo.of(exc)

    def write(self, trial_dir: Path) -> None:
        (trial_dir / "result.json").write_text(self.model_dump_json(indent=2) + "\n")
        if self.exception_info is not None:
            (trial_dir / "exception.txt").write_text(self.exception_info.exception_traceback)


def kind_of(exc: BaseException, default: SystemErrorKind) -> SystemErrorKind:
    return exc.kind if isinstance(exc, BureauSystemError) else default


def task_checksum(task_dir: Path) -> str:
    """A digest of the task's definition (not its workspace files, which can be large)."""
    digest = hashlib.sha256()
    for rel in ("task.toml", "instruction.md"):
        path = task_dir / rel
        digest.update(rel.encode() + b"\0" + (path.read_bytes() if path.exists() else b""))
    for folder in ("tests", "solution", "steps"):  # steps/: a multi-step task's prompts
        for path in sorted((task_dir / folder).rglob("*")):
            if path.is_file():
                digest.update(str(path.relative_to(task_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
