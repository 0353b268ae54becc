"""Fault switches and engine resends, without sandboxes: the draws, the records, the resends."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest
from pydantic import ValidationError

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, EngineHTTPError, SamplingParams
from bureau.inference.retrying import RetryingSampler, worth_resending
from bureau.trials.faults import (
    FAULT_CAUSES,
    FaultConfig,
    FaultInjector,
    FaultySampler,
    TrialFaults,
)

PARAMS = SamplingParams(max_tokens=4)
DONE = Completion([1, 2], [0.0, 0.0], "stop", [0, 0], engine="fake")


class Script:
    """A sampler that fails as scripted (None: answers)."""

    def __init__(self, *failures: BureauSystemError | None) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        self.calls += 1
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        return DONE


def test_the_command_line_form_sets_rates_and_names_a_bad_entry() -> None:
    config = FaultConfig.parse("tool_hang=0.05, engine_error=0.1,seed=4")
    assert (config.tool_hang, config.engine_error, config.seed) == (0.05, 0.1, 4)
    assert config.active and not FaultConfig().active
    with pytest.raises(ValueError, match="unknown switch 'tool_hung'"):
        FaultConfig.parse("tool_hung=0.1")
    with pytest.raises(ValueError, match="expected kind=rate"):
        FaultConfig.parse("tool_hang")
    with pytest.raises(ValidationError):
        FaultConfig.parse("disk_full=1.5")


def test_every_switch_has_a_cause_and_a_rate() -> None:
    assert set(FAULT_CAUSES) <= set(FaultConfig.model_fields)
    assert set(FAULT_CAUSES.values()) <= {"tool_defect", "infrastructure", "verifier"}


def test_draws_follow_the_seed_task_and_attempt_and_are_recorded() -> None:
    config = FaultConfig(tool_hang=0.5, seed=7)
    first, again = FaultInjector(config), FaultInjector(config)
    draws = [
        [f.draw("tool_hang") for _ in range(20)]
        for f in (first.for_trial("t"), again.for_trial("t"))
    ]  # type: ignore[union-attr]
    assert draws[0] == draws[1] and 3 < sum(draws[0]) < 17
    second_attempt = first.for_trial("t")
    assert second_attempt is not None
    assert [second_attempt.draw("tool_hang") for _ in range(20)] != draws[0]
    assert FaultInjector(FaultConfig()).for_trial("t") is None
    faults = TrialFaults(FaultConfig(engine_error=1.0), "k")
    assert faults.injected("engine_error", "agent", send=3)
    assert not faults.injected("tool_hang", "agent")
    assert faults.events[0]["fault"] == "engine_error" and faults.events[0]["send"] == 3
    assert faults.events[0]["cause"] == "infrastructure"


def test_a_full_disk_is_raised_once_per_trial(tmp_path: Path) -> None:
    faults = TrialFaults(FaultConfig(disk_full=1.0), "k")
    with pytest.raises(OSError) as caught:
        faults.check_disk(tmp_path)
    assert caught.value.errno == errno.ENOSPC
    faults.check_disk(tmp_path)  # once only
    assert [e["fault"] for e in faults.events] == ["disk_full"]


def test_requests_without_an_answer_are_sent_again_and_listed() -> None:
    engine = Script(
        EngineHTTPError(502, "HTTP 502"),
        BureauSystemError(SystemErrorKind.engine_timeout, "no answer"),
        None,
        BureauSystemError(SystemErrorKind.engine_unavailable, "refused"),
    )
    sampler = RetryingSampler(engine, retries=2, backoff_s=0)
    assert asyncio.run(sampler.complete([1], PARAMS)) is DONE
    assert asyncio.run(sampler.complete([1], PARAMS)) is DONE
    assert engine.calls == 5
    assert [(e["request"], e["send"], e["kind"]) for e in sampler.events] == [
        (0, 0, "engine_error"),
        (0, 1, "engine_timeout"),
        (1, 3, "engine_unavailable"),
    ]


def test_a_client_error_or_a_malformed_answer_is_not_sent_again() -> None:
    assert not worth_resending(EngineHTTPError(400, "prompt too long"))
    assert not worth_resending(BureauSystemError(SystemErrorKind.engine_error, "malformed"))
    assert worth_resending(EngineHTTPError(500, "boom"))
    engine = Script(EngineHTTPError(400, "HTTP 400: prompt too long"))
    with pytest.raises(EngineHTTPError):
        asyncio.run(RetryingSampler(engine, retries=3, backoff_s=0).complete([1], PARAMS))
    assert engine.calls == 1


def test_resends_are_bounded() -> None:
    engine = Script(*[EngineHTTPError(500, "HTTP 500")] * 5)
    sampler = RetryingSampler(engine, retries=2, backoff_s=0)
    with pytest.raises(EngineHTTPError):
        asyncio.run(sampler.complete([1], PARAMS))
    assert engine.calls == 3 and len(sampler.events) == 2


def test_injected_engine_faults_go_through_the_resends() -> None:
    faults = TrialFaults(FaultConfig(engine_error=1.0), "k")
    faulty = FaultySampler(Script(), faults)
    sampler = RetryingSampler(faulty, retries=1, backoff_s=0)
    with pytest.raises(EngineHTTPError):
        asyncio.run(sampler.complete([1], PARAMS))
    assert [e["send"] for e in faults.events] == [0, 1]
    assert [e["send"] for e in sampler.events] == [0]
    stalled = TrialFaults(FaultConfig(engine_stall=1.0, engine_stall_s=0), "k")
    with pytest.raises(BureauSystemError) as caught:
        asyncio.run(FaultySampler(Script(), stalled).complete([1], PARAMS))
    assert caught.value.kind == SystemErrorKind.engine_timeout


def test_a_bad_faults_flag_is_a_usage_error_naming_the_switch(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", "preeval", str(tmp_path), "--model",
         str(tmp_path), "--faults", "tool_hung=0.1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown switch 'tool_hung'" in done.stdout + done.stderr
