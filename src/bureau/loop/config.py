"""`bureau train --config run.toml`: the run config, one section per component.

Each section reuses its component's own config class where one exists (`HarnessConfig`,
`AdvantageConfig`, `ReductionConfig`, the policy losses, `TrainerConfig`), so a key means the
same thing in `bureau train`, `bureau train-offline` and `bureau tasks check`. The file is read
with `bureau.config.load_config` (flags: `--set algorithm.loss.clip_low=0.2`), every unknown
key is an error naming it, and the resolved config is written into the run folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from bureau.algo.advantages import AdvantageConfig
from bureau.algo.losses import PolicyLossConfig, PPOLossConfig
from bureau.algo.reductions import ReductionConfig
from bureau.config import StrictModel
from bureau.harness.loop import HarnessConfig
from bureau.judge.client import JudgeConfig
from bureau.trainer.config import TrainerConfig
from bureau.trials.faults import FaultConfig


class ModelSection(StrictModel):
    path: Path
    """Local Hugging Face checkpoint the policy starts from (weights and tokenizer)."""
    served_name: str | None = None
    """The model name the engines serve (default: the folder's name)."""


class TaskFilter(StrictModel):
    domains: list[str] | None = None
    """Keep only tasks of these domains (law, consulting, banking); None keeps all."""
    templates: list[str] | None = None
    """Keep only tasks made from these world templates (e.g. `banking.model_line_item`)."""
    max_tasks: int | None = Field(default=None, ge=1)
    """Keep at most this many tasks (after the other filters, in name order)."""


class DataSection(StrictModel):
    train: Path
    """Dataset folder of training tasks (`bureau worlds build --split train`)."""
    eval: Path | None = None
    """Held-out dataset folder (disjoint worlds), for the periodic evaluation."""
    train_filter: TaskFilter = Field(default_factory=TaskFilter)
    """Which training tasks to use."""
    eval_filter: TaskFilter = Field(default_factory=TaskFilter)
    """Which held-out tasks to evaluate on."""


class EngineSection(StrictModel):
    kind: Literal["builtin", "vllm", "url"] = "builtin"
    """builtin: bureau's engine in a Ray actor; vllm: vLLM servers (`.venv-vllm` on CPU); url:
    servers already running at `urls` (updated through their weight routes, `url_control`)."""
    count: int = Field(default=1, ge=1)
    """Engine replicas (builtin, vllm); the router spreads trajectories over them."""
    urls: list[str] = Field(default_factory=list)
    """kind = url: the servers' base URLs."""
    url_control: Literal["vllm", "builtin", "none"] = "vllm"
    """kind = url: the servers' weight routes. vllm: vLLM's development routes (started with
    `VLLM_SERVER_DEV_MODE=1`); builtin: `bureau serve`'s; none: the loop leaves their weights
    alone (every token is version 0, so only `async.stale_policy = "keep"` can train). Either
    way the servers read the weight folders (`RUN/weights-sync`) under the driver's paths."""
    num_cpus: float = Field(default=1.0, ge=0)
    """Ray CPUs reserved per engine."""
    num_gpus: float = Field(default=0.0, ge=0)
    """Ray GPUs per engine (vLLM's tensor parallel size on GPUs)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources per engine, to put engines on chosen nodes (a node started with
    `ray start --resources '{"inference": 8}'` takes engines asking for `{inference = 1}`)."""
    max_batch: int = Field(default=32, ge=1)
    """builtin: most sequences decoded together."""
    cache_tokens: int = Field(default=65536, ge=256)
    """builtin: KV-cache size in tokens."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """builtin: where each engine's model runs. auto: cuda when Ray gave the engine GPUs
    (`num_gpus`), else cpu; cpu with `num_gpus` > 0 places engines on (logical) GPUs but runs
    them on the CPU (tests of GPU placement on a machine without GPUs)."""
    startup_timeout_s: float = Field(default=600.0, gt=0)
    """How long an engine may take to become healthy."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """The engines' weights and activations dtype (builtin and vLLM)."""
    vllm_args: list[str] = Field(default_factory=list)
    """vllm: more `vllm serve` arguments, e.g. `["--gpu-memory-utilization", "0.4"]` when the
    trainer shares the GPU."""
    max_restarts: int = Field(default=3, ge=0)
    """Ray restarts of a dead engine actor; its trajectories in flight are system errors."""


class ToolLatencyConfig(StrictModel):
    """Injected tool latency: lognormal with median `p50_s` and p99/p50 = `p99_over_p50`, to make
    wall time per trajectory long-tailed the way remote tools make it."""

    p50_s: float = Field(gt=0)
    """Median added latency per tool call, in seconds."""
    p99_over_p50: float = Field(default=10.0, gt=1)
    """The tail: the 99th percentile over the median."""


class RolloutSection(StrictModel):
    attempts: int = Field(default=4, ge=1)
    """Trajectories per task: one group, for group-relative advantages."""
    max_in_flight: int = Field(default=8, ge=1)
    """Trajectories running at once over all rollout workers."""
    workers: int = Field(default=1, ge=1)
    """Rollout worker actors (each runs trials: sandbox, tool servers, harness episode)."""
    worker_cpus: float = Field(default=0.5, ge=0)
    """Ray CPUs reserved per rollout worker."""
    worker_resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources per rollout worker (see `engines.resources`)."""
    max_worker_restarts: int = Field(default=5, ge=0)
    """Ray restarts of a dead rollout worker; its in-flight trajectories are re-queued."""
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    """The agent loop: limits, sampling, tools exposed."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """Sandbox isolation: bubblewrap, or none (unsafe: for machines without bubblewrap)."""
    agent_timeout_s: float | None = Field(default=None, gt=0)
    """Cap on each trial's agent time (task.toml's timeout otherwise)."""
    warm_sandboxes: int = Field(default=2, ge=0)
    """Sandboxes kept started with their tool servers ready, per worker."""
    tool_latency: ToolLatencyConfig | None = None
    """Injected tool latency (benchmarks, or to simulate remote tools)."""
    keep_trials: bool = True
    """Keep each trial's directory (agent record, ATIF trajectory, verifier output)."""
    missing_judge: Literal["fail", "skip"] = "fail"
    """Tasks with LLM-judge criteria and no `[judge]`: a system error, or graded without them."""
    faults: FaultConfig = Field(default_factory=FaultConfig)
    """Faults to inject, for drills (`bureau.trials.faults`); none by default."""


