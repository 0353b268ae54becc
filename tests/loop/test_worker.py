"""The rollout worker's pure parts: injected latency (who is blamed for a failed trial is
`tests/trials/test_attempt.py`)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, cast

import pytest

from bureau.loop.config import ToolLatencyConfig
from bureau.loop.worker import LatencyLink


def test_injected_latency_has_the_configured_median_and_tail() -> None:
    class NoLink:
        tools = ()

    link = LatencyLink(cast(Any, NoLink()), ToolLatencyConfig(p50_s=0.2), seed=3)
    draws = sorted(link.draw() for _ in range(40_000))
    p50, p99 = statistics.median(draws), draws[int(0.99 * len(draws))]
    assert p50 == pytest.approx(0.2, rel=0.05)
    assert p99 / p50 == pytest.approx(10.0, rel=0.1)


def test_a_worker_brings_an_engine_back_and_labels_with_the_version_it_is_told(
    tmp_path: Path, tool_model: Path
) -> None:
    """The worker's watch runs: an engine its router gave up on answers /health again and is
    used again; a version the loop tells it labels the engines' tokens."""
    import asyncio
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from bureau.harness.loop import HarnessConfig
    from bureau.inference.router import Router
    from bureau.loop.worker import RolloutWorker, WorkerSpec

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Health) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = tuple(f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
    spec = WorkerSpec(
        name="w", model_dir=str(tool_model), served_model="m", engine_urls=urls,
        harness=HarnessConfig(), trials_dir=str(tmp_path), warm_sandboxes=0, engine_watch_s=0.05,
    )  # fmt: skip

    async def run() -> None:
        worker = await RolloutWorker(spec).start()
        try:
            router = cast("Router", worker.sampler)
            router.mark_unhealthy(1)  # as a request that could not reach it does
            for _ in range(200):
                await asyncio.sleep(0.05)
                if router.loads()[1].healthy:
                    break
            assert [load.healthy for load in router.loads()] == [True, True]
            worker.set_weight_version(6)
            assert [c.known_version for c in worker.clients] == [6, 6]
        finally:
            await worker.close()

    try:
        asyncio.run(run())
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
