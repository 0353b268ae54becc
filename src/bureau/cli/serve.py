"""`bureau serve`: the built-in inference engine over HTTP, on a local checkpoint.

The command line is parsed before torch, transformers or uvicorn are imported, so `--help` is
instant; the engine module loads only once the arguments are known to be good.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class DTypeChoice(StrEnum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"
    auto = "auto"


def serve_command(
    model: Annotated[Path, typer.Option(help="Local Hugging Face checkpoint folder to serve.")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: a free one).")] = 8000,
    served_model_name: Annotated[
        str | None, typer.Option(help="The model name clients send (default: the folder name).")
    ] = None,
    max_batch: Annotated[int, typer.Option(min=1, help="Most sequences in one forward step.")] = 64,
    max_batch_tokens: Annotated[
        int, typer.Option(min=16, help="Most tokens in one step; longer prompts are chunked.")
    ] = 512,
    max_model_len: Annotated[
        int, typer.Option(min=2, help="Most tokens of one sequence, prompt plus completion.")
    ] = 4096,
    cache_tokens: Annotated[
        int, typer.Option(min=2, help="KV cache capacity in tokens over all sequences.")
    ] = 32768,
    dtype: Annotated[DTypeChoice, typer.Option(help="Weights dtype.")] = DTypeChoice.float32,
    seed: Annotated[int | None, typer.Option(help="Seed for requests without one.")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Serve a checkpoint with the built-in continuous-batching engine (OpenAI-style API)."""
    if not (model / "config.json").is_file():
        typer.echo(f"error: {model} is not a Hugging Face checkpoint (no config.json)", err=True)
        raise typer.Exit(2)
    from pydantic import ValidationError

    from bureau.inference.engine import EngineConfig

    try:
        config = EngineConfig(
            served_model_name=served_model_name or model.resolve().name,
            dtype=dtype.value,
            max_batch=max_batch,
            max_batch_tokens=max_batch_tokens,
            max_model_len=max_model_len,
            cache_tokens=max(cache_tokens, max_model_len),
            seed=seed,
        )
    except ValidationError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error

    from bureau.inference.server import run_server

    try:
        run_server(
            model,
            config,
            host=host,
            port=port,
            log_level=log_level,
            announce=lambda line: typer.echo(line),
        )
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has shut down: a normal stop
        raise typer.Exit(0) from None
    except OSError as error:  # e.g. the port is taken
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
