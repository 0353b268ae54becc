"""The rollout worker's pure parts: who is blamed for a failed trial, and injected latency."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, cast

import pytest

from bureau.loop.config import ToolLatencyConfig
from bureau.loop.rollout import RolloutRequest, TaskRef
from bureau.loop.worker import LatencyLink, agent_failed, join_record, passed_flag
from bureau.trials.result import ExceptionInfo, TrialResult, now

REQUEST = RolloutRequest(
    task=TaskRef("bureau/t", "/tasks/t"), group_id="g000001/t", attempt=2, seed=7
)


def trial(status: str, *, agent_started: bool, reward: float | None = None) -> TrialResult:
    result = TrialResult(
        task_name="bureau/t",
        trial_name="t__abc",
        trial_uri="file:///x",
        task_id={"path": "/tasks/t"},
        task_checksum="0",
        agent_info={"name": "harness", "version": "1"},
        status=status,
        reward=reward,
    )
    if agent_started:
        result.agent_execution.started_at = now()
    if status != "completed":
        result.exception_info = ExceptionInfo(
            exception_type="X",
            exception_message="it broke",
            exception_traceback="",
            occurred_at=now(),
        )
    return result


@pytest.mark.parametrize("status", ["agent_timeout", "agent_error"])
def test_an_agent_that_stalls_or_crashes_scores_zero_not_a_masked_error(
    status: str, tmp_path: Path
) -> None:
    result = trial(status, agent_started=True)
    record = join_record(result, tmp_path, REQUEST)
    assert agent_failed(result)
    assert record.reward == 0.0 and record.system_error is None
    assert record.group_id == "g000001/t"


def test_a_tool_server_dying_under_the_agent_is_the_agents_failure(tmp_path: Path) -> None:
    assert agent_failed(trial("tool_server_failed", agent_started=True))
    before = trial("tool_server_failed", agent_started=False)
    record = join_record(before, tmp_path, REQUEST)
    assert not agent_failed(before)
    assert record.reward is None and record.system_error == "tool_server_failed: it broke"


@pytest.mark.parametrize("status", ["sandbox_start_failed", "engine_unavailable", "verifier_error"])
def test_machinery_failures_are_masked_with_their_kind(status: str, tmp_path: Path) -> None:
    record = join_record(
        trial(status, agent_started=status != "sandbox_start_failed"), tmp_path, REQUEST
    )
    assert record.reward is None
    assert record.system_error is not None and record.system_error.startswith(f"{status}: ")
    assert record.token_ids == [] and record.stop_reason == "system_error"


def test_pass_is_the_verifiers_flag(tmp_path: Path) -> None:
    graded = trial("completed", agent_started=True, reward=0.75)
    graded.verifier_result = {"rewards": {"reward": 0.75, "pass": 0.0}}
    assert passed_flag(graded) is False
    graded.verifier_result = {"rewards": {"reward": 1.0}}
    graded.reward = 1.0
    assert passed_flag(graded) is True
    assert passed_flag(trial("verifier_error", agent_started=True)) is None


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
