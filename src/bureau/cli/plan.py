"""`bureau plan`: a trainer layout, an engine count and the train settings for a cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from bureau.cli.options import SetOverrides


def plan_command(
    model: Annotated[
        str,
        typer.Option(
            help="A named architecture (qwen3-8b, qwen3-30b-a3b, qwen3.6-35b-a3b, "
            "qwen3.5-397b-a17b, qwen2.5-32b) or a Hugging Face config.json / checkpoint folder."
        ),
    ],
    config: Annotated[
        Path | None,
        typer.Option(help="TOML with [cluster], [workload] and [rates] tables (see --help)."),
    ] = None,
    set_: SetOverrides = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the plan as JSON.")] = None,
    train_config: Annotated[
        Path | None, typer.Option(help="Write the `bureau train` settings of the plan (TOML).")
    ] = None,
) -> None:
    """Plan a cluster run: the fastest trainer layout that fits (TP/PP/CP/EP, recompute,
    optimizer offload), what one inference engine holds (KV cache, linear-attention state) and
    decodes, and the engines that keep the trainer fed (Little's law, with the long tail).

    Settings (`--set cluster.trainer_nodes=8`, `--set workload.mean_tokens=40000`,
    `--set rates.decode_tokens_per_s=9000`): cluster (gpus_per_node, gpu_memory_gib, hbm_tbps,
    peak_tflops, interconnect, trainer_nodes, engine_tp), workload (context_length,
    mean_tokens, p99_tokens, sampled_share, group_size, groups_per_step, max_staleness,
    tool_s_per_trajectory), rates (mfu, trainer_tokens_per_s, decode_tokens_per_s,
    micro_tokens, target_wait). Unmeasured rates are estimates and the plan says which.
    """
    import tomli_w

    from bureau.cli.commands import console
    from bureau.config import ConfigError, apply_overrides, read_toml, validate_config
    from bureau.planning.model import load_model
    from bureau.planning.plan import make_plan

    try:
        spec = load_model(model)
        tree: dict[str, Any] = read_toml(config) if config else {}
        tree = apply_overrides(tree, set_ or [])
        settings = validate_config(PlanSettings, tree, str(config or "plan settings"))
        plan = make_plan(spec, settings.cluster, settings.workload, settings.rates)
    except (ConfigError, ValueError) as exc:
        console.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from exc
    print_plan(plan)
    if json_out is not None:
        json_out.write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
        console.print(f"{json_out} written")
    if train_config is not None:
        train_config.write_text(tomli_w.dumps(plan.train_config()))
        console.print(f"{train_config} written")


def _settings_model() -> type:
    from pydantic import Field

    from bureau.config import StrictModel
    from bureau.planning.engines import Workload
    from bureau.planning.plan import Cluster, Rates

    class Settings(StrictModel):
        cluster: Cluster = Field(default_factory=Cluster)
        workload: Workload = Field(default_factory=Workload)
        rates: Rates = Field(default_factory=Rates)

    return Settings


PlanSettings: Any = _settings_model()


def print_plan(plan: Any) -> None:
    from rich.table import Table

    from bureau.cli.commands import console

    m, t, e, s = plan.model, plan.trainer, plan.engine, plan.split
    console.print(
        f"[bold]{m.name}[/]: {m.total_params(mtp=False) / 1e9:.1f}B parameters, "
        f"{m.active_params() / 1e9:.1f}B active; {m.full_layers} full-attention and "
        f"{m.linear_layers} linear-attention layers; KV {m.kv_bytes_per_token() / 1024:.0f} KiB "
        f"a token, state {m.state_bytes_per_sequence() / 2**20:.0f} MiB a sequence"
    )
    table = Table(title=f"trainer layouts that fit {t.gpus} GPUs, fastest first")
    for column in ("layout", "DP", "weights", "grads", "optimizer", "activ.", "logits", "GiB/GPU",
                   "step s"):  # fmt: skip
        table.add_column(column, justify="left" if column == "layout" else "right")
    for fit in plan.ranked[:8]:
        table.add_row(
            fit.layout.label(), str(fit.dp), f"{fit.weights_gib:.1f}", f"{fit.grads_gib:.1f}",
            f"{fit.optimizer_gib:.1f}", f"{fit.activations_gib:.1f}", f"{fit.logits_gib:.1f}",
            f"{fit.total_gib:.1f}/{fit.capacity_gib:.0f}", f"{fit.step_s:.1f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"engine (TP{e.tp}): weights {e.weights_gib_per_gpu:.1f} GiB a GPU, {e.free_gib:.0f} GiB "
        f"for cache; {e.sequences_at_context} sequences at the full context, "
        f"{e.sequences_at_mean} at the mean; decodes {e.concurrency} at once at "
        f"{e.decode_tokens_per_s:,.0f} tokens/s"
    )
    console.print(
        f"split: {s.engines} engines ({plan.engine_nodes:g} nodes) + "
        f"{plan.cluster.trainer_nodes} trainer nodes; {s.trajectories_per_s_needed:.2f} "
        f"trajectories/s needed, {s.trajectories_per_s_per_engine:.2f} per engine, "
        f"{s.in_flight:.0f} in flight; latency mean {s.mean_latency_s:.0f} s, p99 "
        f"{s.p99_latency_s:.0f} s (staleness {s.staleness_p99} steps); trainer wait "
        f"{s.trainer_wait_share:.0%}"
    )
    for note in plan.notes:
        console.print(f"  note: {note}", markup=False)
