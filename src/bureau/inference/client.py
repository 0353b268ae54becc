"""The client side of the engine API: `/v1/completions` with token-id prompts.

Request (the subset both engines accept)::

    {"model": M, "prompt": [ids...], "max_tokens": N, "temperature": t, "top_p": p,
     "stop_token_ids": [...], "logprobs": 1, "return_token_ids": true,
     "return_tokens_as_token_ids": true, "skip_special_tokens": false, "seed": s}

Response: `choices[0].token_ids` (the sampled ids), `choices[0].logprobs.token_logprobs` (one
logprob per sampled id, under the raw model distribution), `choices[0].finish_reason`
(`stop` | `length` | `abort`). The built-in engine adds `weight_version` (top level) and
`choices[0].weight_versions` (one per sampled id). vLLM reports neither; the client then labels
the tokens with the version it last set on that engine (`known_version`), which is exact unless
an update lands mid-request, when the older version is kept (staleness is over-, never
under-estimated).

Every failure raises `BureauSystemError`: `engine_timeout` when the engine gave no answer in
time, `engine_unavailable` when it cannot be reached, `engine_error` for an HTTP error or a
malformed answer (`EngineHTTPError`, with the status, for an HTTP error). Nothing is retried
here; `bureau.inference.retrying` resends the requests that failed without an answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import httpx

from bureau.errors import BureauSystemError, SystemErrorKind

Kind = SystemErrorKind
KEEPALIVE_EXPIRY_S = 2.0
"""An idle connection is dropped by the client before any server drops it (uvicorn's and vLLM's
keep-alive is 5 s, httpx's default expiry too): with equal timeouts a request could go out on
a connection the server was closing, and fail with a ReadError that is no engine's fault."""


class EngineHTTPError(BureauSystemError):
    """The engine answered with an HTTP error status (not 200, not 503)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(Kind.engine_error, message)
        self.status = status


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False
    """Sample on past the model's end-of-sequence ids (vLLM's and the built-in engine's
    `ignore_eos`): a fixed length, for tests and benchmarks."""

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be at least 0, not {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p}")


@dataclass
class Completion:
    """One sample: the ids the engine drew, with their logprobs and weight versions."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    weight_versions: list[int]
    engine: str = ""
    latency_s: float = 0.0
    prompt_token_ids: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        if len(self.logprobs) != n or len(self.weight_versions) != n:
            raise ValueError(
                f"{n} token ids but {len(self.logprobs)} logprobs and "
                f"{len(self.weight_versions)} weight versions"
            )


class Sampler(Protocol):
    """What the harness needs from an engine, a router or a scripted fake."""

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion: ...


def parse_completion(
    body: dict[str, Any], *, engine: str, default_version: int, latency_s: float = 0.0
) -> Completion:
    """Read one choice of a `/v1/completions` answer; raise `engine_error` if it is malformed."""
    try:
        choice = body["choices"][0]
        ids = [int(t) for t in choice["token_ids"]]
        lp = choice.get("logprobs") or {}
        logprobs = [float(x) for x in lp.get("token_logprobs") or []]
        if len(logprobs) != len(ids):
            raise ValueError(f"{len(ids)} token ids but {len(logprobs)} logprobs")
        versions_raw = choice.get("weight_versions")
        if versions_raw is None:
            version = body.get("weight_version", default_version)
            versions = [_version(version, default_version)] * len(ids)
        else:
            versions = [int(v) for v in versions_raw]
        prompt_ids = choice.get("prompt_token_ids")
        return Completion(
            token_ids=ids,
            logprobs=logprobs,
            finish_reason=str(choice.get("finish_reason") or "stop"),
            weight_versions=versions,
            engine=engine,
            latency_s=latency_s,
            prompt_token_ids=[int(t) for t in prompt_ids] if prompt_ids is not None else None,
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise BureauSystemError(
            Kind.engine_error, f"{engine}: malformed completion ({exc}): {str(body)[:300]}"
        ) from exc


def _version(value: object, default: int) -> int:
    """vLLM versions are free strings (`step-12`); bureau's are integers. Take the digits."""
    if isinstance(value, int):
        return value
    digits = "".join(ch for ch in str(value) if ch.isdigit())
    return int(digits) if digits else default


class EngineEndpoint:
    """An HTTP endpoint of one engine, with failures mapped to engine system errors.

    A timeout is `engine_timeout`; a connection failure or a 503 (the engine is not serving) is
    `engine_unavailable`; any other non-200 answer, or one that is not JSON, is `engine_error`.
    Shared by the sampling client and the engines' control clients.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        max_connections: int = 16,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            ),
        )

    async def health(self) -> bool:
        try:
            response = await self._http.get("/health", timeout=5.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def weight_version(self) -> int | None:
        """The version `/weight_info` reports (vLLM's are strings: their digits are kept), or
        None before one was set. An engine without the route raises `EngineHTTPError` (404)."""
        value = (await self._request("GET", "/weight_info")).get("weight_version")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        digits = "".join(ch for ch in str(value or "") if ch.isdigit())
        return int(digits) if digits else None

    async def _request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None = None,
        *,
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        where = f"{self.base_url}{path}"
        try:
            response = await self._http.request(method, path, json=payload, params=params)
        except httpx.TimeoutException as exc:
            raise BureauSystemError(
                Kind.engine_timeout, f"{where}: no answer in {self.timeout_s} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise BureauSystemError(
                Kind.engine_unavailable, f"{where}: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code == 503:
            raise BureauSystemError(Kind.engine_unavailable, f"{where}: {response.text[:500]}")
        if response.status_code != 200:
            raise EngineHTTPError(
                response.status_code,
                f"{where}: HTTP {response.status_code}: {response.text[:500]}",
            )
        if not response.content:
            return {}
        try:
            data = response.json()
        except ValueError as exc:
            raise BureauSystemError(
                Kind.engine_error, f"{where}: not JSON: {response.text[:300]}"
            ) from exc
        return data if isinstance(data, dict) else {"data": data}

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class EngineClient(EngineEndpoint):
    """An async sampling client for one engine at `base_url` (e.g. `http://127.0.0.1:8000`).

    `known_version` is the weight version this side last pushed; see the module docstring.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        known_version: int = 0,
    ) -> None:
        super().__init__(
            base_url, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, max_connections=256
        )
        self.model = model
        self.known_version = known_version

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        """Sample one continuation of `prompt_ids` (`session_id` matters only to routers)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "logprobs": 1,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
        }
        if params.stop_token_ids:
            payload["stop_token_ids"] = list(params.stop_token_ids)
        if params.seed is not None:
            payload["seed"] = params.seed
        if params.ignore_eos:
            payload["ignore_eos"] = True
        version = self.known_version
        started = time.perf_counter()
        body = await self._request("POST", "/v1/completions", payload)
        return parse_completion(
            body,
            engine=self.base_url,
            default_version=version,
            latency_s=time.perf_counter() - started,
        )
