"""What the controller asks of rollout workers, and what comes back.

A `RolloutRequest` is one trajectory of one task (an attempt of a group); a `Rollout` is its
outcome: the harness's `TrajectoryRecord` (token ids, loss mask, sampler logprobs, weight
versions), the verifier's reward and pass flag, or the system error that left it without a
reward. Every failure of the machinery comes back as a `Rollout` with `system_error` set; the
only exception a backend raises is `WorkerLost`, when the process running the trajectory died
and the attempt should run again elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from bureau.errors import SystemErrorKind
from bureau.records import TrajectoryRecord

Purpose = Literal["train", "eval"]


@dataclass(frozen=True)
class TaskRef:
    """A task as the loop sees it: where it is and how to report it."""

    name: str
    """The task's name ([task].name of task.toml)."""
    path: str
    """Absolute path of the task directory (readable by every worker)."""
    domain: str = "unknown"
    """law, consulting, banking (task.toml metadata), for per-domain metrics."""
    template: str = ""
    """The world template the task came from (task.toml metadata)."""
    unseen_kind: bool | None = None
    """Whether the template is a kind no training split has (`held_out_kind`; None: unsaid)."""


@dataclass(frozen=True)
class RolloutRequest:
    task: TaskRef
    group_id: str
    """Attempts of one task in one step share it (their advantages are relative)."""
    attempt: int
    """0 .. attempts-1 within the group."""
    seed: int
    """Sampling seed of this trajectory (distinct per attempt and group)."""
    purpose: Purpose = "train"
    temperature: float | None = None
    """Sampling temperature for this trajectory (None: the harness config's)."""


@dataclass
class Rollout:
    request: RolloutRequest
    record: TrajectoryRecord
    """The trajectory; it has no tokens when the trial failed before the agent ran."""
    passed: bool | None = None
    """Every rubric criterion passed (None without a verifier result)."""
    trial_status: str = "completed"
    """The trial's status (`completed`, or a system-error kind, or `agent_timeout`...)."""
    wall_s: float = 0.0
    """Seconds from the worker taking the request to the verifier's reward."""
    worker: str = ""
    """Which worker ran it."""
    requeued: int = 0
    """How often this attempt ran again because its worker died."""
    task_defect: bool = False
    """The verifier failed here and on the task's oracle too: the task is broken
    (`bureau.trials.defects`), and the controller stops sampling it."""
    error: SystemErrorKind | None = None
    """The machinery's failure, typed (`bureau.trials.attempt`); None when graded."""

    @property
    def reward(self) -> float | None:
        return self.record.reward

    @property
    def system_error(self) -> str | None:
        """`kind: message` when the machinery failed and the trajectory carries no reward."""
        return self.record.system_error

    @property
    def error_kind(self) -> str | None:
        """The machinery failure's kind, for metrics: the typed one, else (records made
        without `trials.attempt`, as in tests' fakes) the prefix of the record's message."""
        if self.error is not None:
            return self.error.value
        if self.record.system_error is None:
            return None
        return self.record.system_error.split(":", 1)[0].strip() or "unknown"


class WorkerLost(Exception):
    """The worker running a trajectory died (process crash, node loss): run it again."""

    def __init__(self, message: str, worker: str = "") -> None:
        super().__init__(message)
        self.worker = worker
        """The worker that died (`worker-N`), where the backend knows it."""


class RolloutBackend(Protocol):
    """Runs trajectories somewhere: in this process, or on Ray actors."""

    async def rollout(self, request: RolloutRequest) -> Rollout:
        """Run one trajectory to its reward; raises only `WorkerLost`."""
        ...

    async def set_weight_version(self, version: int) -> None:
        """Every engine now serves `version`: label tokens sampled from now on with it, where
        an engine does not report versions itself (vLLM, `url` engines)."""
        ...

    async def close(self) -> None: ...
