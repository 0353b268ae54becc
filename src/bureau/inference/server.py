"""The built-in engine over HTTP (`bureau serve`).

The app speaks the subset of vLLM's OpenAI-compatible API that `EngineClient` uses, in vLLM's
shape, so the harness cannot tell the engines apart:

- `POST /v1/completions`: `prompt` is a list of token ids or a batch of such lists (one choice
  each); text prompts are refused with 400. Each choice carries `token_ids`, `prompt_token_ids`,
  `logprobs.token_logprobs` (raw-model logprobs of the sampled ids), `logprobs.tokens`
  (`"token_id:N"`), `finish_reason` (`stop` | `length` | `abort`), and, beyond vLLM,
  `weight_versions` (one per sampled id); the body adds `weight_version`, the engine's version
  when the answer was written.
- `POST /v1/chat/completions`: OpenAI's chat shape (messages rendered with the checkpoint's
  chat template, the reply decoded to text), for clients such as the LLM judge.
- `GET /health` (200 while serving, 503 after a crash), `GET /v1/models`.
- `POST /pause?mode=abort|keep|wait` (vLLM's default, `abort`), `POST /resume`,
  `GET /is_paused`, `POST /update_weights` with `{"weights_path": DIR, "version": N}`,
  `GET /weight_info`.

Bad requests get 400 with an OpenAI-style error body naming the field; a bad weights folder
gets 400 and the engine keeps serving the old weights. `bureau.inference.control.EngineControl`
drives the control endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, SamplingParams
from bureau.inference.control import PAUSE_MODES
from bureau.inference.engine import EngineConfig, InferenceEngine

Kind = SystemErrorKind
Handler = Callable[[Request], Awaitable[Response]]


class _NoStreaming(BaseModel):
    """Both sampling endpoints answer in one piece."""

    stream: bool = False
    """Not supported."""

    @field_validator("stream")
    @classmethod
    def _no_stream(cls, value: bool) -> bool:
        if value:
            raise ValueError("streaming is not supported")
        return value


class CompletionRequest(_NoStreaming):
    """The `/v1/completions` fields the engine honours; other vLLM flags are ignored."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    prompt: list[list[int]]
    """Token ids, or a batch of token-id lists (normalized to a batch)."""
    model: str | None = None
    """Must be the served model name when given."""
    max_tokens: int = Field(default=16, ge=1)
    """Most tokens to sample."""
    temperature: float = Field(default=1.0, ge=0)
    """0 samples greedily."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    """Nucleus mass."""
    stop_token_ids: list[int] | None = None
    """Ids that end a sample (kept in the output), on top of the model's EOS ids."""
    ignore_eos: bool = False
    """Do not stop at the model's EOS ids."""
    seed: int | None = None
    """Per-request seed."""
    logprobs: int | None = Field(default=None, ge=0, le=1)
    """Return the sampled ids' logprobs (no alternatives are served, so at most 1)."""
    skip_special_tokens: bool = True
    """For `text` only."""
    n: int = Field(default=1, ge=1, le=1)
    """One sample per prompt."""

    @field_validator("prompt", mode="before")
    @classmethod
    def _token_ids(cls, value: Any) -> list[list[int]]:
        def is_id(x: Any) -> bool:
            return isinstance(x, int) and not isinstance(x, bool)

        text = isinstance(value, str) or (
            isinstance(value, list) and any(isinstance(x, str) for x in value)
        )
        if text:
            raise ValueError(
                "text prompts are not supported: send token ids (a list of ints, or a list of "
                "such lists), tokenized on the client"
            )
        if not isinstance(value, list) or not value:
            raise ValueError("must be a non-empty list of token ids")
        if all(is_id(x) for x in value):
            return [value]
        if all(isinstance(x, list) and x and all(is_id(t) for t in x) for x in value):
            return value
        raise ValueError("must be a list of token ids (ints) or a list of non-empty such lists")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str
    content: str


