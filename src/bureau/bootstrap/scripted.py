"""The teacher as an engine and as a trial agent, so it runs through the real harness.

`ScriptedSampler` implements the `Sampler` protocol: each `complete(prompt_ids)` decodes what
the harness appended since the previous turn (the tool result or correction, exactly as the
model would see it), asks the teacher for the next turn, and returns that text's token ids
closed by `<|im_end|>`, with logprob 0 (the teacher is certain). The harness appends those ids
unchanged, so the recorded trajectory is token for token what the teacher emitted.

`ScriptedAgent` is the trial agent: per trial it builds the task's teacher (drawing the mistake
from a seeded generator keyed by task and attempt) and hands the run to the real
`HarnessAgent`, which talks to the trial's MCP tool servers and writes the record.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from bureau.bootstrap.config import Mistake, MistakeRates
from bureau.bootstrap.teacher import TaskView, Teacher
from bureau.harness.agent import HarnessAgent, harness_tool_groups
from bureau.harness.loop import HarnessConfig
from bureau.harness.render import Renderer
from bureau.inference.client import Completion, SamplingParams
from bureau.records import TrajectoryRecord
from bureau.trials.agents import Agent, AgentContext, AgentResult

TEACHER_MODEL = "scripted-teacher"
TEACHER_VERSION = 0


class Script(Protocol):
    """What a sampler asks of a scripted agent: the next assistant text, given the text the
    harness appended since the previous turn (None before the first)."""

    def next_turn(self, observation: str | None) -> str: ...


class ScriptedSampler:
    """A `Sampler` whose every turn is the teacher's; see the module docstring."""

    def __init__(self, renderer: Renderer, teacher: Script) -> None:
        self.renderer = renderer
        self.teacher = teacher
        self.emitted: list[list[int]] = []
        """The ids returned for each turn (for checks that the record holds exactly these)."""
        self._seen = 0

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        observation = self.renderer.decode(prompt_ids[self._seen :]) if self._seen else None
        text = self.teacher.next_turn(observation)
        ids = [*self.renderer.encode(text), self.renderer.im_end_id][: params.max_tokens]
        finish = "stop" if ids[-1] == self.renderer.im_end_id else "length"
        self._seen = len(prompt_ids) + len(ids)
        self.emitted.append(ids)
        n = len(ids)
        return Completion(ids, [0.0] * n, finish, [TEACHER_VERSION] * n, engine=TEACHER_MODEL)


def trajectory_rng(seed: int, task_name: str, attempt: int) -> random.Random:
    """The generator of one trajectory's mistake and its details."""
    return random.Random(f"{seed}/{task_name}/{attempt}")


@dataclass
class AttemptCounter:
    """Numbers the attempts at each task, across the concurrent trials of one run."""

    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, task_name: str) -> int:
        with self.lock:
            attempt = self.counts[task_name]
            self.counts[task_name] += 1
            return attempt


@dataclass
class HarnessScriptAgent(Agent):
    """A trial agent whose turns a script writes, run by the real harness over the trial's MCP
    tools (its `run` sets `_harness`, whose record is the trajectory)."""

    renderer: Renderer
    config: HarnessConfig
    uses_tools = True

    def tool_groups(self) -> list[str] | None:
        return harness_tool_groups(self.config)

    def trajectory(self) -> TrajectoryRecord | None:
        harness: HarnessAgent | None = getattr(self, "_harness", None)
        return harness.trajectory() if harness is not None else None


@dataclass
class ScriptedAgent(HarnessScriptAgent):
    """The teacher through the real harness over the trial's MCP tools."""

    mistakes: MistakeRates
    seed: int
    attempts: AttemptCounter
    answer_in_message: bool = False
    lookup_by_code: bool = False
    name = "scripted"
    version = "1"

    def teacher(self, view: TaskView) -> tuple[Teacher, Mistake | None, int]:
        attempt = self.attempts.next(view.name)
        rng = trajectory_rng(self.seed, view.name, attempt)
        mistake = self.mistakes.draw(rng)
        teacher = Teacher(
            view,
            mistake,
            rng,
            answer_in_message=self.answer_in_message,
            lookup_by_code=self.lookup_by_code,
        )
        return teacher, mistake, attempt

    async def run(self, ctx: AgentContext) -> AgentResult:
        view = TaskView.from_task_dir(ctx.task.path, ctx.task.name, ctx.task.instruction)
        teacher, mistake, attempt = self.teacher(view)
        sampler = ScriptedSampler(self.renderer, teacher)
        harness = HarnessAgent(sampler, self.renderer, self.config, TEACHER_MODEL)
        self._harness = harness
        result = await harness.run(ctx)
        result.metadata["mistake"] = mistake or "none"
        result.metadata["attempt"] = attempt
        return result
