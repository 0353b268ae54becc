"""An engine session: start the engine a command asked for, or reach running ones, for a block.

`engine_session` starts the built-in engine (`bureau serve`) or vLLM (from `.venv-vllm`) on a
local checkpoint, or takes the URLs of servers already running, and yields the sampler the
harness draws from (one `EngineClient`, or a `Router` over several) with the clients to close.
A server it started is stopped when the block ends, whatever happened inside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bureau.inference.client import EngineClient, Sampler


@contextmanager
def engine_session(
    engine: str,
    model: Path,
    urls: list[str],
    out: Path,
    context_length: int,
    *,
    say: Callable[[str], object] = print,
) -> Iterator[tuple[Sampler, list[EngineClient]]]:
    """Start (`builtin`, `vllm`) or reach (`url`) the engine(s); yields the sampler and the
    clients (the caller closes them, from its event loop). The engine log goes to
    `out/engine.log`; `say` reports start-up."""
    from bureau.inference.launch import BuiltinServer, BuiltinServerConfig
    from bureau.inference.vllm import VLLMServer, VLLMServerConfig

    if engine not in ("builtin", "vllm", "url"):
        raise ValueError(f"engine must be builtin, vllm or url, not {engine!r}")
    if engine == "url" and not urls:
        raise ValueError("engine url needs at least one server URL")
    name = model.name
    server: BuiltinServer | VLLMServer | None = None
    if engine == "builtin":
        server = BuiltinServer(BuiltinServerConfig(model=model, log_path=out / "engine.log"))
    elif engine == "vllm":
        server = VLLMServer(
            VLLMServerConfig(model=model, max_model_len=context_length, log_path=out / "engine.log")
        )
    try:
        if server is not None:
            say(f"starting the {engine} engine on {model} ...")
            server.start()
            say(f"{engine} engine ready at {server.base_url} in {server.startup_s:.1f} s")
            urls = [server.base_url]
            name = server.served_model_name
        clients = [EngineClient(url, name) for url in urls]
        if len(clients) == 1:
            yield clients[0], clients
        else:
            from bureau.inference.router import Router

            yield Router(clients), clients
    finally:
        if server is not None:
            server.stop()
