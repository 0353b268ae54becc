"""`bureau train`: build the run's actors on Ray from a `RunConfig` and drive the controller.

The run folder holds the resolved config, `metrics.jsonl` (+ TensorBoard), `checkpoint/`
(trainer and loop state), `trials/` (train and eval trial directories), `trajectories/` (the
records each step trained on, one Parquet file a step), `placement.json` (where Ray put every
actor: bundle, node, process, GPUs), `engines/` (logs), `evals.json` (every held-out
evaluation) and, at the end, `weights/` (the final policy). Running
the same command on the same folder resumes from the checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bureau.config import dump_resolved_config
from bureau.loop import checkpoints
from bureau.loop.config import RunConfig
from bureau.loop.controller import Controller, LoopSettings
from bureau.loop.data import TaskStream, load_tasks, trained_on
from bureau.loop.metrics import MetricsLog, truncate_metrics
from bureau.loop.rollout import TaskRef
from bureau.loop.status import RunStatus

if TYPE_CHECKING:
    from bureau.evaluation.run import EvalConfig

Say = Callable[[str], None]
TRAJECTORIES = "trajectories"
"""`RUN/trajectories/step-NNNNNN.parquet`: the records each step trained on."""


def settings_of(config: RunConfig) -> LoopSettings:
    return LoopSettings(
        steps=config.steps,
        groups_per_step=config.async_.groups_per_step,
        attempts=config.rollout.attempts,
        max_in_flight=config.rollout.max_in_flight,
        max_staleness=config.async_.staleness_bound,
        stale_policy=config.async_.stale_policy,
        max_dropped_steps=config.async_.max_dropped_steps,
        max_dropped_s=config.async_.max_dropped_s,
        live_metrics_every_s=config.logging.live_every_s,
        seed=config.seed,
        checkpoint_every=config.checkpoint.every,
        eval_every=config.eval.every,
        eval_at_start=config.eval.at_start,
        eval_at_end=config.eval.at_end,
        eval_attempts=config.eval.attempts,
        eval_temperature=config.eval.temperature,
        eval_max_in_flight=config.eval.max_in_flight,
    )


def preeval_config(config: RunConfig) -> EvalConfig:
    """The pre-evaluation's settings: the rollout's harness, concurrency, isolation, retries,
    judge and faults, and an engine serving the starting policy."""
    from bureau.evaluation.run import EvalConfig

    return EvalConfig(
        concurrency=config.rollout.max_in_flight,
        isolation=config.rollout.isolation,
        agent_timeout_s=config.rollout.agent_timeout_s,
        engine=config.engines.kind,
        engine_urls=list(config.engines.urls),
        seed=config.seed,
        harness=config.rollout.harness,
        faults=config.rollout.faults,
        judge=config.judge,
        missing_judge=config.rollout.missing_judge,
    )


def preevaluate(config: RunConfig, tasks: list[TaskRef], say: Say) -> dict[str, Any]:
    """Run the starting policy over the training tasks (`bureau preeval`'s trials and
    taxonomy, into `out/preeval/`); raise `PreevalFailed` when the gate fails."""
    from bureau.evaluation.preeval import PreevalFailed, summarize_preeval
    from bureau.evaluation.run import EvalTask, run_eval
    from bureau.tasks.taskdir import load_task_dir

    gate = config.preeval.max_system_error_rate
    chosen = tasks[: config.preeval.max_tasks] if config.preeval.max_tasks else tasks
    say(f"pre-evaluation: {len(chosen)} tasks at concurrency {config.rollout.max_in_flight}")
    out = config.out / "preeval"
    run_eval(
        config.data.train,
        [EvalTask(load_task_dir(Path(t.path)), t.domain) for t in chosen],
        config.model.path,
        preeval_config(config),
        out,
    )
    found, path, passed = summarize_preeval(out, gate)
    say(
        f"pre-evaluation: {found['completed']['count']} of {found['trials']} trials completed "
        f"(mean reward {found['completed']['mean_reward']}), system errors "
        f"{found['system_error_rate']:.2%} (gate {gate:.2%}): {path}"
    )
    if not passed:
        raise PreevalFailed(found, path, gate)
    return found


def train(
    config: RunConfig,
    *,
    say: Say = print,
    on_step: Callable[..., None] | None = None,
    on_eval: Callable[..., None] | None = None,
    status: RunStatus | None = None,
) -> int:
    """Run (or resume) the configured training; returns the final step. `on_step` gets each
    step's metrics, `on_eval` each evaluation's; `status` follows the phase the run is in."""
    from bureau.loop.actors.cluster import RayRun, connect_ray, disconnect_ray
    from bureau.loop.actors.ports import RayRollout, RayTrainer, weight_port

    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    dump_resolved_config(config, out)
    checkpoint = out / "checkpoint"
    resume = checkpoints.latest(checkpoint)
    if resume is not None:
        version = int(checkpoints.read_loop_state(resume)["version"])
        dropped = truncate_metrics(out, version)
        for later in sorted((out / TRAJECTORIES).glob("*.parquet")):
            if int(later.stem.split("-")[1]) > version:  # step-N, dropped-N-gP: past the resume
                later.unlink()
        say(f"resuming from step {version} ({dropped} metric lines past it dropped)")
    tasks = load_tasks(config.data.train, config.data.train_filter)
    eval_tasks = load_tasks(config.data.eval, config.data.eval_filter) if config.data.eval else []
    seen = trained_on(eval_tasks, tasks)
    if seen:
        say(
            f"warning: {len(seen)} of {len(eval_tasks)} evaluation tasks are training tasks (the "
            f"same folder or instruction, e.g. {seen[0]}): their Pass@1 is not held out"
        )
    held_out = "held-out" if not seen else "evaluation"
    say(f"{len(tasks)} training tasks, {len(eval_tasks)} {held_out} tasks")
    status = status or RunStatus()
    if config.preeval.enabled and resume is None:
        status.set(f"pre-evaluating {len(tasks)} tasks")
        preevaluate(config, tasks, say)
    status.set("starting Ray")
    started_ray = connect_ray(config)
    run = RayRun(config, say, status)
    sink = MetricsLog(out, tensorboard=config.logging.tensorboard)
    try:
        run.start()
        placement = run.placement_report()
        (out / "placement.json").write_text(json.dumps(placement, indent=1) + "\n")
        trainer = RayTrainer(run.trainer_ranks)
        controller = Controller(
            settings_of(config),
            stream=TaskStream(tasks, seed=config.seed),
            rollout=RayRollout(run.workers),
            trainer=trainer,
            weights=weight_port(
                config, trainer, run.engines, run.engine_urls, out / "weights-sync"
            ),
            advantages=config.algorithm.advantages,
            reduction=config.algorithm.reduction,
            sink=sink,
            checkpoint_dir=checkpoint,
            eval_tasks=eval_tasks,
            on_step=on_step,
            on_eval=(lambda r: on_eval(r | {"held_out": not seen})) if on_eval else None,
            trajectories_dir=out / TRAJECTORIES,
            status=status,
        )

        async def main() -> None:
            loop = asyncio.get_running_loop()
            stopper = _stopper(controller, say)
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stopper)
            try:
                await controller.run()
                if config.checkpoint.export_weights:
                    status.set("exporting the final weights")
                    await trainer.export(out / "weights")
            finally:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(signum)

        asyncio.run(main())
        evals_file = out / "evals.json"
        earlier = json.loads(evals_file.read_text()) if evals_file.is_file() else []
        for result in controller.evals:
            result["held_out"] = not seen
            result["tasks_also_trained_on"] = len(seen)
        evals_file.write_text(json.dumps(earlier + controller.evals, indent=1) + "\n")
        return controller.version
    finally:
        sink.close()
        run.close()
        if started_ray:
            disconnect_ray()


def _stopper(controller: Controller, say: Say) -> Callable[[], None]:
    presses = 0

    def stop() -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            raise KeyboardInterrupt
        say(
            "stopping: finishing the current step and saving a checkpoint "
            "(Ctrl-C or SIGTERM again: now)"
        )
        controller.request_stop()

    return stop