class ChatRequest(_NoStreaming):
    """The `/v1/chat/completions` fields the engine honours (for the LLM judge and the like);
    `response_format` and other OpenAI fields are accepted and ignored: nothing constrains
    the sampling."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    messages: list[ChatMessage] = Field(min_length=1)
    """The conversation, rendered with the checkpoint's chat template."""
    model: str | None = None
    max_tokens: int = Field(default=256, ge=1)
    temperature: float = Field(default=1.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int | None = None


class UpdateWeightsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    weights_path: str
    """A folder of *.safetensors files with every tensor of the model."""
    version: int = Field(ge=0)
    """The weight version the tokens drawn from now on carry."""


def create_app(engine: InferenceEngine) -> Starlette:
    """The HTTP app over a started engine (the caller owns the engine's lifecycle)."""
    name = engine.config.served_model_name

    async def health(request: Request) -> Response:
        if engine.healthy:
            return JSONResponse({"status": "ok", "weight_version": engine.weight_version})
        return JSONResponse({"status": "unhealthy", "error": engine.error}, status_code=503)

    async def models(request: Request) -> Response:
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "bureau",
            "root": engine.source or name,
            "max_model_len": engine.config.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [card]})

    def unknown_model(model: str | None) -> Response | None:
        if model is None or model == name:
            return None
        message = f"The model `{model}` does not exist (this engine serves `{name}`)."
        return _error(404, message, "model")

    async def completions(request: Request) -> Response:
        body = CompletionRequest.model_validate(await _json_body(request))
        if (wrong := unknown_model(body.model)) is not None:
            return wrong
        params = SamplingParams(
            max_tokens=body.max_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            stop_token_ids=tuple(body.stop_token_ids or ()),
            seed=body.seed,
        )
        for prompt in body.prompt:
            try:
                engine.check_prompt(prompt, params)
            except ValueError as exc:
                raise _BadRequest(str(exc), "prompt") from exc
        futures = []
        try:
            for prompt in body.prompt:
                futures.append(engine.submit(prompt, params, ignore_eos=body.ignore_eos))
            results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        except BaseException:
            for future in futures:
                engine.cancel(future.request_id)
            raise
        return JSONResponse(_completion_body(engine, body, list(results)))

    async def chat(request: Request) -> Response:
        body = ChatRequest.model_validate(await _json_body(request))
        if (wrong := unknown_model(body.model)) is not None:
            return wrong
        tokenizer = engine.tokenizer
        if tokenizer is None:
            return _error(400, "this engine has no tokenizer to render messages", "messages")
        messages = [m.model_dump() for m in body.messages]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt = list(tokenizer.encode(str(text), add_special_tokens=False))
        params = SamplingParams(
            max_tokens=body.max_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            seed=body.seed,
        )
        try:
            engine.check_prompt(prompt, params)
        except ValueError as exc:
            raise _BadRequest(str(exc), "messages") from exc
        future = engine.submit(prompt, params)
        try:
            result = await asyncio.wrap_future(future)
        except BaseException:
            engine.cancel(future.request_id)
            raise
        text = _decode(engine, result.token_ids, True)
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": result.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(result.token_ids),
                    "total_tokens": len(prompt) + len(result.token_ids),
                },
            }
        )

    async def pause(request: Request) -> Response:
        mode = request.query_params.get("mode", "abort")
        if mode not in PAUSE_MODES:
            return _error(
                400, f"mode must be one of {', '.join(PAUSE_MODES)}, not {mode!r}", "mode"
            )
        timeout = request.query_params.get("timeout")
        timeout_s = float(timeout) if timeout else None
        aborted = await run_in_threadpool(engine.pause, mode, timeout_s=timeout_s)
        return JSONResponse({"paused": True, "mode": mode, "aborted": aborted})

    async def resume(request: Request) -> Response:
        await run_in_threadpool(engine.resume)
        return JSONResponse({"paused": False})

    async def is_paused(request: Request) -> Response:
        return JSONResponse({"is_paused": engine.is_paused})

    async def update_weights(request: Request) -> Response:
        body = UpdateWeightsRequest.model_validate(await _json_body(request))
        started = time.perf_counter()
        try:
            await run_in_threadpool(engine.update_weights, Path(body.weights_path), body.version)
        except (ValueError, FileNotFoundError) as exc:
            raise _BadRequest(str(exc), "weights_path") from exc
        return JSONResponse(
            {
                "weight_version": engine.weight_version,
                "seconds": round(time.perf_counter() - started, 4),
            }
        )

    async def weight_info(request: Request) -> Response:
        return JSONResponse(
            {
                "weight_version": engine.weight_version,
                "weights": engine.source,
                "is_paused": engine.is_paused,
            }
        )

    routes = [
        Route("/health", _guarded(health), methods=["GET"]),
        Route("/v1/models", _guarded(models), methods=["GET"]),
        Route("/v1/completions", _guarded(completions), methods=["POST"]),
        Route("/v1/chat/completions", _guarded(chat), methods=["POST"]),
        Route("/pause", _guarded(pause), methods=["POST"]),
        Route("/resume", _guarded(resume), methods=["POST"]),
        Route("/is_paused", _guarded(is_paused), methods=["GET"]),
        Route("/update_weights", _guarded(update_weights), methods=["POST"]),
        Route("/weight_info", _guarded(weight_info), methods=["GET"]),
    ]
    return Starlette(routes=routes)


