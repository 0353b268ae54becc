"""A rollout worker: runs trials (sandbox, tool servers, harness episode, verifier) on request.

The worker owns a sandbox runtime, a warm pool of sandboxes whose tool servers are already up,
and a sampler over the engines (a router when there are several). `rollout()` runs one trial
and joins the verifier's reward and pass flag to the harness's record. It never raises for a
failed trial: the failure comes back as a rollout whose record carries the system error, so
one broken trajectory affects no other. `LocalRollout` runs a worker in the caller's event loop;
the Ray actor in `bureau.loop.actors` wraps the same class in its own process.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bureau.harness.loop import HarnessConfig
from bureau.judge.client import JudgeConfig
from bureau.loop.config import ToolLatencyConfig
from bureau.loop.rollout import Rollout, RolloutRequest
from bureau.trials.defects import TaskDefects
from bureau.trials.faults import FaultConfig, FaultInjector

if TYPE_CHECKING:
    from bureau.harness.render import Renderer
    from bureau.inference.client import EngineClient, Sampler
    from bureau.inference.watch import EngineWatch
    from bureau.judge import JudgeClient
    from bureau.sandbox.base import Runtime
    from bureau.trials.agents import AgentContext, AgentResult
    from bureau.trials.judging import MissingJudge
    from bureau.trials.mcp_link import ToolLink
    from bureau.trials.pool import WarmPool


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs to build itself (picklable, for Ray)."""

    name: str
    model_dir: str
    """Tokenizer source (the policy's checkpoint folder)."""
    served_model: str
    engine_urls: tuple[str, ...]
    harness: HarnessConfig
    trials_dir: str
    isolation: str = "bwrap"
    agent_timeout_s: float | None = None
    warm_sandboxes: int = 2
    tool_latency: ToolLatencyConfig | None = None
    keep_trials: bool = True
    judge: JudgeConfig | None = None
    """This worker's share of the LLM judge (`JudgeConfig.share`); keys come from its own
    environment or key file, never through the spec."""
    missing_judge: MissingJudge = "fail"
    faults: FaultConfig | None = None
    """Faults to inject (drills)."""
    engine_watch_s: float = 2.0
    """How often the worker reads its engines' health and weight versions (`EngineWatch`)."""


class LatencyLink:
    """A tool link that waits a lognormal delay before each call (simulated remote tools).

    ln(delay) ~ N(ln p50, sigma) with sigma = ln(p99/p50) / z99, so the median is `p50_s` and the
    99th percentile is `p99_over_p50` times it.
    """

    Z99 = 2.3263478740408408

    def __init__(self, link: ToolLink, config: ToolLatencyConfig, seed: int) -> None:
        self._link = link
        self._mu = math.log(config.p50_s)
        self._sigma = math.log(config.p99_over_p50) / self.Z99
        self._rng = random.Random(seed)
        self.tools = link.tools
        self.injected_s = 0.0

    def draw(self) -> float:
        return self._rng.lognormvariate(self._mu, self._sigma)

    def __getattr__(self, name: str) -> Any:  # the link's process, sandbox and restarts
        return getattr(self._link, name)

    async def call(
        self, name: str, arguments: dict[str, Any], timeout_s: float, *, hang: bool = False
    ) -> Any:
        delay = self.draw()
        self.injected_s += delay
        await asyncio.sleep(delay)
        return await self._link.call(name, arguments, timeout_s, hang=hang)


def _agent_class() -> type:
    from bureau.harness.agent import HarnessAgent

    class LoopAgent(HarnessAgent):
        """The harness agent, with the tool link optionally behind injected latency."""

        tool_latency: ToolLatencyConfig | None = None
        latency_seed: int = 0

        async def run(self, ctx: AgentContext) -> AgentResult:
            if self.tool_latency is not None and ctx.tools is not None:
                link = LatencyLink(ctx.tools, self.tool_latency, self.latency_seed)
                # Duck-typed: the agent only uses `tools` and `call` of the link.
                ctx = replace(ctx, tools=cast("ToolLink", link))
            return await super().run(ctx)

    return LoopAgent