class AlgorithmSection(StrictModel):
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Group-relative advantages, filters and the masking of system errors."""
    reduction: ReductionConfig = Field(default_factory=ReductionConfig)
    """How per-token losses average into the batch loss."""
    loss: PolicyLossConfig = Field(default_factory=PPOLossConfig)
    """The policy loss (`kind`: ppo, decoupled_ppo, dppo_tv) and its off-policy correction."""


class AsyncSection(StrictModel):
    mode: Literal["async", "sync"] = "async"
    """async: generation never waits for the trainer; sync: the same loop with max_staleness 0
    and the engines idle while the trainer runs (the baseline)."""
    max_staleness: int = Field(default=1, ge=0)
    """Bound on policy versions between a group's oldest sampled token and the trainer."""
    groups_per_step: int = Field(default=4, ge=1)
    """B: prompt groups per optimizer step."""
    stale_policy: Literal["drop", "keep"] = "drop"
    """What to do with a group past the bound when the trainer takes it (counted either way)."""
    max_dropped_steps: int = Field(default=5, ge=1)
    """Stop the run once this many steps' worth of groups in a row were dropped as stale, for
    at least `max_dropped_s` (engines that never get new weights); a kept group or an engine
    repair ends the streak."""
    max_dropped_s: float = Field(default=300.0, ge=0)
    """How long such a streak must last (an engine restarting serves old weights meanwhile)."""

    @property
    def staleness_bound(self) -> int:
        return 0 if self.mode == "sync" else self.max_staleness