def _completion_body(
    engine: InferenceEngine, body: CompletionRequest, results: list[Completion]
) -> dict[str, Any]:
    choices = []
    for index, (prompt, result) in enumerate(zip(body.prompt, results, strict=True)):
        ids = result.token_ids
        logprobs = None
        if body.logprobs is not None:
            logprobs = {
                "tokens": [f"token_id:{t}" for t in ids],
                "token_logprobs": result.logprobs,
                "top_logprobs": None,
                "text_offset": [],
            }
        stop_reason = ids[-1] if result.finish_reason == "stop" and ids else None
        choices.append(
            {
                "index": index,
                "text": _decode(engine, ids, body.skip_special_tokens),
                "token_ids": ids,
                "prompt_token_ids": prompt,
                "logprobs": logprobs,
                "finish_reason": result.finish_reason,
                "stop_reason": stop_reason,
                "weight_versions": result.weight_versions,
            }
        )
    prompt_tokens = sum(len(p) for p in body.prompt)
    completion_tokens = sum(len(r.token_ids) for r in results)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": engine.config.served_model_name,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "weight_version": engine.weight_version,
    }


def _decode(engine: InferenceEngine, ids: list[int], skip_special_tokens: bool) -> str:
    if engine.tokenizer is None or not ids:
        return ""
    return str(engine.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens))


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw) if raw else {}
    except ValueError as exc:
        raise _BadRequest(f"the body is not valid JSON: {exc}") from exc


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _error(status: int, message: str, param: str | None = None) -> JSONResponse:
    kind = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}
    body = {
        "error": {
            "message": message,
            "type": kind.get(status, "InternalServerError"),
            "param": param,
            "code": status,
        }
    }
    return JSONResponse(body, status_code=status)


def _guarded(handler: Handler) -> Handler:
    """Turn the errors a handler may raise into JSON error answers."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                where = ".".join(str(part) for part in err["loc"]) or "body"
                message = str(err["msg"]).removeprefix("Value error, ")
                problems.append(f"{where}: {message}")
            first = ".".join(str(p) for p in exc.errors()[0]["loc"]) if exc.errors() else None
            return _error(400, "; ".join(problems), first)
        except _BadRequest as exc:
            return _error(400, str(exc), exc.param)
        except (ValueError, FileNotFoundError) as exc:
            return _error(400, str(exc))
        except BureauSystemError as exc:
            status = 503 if exc.kind is Kind.engine_unavailable else 500
            return _error(status, str(exc))

    return run


class _Uvicorn(uvicorn.Server):
    """uvicorn on a socket bound up front (so port 0 works), calling `on_ready` once listening."""

    def __init__(
        self,
        app: Starlette,
        host: str,
        port: int,
        log_level: str,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.host, self.port = host, int(self.socket.getsockname()[1])
        self.on_ready = on_ready
        super().__init__(
            uvicorn.Config(
                app,
                log_level=log_level,
                lifespan="off",
                timeout_graceful_shutdown=5,
                timeout_keep_alive=60,  # well past the client's keep-alive expiry
            )
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.on_ready is not None:
            self.on_ready()

    def serve_forever(self) -> None:
        self.run(sockets=[self.socket])


class ServerThread:
    """The app served by uvicorn on a background thread: for tests, benches and in-process use.

    `port=0` takes a free port; `url` is known once constructed. `stop()` is idempotent.
    """

    def __init__(self, engine: InferenceEngine, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._uvicorn = _Uvicorn(create_app(engine), host, port, log_level="warning")
        self._thread = threading.Thread(
            target=self._uvicorn.serve_forever, name="bureau-engine-http", daemon=True
        )
        self.url = self._uvicorn.url

    def start(self, timeout_s: float = 30.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise BureauSystemError(Kind.engine_unavailable, f"{self.url} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        with contextlib.suppress(OSError):
            self._uvicorn.socket.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_server(
    checkpoint: Path,
    config: EngineConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    announce: Callable[[str], None] = print,
) -> None:
    """`bureau serve`: load, start the engine, serve until interrupted, then stop it."""
    engine = InferenceEngine.from_checkpoint(checkpoint, config).start()
    try:
        server = _Uvicorn(create_app(engine), host, port, log_level)
        server.on_ready = lambda: announce(
            f"bureau serve: {config.served_model_name} at {server.url} "
            f"(weights version {engine.weight_version}; POST {server.url}/v1/completions)"
        )
        server.serve_forever()
    finally:
        engine.stop()
