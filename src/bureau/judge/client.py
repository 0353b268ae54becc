"""The judge client: verdicts from any OpenAI-compatible `/v1/chat/completions` endpoint.

- Several API keys, used in turn (`KeyPool`); a key that gets 429 cools down for its
  Retry-After (seconds or an HTTP date) or, without one, for the backoff; a key refused with
  401/403 is dropped. Keys come from environment variables or a file (`JudgeConfig.key_env`,
  `key_file`), never from a task, and are never logged.
- Requests per minute and tokens per minute per key, counted in sliding 60-second windows; a
  cap on judge calls in flight; a timeout per request.
- Retried with exponential backoff and full jitter: 429, 5xx, timeouts, connection errors and
  bodies that are not the API's JSON. After `max_attempts` such failures, or when no key is
  left, `JudgeUnavailable`: a system error (`judge_unavailable`), masked, never a 0. A 400 or
  404 is a configuration error and fails at once, the same way.
- A reply that is not a valid verdict is asked again `invalid_verdict_retries` times, then
  `VerdictError`, which the grader turns into a failed criterion (see `verdict`).
- Every HTTP call is recorded (`calls`, and one JSON line each in `log_path`): when, latency,
  key index, status, outcome.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.judge.limits import KeyPool, NoKeyLeft
from bureau.judge.verdict import JudgeRequest, Verdict, VerdictError, parse_verdict

RETRYABLE = frozenset(
    {"rate_limited", "server_error", "timeout", "connection", "bad_body", "key_refused"}
)


class JudgeConfig(BaseModel):
    """Where the judge is and how hard to try; the keys themselves are read elsewhere."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="Base URL of the API, e.g. https://api.example.com/v1.")
    model: str = Field(min_length=1)
    key_env: tuple[str, ...] = Field(
        default=("BUREAU_JUDGE_API_KEY",),
        description="Environment variables that hold API keys (one each; unset ones skipped).",
    )
    key_file: Path | None = Field(default=None, description="A file of keys, one per line.")
    timeout_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=8, ge=1, description="Failed HTTP calls before giving up.")
    invalid_verdict_retries: int = Field(default=2, ge=0)
    backoff_base_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    max_wait_s: float = Field(
        default=600.0, gt=0, description="Give up after waiting this long for a key in all."
    )
    rpm_per_key: int | None = Field(default=None, ge=1)
    tpm_per_key: int | None = Field(default=None, ge=1)
    max_concurrency: int = Field(default=8, ge=1)
    max_tokens: int = Field(default=400, ge=16)
    temperature: float = Field(default=0.0, ge=0)
    log_path: Path | None = None

    def share(self, processes: int) -> JudgeConfig:
        """The settings of one of `processes` clients that use the same keys: each gets an equal
        part of every key's RPM and TPM and of the calls in flight (at least one call), so
        together they stay within the limits without talking to each other. A limit smaller
        than `processes` cannot be split: ValueError."""
        if processes < 1:
            raise ValueError(f"processes must be at least 1, not {processes}")
        for name in ("rpm_per_key", "tpm_per_key"):
            limit = getattr(self, name)
            if limit is not None and limit < processes:
                raise ValueError(
                    f"judge {name} = {limit} cannot be split among {processes} workers"
                )
        return self.model_copy(
            update={
                "rpm_per_key": None
                if self.rpm_per_key is None
                else max(1, self.rpm_per_key // processes),
                "tpm_per_key": None
                if self.tpm_per_key is None
                else max(1, self.tpm_per_key // processes),
                "max_concurrency": max(1, self.max_concurrency // processes),
            }
        )


def load_keys(config: JudgeConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """The API keys: each set variable of `key_env`, then each non-empty line of `key_file`."""
    environ = os.environ if environ is None else environ
    keys = [environ[name].strip() for name in config.key_env if environ.get(name, "").strip()]
    if config.key_file is not None:
        lines = config.key_file.read_text(encoding="utf-8").splitlines()
        keys += [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if not keys:
        sources = ", ".join(config.key_env) + (f", {config.key_file}" if config.key_file else "")
        raise ValueError(f"no judge API key: set one of {sources}")
    return keys


class JudgeUnavailable(BureauSystemError):
    def __init__(self, message: str) -> None:
        super().__init__(SystemErrorKind.judge_unavailable, message)


@dataclass(frozen=True)
class CallRecord:
    at: float  # wall-clock time the call started
    latency_s: float
    key_index: int
    status: int | None  # HTTP status, None without a response
    outcome: str  # ok, invalid_verdict, rate_limited, server_error, timeout, ...
    detail: str = ""
    sent: float = 0.0  # the client's clock when it was sent: what the rate windows count


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header in seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


class JudgeClient:
    """Ask the judge; see the module docstring. Use as an async context manager."""

    def __init__(
        self,
        config: JudgeConfig,
        keys: list[str] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.pool = KeyPool(
            keys if keys is not None else load_keys(config),
            config.rpm_per_key,
            config.tpm_per_key,
            clock,
        )
        self.calls: list[CallRecord] = []
        self._clock, self._sleep = clock, sleep
        self._rng = rng or random.Random()
        self._gate = asyncio.Semaphore(config.max_concurrency)
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> JudgeClient:
        self._http = httpx.AsyncClient(base_url=self.config.url.rstrip("/") + "/")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _backoff_s(self, failures: int) -> float:
        ceiling = min(self.config.backoff_max_s, self.config.backoff_base_s * 2 ** (failures - 1))
        return self._rng.uniform(0, ceiling)

    def _log(self, record: CallRecord) -> None:
        self.calls.append(record)
        if self.config.log_path is not None:
            with self.config.log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(asdict(record)) + "\n")

    async def judge(
        self,
        request: JudgeRequest,
        *,
        calls: list[CallRecord] | None = None,
        fault: Callable[[], bool] | None = None,
    ) -> Verdict:
        """The verdict on `request`. Raises JudgeUnavailable or VerdictError. Each call is
        also appended to `calls`, when given (one trial's share of the log); `fault`, when it
        returns True for a call, makes that call an injected HTTP 500 (drills)."""
        messages = request.messages()
        tokens = sum(len(m["content"]) for m in messages) // 3 + self.config.max_tokens
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
            "response_format": {"type": "json_object"},
        }
        failures = invalid = 0
        waited = 0.0
        async with self._gate:
            while True:
                try:
                    state, wait = self.pool.acquire(tokens)
                except NoKeyLeft as exc:
                    raise JudgeUnavailable(str(exc)) from None
                except ValueError as exc:
                    raise JudgeUnavailable(str(exc)) from None
                if state is None:
                    waited += wait
                    if waited > self.config.max_wait_s:
                        raise JudgeUnavailable(
                            f"no key free within {self.config.max_wait_s:.0f} s (rate limits)"
                        )
                    await self._sleep(wait)
                    continue
                if fault is not None and fault():
                    at, sent = time.time(), self._clock()
                    record = CallRecord(at, 0.0, state.index, 500, "server_error", "injected", sent)
                    verdict = None
                else:
                    record, verdict = await self._call(state.index, state.key, payload)
                self._log(record)
                if calls is not None:
                    calls.append(record)
                if verdict is not None:
                    return verdict
                if record.outcome == "invalid_verdict":
                    invalid += 1
                    if invalid > self.config.invalid_verdict_retries:
                        raise VerdictError(record.detail)
                    continue
                if record.outcome not in RETRYABLE:
                    raise JudgeUnavailable(f"{record.outcome}: {record.detail}")
                failures += 1
                if failures >= self.config.max_attempts:
                    raise JudgeUnavailable(
                        f"no verdict after {failures} failed calls (last: {record.outcome}, "
                        f"{record.detail})"
                    )
                if record.outcome == "key_refused":
                    self.pool.refuse(state)
                elif record.outcome == "rate_limited":
                    pause = retry_after_s(record.detail) or self._backoff_s(failures)
                    self.pool.cool_down(state, pause)
                else:
                    pause = self._backoff_s(failures)
                    waited += pause
                    await self._sleep(pause)

    async def _call(
        self, key_index: int, key: str, payload: dict[str, Any]
    ) -> tuple[CallRecord, Verdict | None]:
        assert self._http is not None, "use JudgeClient as an async context manager"
        at, sent, started = time.time(), self._clock(), time.perf_counter()

        def record(outcome: str, status: int | None = None, detail: str = "") -> CallRecord:
            latency = round(time.perf_counter() - started, 4)
            return CallRecord(at, latency, key_index, status, outcome, detail[:300], sent)

        try:
            response = await self._http.post(
                "chat/completions",
                json=payload,
                headers={"Authorization": f"Bearer {key}"},
                timeout=self.config.timeout_s,
            )
        except httpx.TimeoutException as exc:
            return record("timeout", detail=type(exc).__name__), None
        except httpx.TransportError as exc:
            return record("connection", detail=f"{type(exc).__name__}: {exc}"), None
        status = response.status_code
        if status == 429:
            return record("rate_limited", status, response.headers.get("retry-after", "")), None
        if status in (401, 403):
            return record("key_refused", status), None
        if status >= 500:
            return record("server_error", status, response.text[:200]), None
        if status != 200:
            return record("bad_request", status, response.text[:200]), None
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return record("bad_body", status, f"{type(exc).__name__}: {response.text[:120]}"), None
        try:
            verdict = parse_verdict(content if isinstance(content, str) else None)
        except VerdictError as exc:
            return record("invalid_verdict", status, str(exc)), None
        return record("ok", status), verdict