class WeightsSection(StrictModel):
    transport: Literal["auto", "object_store", "disk", "nccl", "gloo"] = "auto"
    """How weights reach the engines: the state dict through Ray's object store (builtin), a
    safetensors folder that the engine reloads (vLLM), or a broadcast from trainer rank 0 to
    builtin engines: nccl on GPUs, gloo its CPU stand-in (used by tests). auto picks
    object_store for builtin engines and disk for vLLM."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """The dtype weights are sent in (the engines' dtype)."""


class EvalSection(StrictModel):
    every: int | None = Field(default=None, ge=1)
    """Evaluate on `data.eval` every this many steps (None: only `at_start`/`at_end`)."""
    at_start: bool = False
    """Evaluate the initial policy before the first step."""
    at_end: bool = True
    """Evaluate the final policy after the last step."""
    attempts: int = Field(default=1, ge=1)
    """Attempts per held-out task."""
    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature for evaluation (None: the rollout's)."""
    max_in_flight: int | None = Field(default=None, ge=1)
    """Evaluation attempts in flight at once (None: `rollout.max_in_flight`). An evaluation
    at the start or the end has the engines to itself, and a batching engine serves a larger
    batch faster; one every N steps runs beside the training rollouts, adding to theirs."""


class CheckpointSection(StrictModel):
    every: int = Field(default=10, ge=1)
    """Save a resumable checkpoint every this many steps (and at the end)."""
    export_weights: bool = True
    """Also write the final policy as a Hugging Face folder (`RUN/weights`)."""


class LoggingSection(StrictModel):
    tensorboard: bool = True
    """Write step metrics to TensorBoard (`RUN/tensorboard`) as well as `metrics.jsonl`."""
    progress: bool = True
    """Show the live progress: a line per step (reward, Pass@1, staleness, groups dropped as
    stale, trainer wait, sync, errors, ETA), one per evaluation, and what the run is waiting
    for whenever nothing was printed for `heartbeat_s`."""
    heartbeat_s: float = Field(default=30.0, gt=0)
    """With `progress`: the longest the terminal stays silent while the run waits."""
    live_every_s: float = Field(default=5.0, gt=0)
    """How often the `live/*` rows (stale drops, requeues, the buffer, trajectories in
    flight) go to `metrics.jsonl`, between steps too: a run that trains nothing still says
    what it drops."""


class RaySection(StrictModel):
    address: str | None = None
    """An existing cluster (`ray start --head` gives it); None starts Ray locally."""
    num_cpus: int | None = Field(default=None, ge=1)
    """Local Ray only: CPUs Ray may schedule (default: the machine's)."""
    trainer_ranks: int = Field(default=1, ge=1)
    """Trainer processes: 1, or FSDP2 ranks as Ray actors (gloo on CPU, nccl on GPUs)."""
    trainer_cpus: float = Field(default=1.0, ge=0)
    """Ray CPUs per trainer rank."""
    trainer_gpus: float = Field(default=0.0, ge=0)
    """Ray GPUs per trainer rank."""
    trainer_resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources per trainer rank (see `engines.resources`)."""


class PreevalSection(StrictModel):
    enabled: bool = False
    """Run the policy over the training tasks first (`bureau preeval`, at the rollout
    concurrency, with the rollout's harness), and start training only when the gate passes."""
    max_system_error_rate: float = Field(default=0.005, ge=0, le=1)
    """The gate: system errors at most this share of the trials."""
    max_tasks: int | None = Field(default=None, ge=1)
    """Only the first N training tasks (a quicker, weaker check)."""


class RunConfig(StrictModel):
    """Everything `bureau train` needs; see configs/ for examples."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    out: Path
    """Run folder: resolved config, metrics, checkpoints, trials, final weights."""
    steps: int = Field(ge=1)
    """Optimizer steps to reach (counting those of a resumed run)."""
    seed: int = 0
    """Seeds the task order, sampling, sandboxes' mistakes and the trainer."""
    model: ModelSection
    data: DataSection
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    engines: EngineSection = Field(default_factory=EngineSection)
    async_: AsyncSection = Field(default_factory=AsyncSection, alias="async")
    weights: WeightsSection = Field(default_factory=WeightsSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    ray: RaySection = Field(default_factory=RaySection)
    preeval: PreevalSection = Field(default_factory=PreevalSection)
    judge: JudgeConfig | None = None
    """The LLM judge of judge criteria; each rollout worker gets an equal share of every key's
    limits (`JudgeConfig.share`). Keys come from the environment or `key_file`."""

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        # Actors on other nodes (and Ray workers anywhere) do not run in the driver's folder:
        # every path they are handed is absolute, resolved where the config was read.
        self.out = self.out.absolute()
        self.model.path = self.model.path.absolute()
        self.data.train = self.data.train.absolute()
        if self.data.eval is not None:
            self.data.eval = self.data.eval.absolute()
        if self.judge is not None:
            self.judge.share(self.rollout.workers)  # limits too small to split are an error
        if self.engines.kind == "url" and not self.engines.urls:
            raise ValueError("engines.kind = 'url' needs engines.urls")
        if (
            self.engines.kind == "url"
            and self.engines.url_control == "none"
            and self.async_.stale_policy == "drop"
        ):
            raise ValueError(
                "engines.url_control = 'none' leaves the engines on the starting weights, so "
                "after async.max_staleness steps every group is stale and dropped: give the "
                "servers' weight routes (url_control = 'vllm' or 'builtin'), or set "
                "async.stale_policy = 'keep' to train on them anyway"
            )
        transport = self.weights.transport
        if transport in ("object_store", "nccl", "gloo") and self.engines.kind != "builtin":
            raise ValueError(f"weights.transport = {transport!r} needs builtin engines")
        if self.rollout.attempts < self.algorithm.advantages.min_group_size:
            raise ValueError(
                f"rollout.attempts ({self.rollout.attempts}) is below "
                f"algorithm.advantages.min_group_size ({self.algorithm.advantages.min_group_size})"
            )
        if (self.eval.every or self.eval.at_start) and self.data.eval is None:
            raise ValueError("eval.every / eval.at_start need data.eval")
        sampled = self.rollout.harness.temperature
        if "temperature" not in self.trainer.model_fields_set:
            # the trainer scores the distribution the rollouts were drawn from
            self.trainer = self.trainer.model_copy(update={"temperature": sampled or 1.0})
        elif sampled > 0 and self.trainer.temperature != sampled:
            raise ValueError(
                f"trainer.temperature ({self.trainer.temperature}) differs from "
                f"rollout.harness.temperature ({sampled}): the trainer's logprobs must be of the "
                "distribution the rollouts were sampled from (leave trainer.temperature unset)"
            )
        return self

    @property
    def transport(self) -> str:
        if self.weights.transport != "auto":
            return self.weights.transport
        return "object_store" if self.engines.kind == "builtin" else "disk"