class RolloutWorker:
    """Runs trials for the loop; build with `start()`, release with `close()`."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.runtime: Runtime | None = None
        self.pool: WarmPool | None = None
        self.sampler: Sampler | None = None
        self.defects: TaskDefects | None = None
        self.judge: JudgeClient | None = None
        self.faults = FaultInjector(spec.faults)
        self.clients: list[EngineClient] = []
        self.watch: EngineWatch | None = None
        self.renderer: Renderer | None = None
        self._agent_cls = _agent_class()
        self._watching: asyncio.Task[None] | None = None

    async def start(self) -> RolloutWorker:
        from transformers import AutoTokenizer

        from bureau.harness.render import Renderer
        from bureau.inference.client import EngineClient
        from bureau.inference.router import Router
        from bureau.inference.watch import EngineWatch
        from bureau.sandbox import get_runtime
        from bureau.trials.pool import WarmPool

        loop = asyncio.get_running_loop()
        # Sandbox calls block in threads; the default executor would serialize them.
        loop.set_default_executor(ThreadPoolExecutor(max_workers=32))
        tokenizer = AutoTokenizer.from_pretrained(self.spec.model_dir, local_files_only=True)
        self.renderer = Renderer(tokenizer, enable_thinking=self.spec.harness.enable_thinking)
        self.runtime = get_runtime("local", isolation=self.spec.isolation)
        trials = Path(self.spec.trials_dir)
        trials.mkdir(parents=True, exist_ok=True)
        self.defects = TaskDefects(self.runtime, trials / "oracle-checks")
        if self.spec.warm_sandboxes:
            self.pool = WarmPool(self.runtime, trials / ".pool", size=self.spec.warm_sandboxes)
        self.clients = [EngineClient(url, self.spec.served_model) for url in self.spec.engine_urls]
        router = Router(self.clients) if len(self.clients) > 1 else None
        self.sampler = router or self.clients[0]
        self.watch = EngineWatch(self.clients, router, every_s=self.spec.engine_watch_s)
        self._watching = asyncio.create_task(self.watch.run(), name=f"{self.spec.name}-watch")
        if self.spec.judge is not None:
            from bureau.judge import JudgeClient

            self.judge = await JudgeClient(self.spec.judge).__aenter__()
        return self

    def set_weight_version(self, version: int) -> None:
        """Every engine serves `version` now (see `bureau.inference.watch`)."""
        assert self.watch is not None, "start() the worker first"
        self.watch.set_version(version)

    def _agent(self, request: RolloutRequest) -> Any:
        assert self.sampler is not None and self.renderer is not None
        update: dict[str, Any] = {"seed": request.seed}
        if request.temperature is not None:
            update["temperature"] = request.temperature
        agent = self._agent_cls(
            self.sampler,
            self.renderer,
            self.spec.harness.model_copy(update=update),
            self.spec.served_model,
        )
        agent.tool_latency = self.spec.tool_latency
        agent.latency_seed = request.seed
        return agent

    async def rollout(self, request: RolloutRequest) -> Rollout:
        from bureau.tasks.taskdir import load_task_dir
        from bureau.trials.attempt import run_attempt
        from bureau.trials.retry import RetryPolicy
        from bureau.trials.trial import TrialConfig

        assert self.runtime is not None, "start() the worker first"
        started = time.perf_counter()
        trials_dir = Path(self.spec.trials_dir) / request.purpose
        config = TrialConfig(
            max_agent_timeout_s=self.spec.agent_timeout_s, missing_judge=self.spec.missing_judge
        )
        # The one rollout path (`trials.attempt`): a machinery failure is retried from scratch
        # with a fresh agent (the record never mixes two attempts); a verifier that failed has
        # the task's oracle checked, and a task broken that way is dropped by the controller.
        outcome = await run_attempt(
            load_task_dir(request.task.path),
            lambda: self._agent(request),
            self.runtime,
            trials_dir,
            config=config,
            retry=RetryPolicy(),
            pool=self.pool,
            judge=self.judge,
            faults=self.faults,
            defects=self.defects,
            group_id=request.group_id,
            trajectory_id=f"{request.group_id}#{request.attempt}",
        )
        if not self.spec.keep_trials:
            import shutil

            shutil.rmtree(trials_dir / outcome.result.trial_name, ignore_errors=True)
        return Rollout(
            request=request,
            record=outcome.record,
            passed=outcome.passed,
            trial_status=outcome.result.status,
            wall_s=time.perf_counter() - started,
            worker=self.spec.name,
            task_defect=outcome.task_defect,
            error=outcome.error,
        )

    async def close(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
            self._watching = None
        if self.judge is not None:
            await self.judge.__aexit__(None, None, None)
        for client in self.clients:
            await client.aclose()
        if self.pool is not None:
            await self.pool.close()
        if self.runtime is not None:
            self.runtime.close()


class LocalRollout:
    """`RolloutBackend` on one worker in this process (tests, `bureau eval`, laptops)."""

    def __init__(self, worker: RolloutWorker) -> None:
        self.worker = worker

    async def rollout(self, request: RolloutRequest) -> Rollout:
        return await self.worker.rollout(request)

    async def set_weight_version(self, version: int) -> None:
        self.worker.set_weight_version(version)

    async def close(self) -> None:
        await self.worker.close()
