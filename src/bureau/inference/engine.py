"""The built-in inference engine: transformers' continuous batching, with sampler logprobs.

`InferenceEngine` serves a Hugging Face causal LM on transformers' `ContinuousBatchingManager`,
which owns the hard parts: a paged KV cache, continuous batching of prefill and decode in one
step, chunked prefill, prefix caching, offloading when the cache is full, and its own generation
thread. The engine keeps what the library does per request: the prompt, `max_new_tokens`, and
the stop ids (its `eos_token_id`, under which a stop id that ends a sample stays in the output
with its logprob). It adds three things the library cannot do:

- **Sampling.** CB has one global `do_sample` and one seed; per-request temperature and top-p
  exist only as logits processors fixed when the manager is built; and its logprobs are
  `log(softmax(processed scores))`, i.e. of the tempered, truncated distribution. The engine
  therefore replaces the model runner's sampling step (`ModelRunner._sample`) with
  `_BatchSampler`, which draws each row (`bureau.inference.sampling.draw`) with its own
  request's temperature (0 = greedy), top-p and seed (a `torch.Generator` per seeded
  request), and returns the logprob of the drawn id under softmax(fp32 logits / temperature):
  the distribution it was drawn from before top-p (vLLM's `processed_logprobs` with top-p 1),
  the one a trainer's forward pass at the same temperature computes; greedy rows (and
  temperature 1) get the raw model's.
  Everything in `SamplingParams` is per request.
- **Weight versions.** The sampler labels every drawn token with the version in force.
- **Pause and in-place weight updates.** CB's `pause()` parks its loop between steps with the
  cache and the requests intact; a helper thread holds it from `pause()` to `resume()`, so no
  step runs in between. While parked, `update_weights` copies the new tensors into the model,
  turns every in-flight request back into a pending one whose prompt is its prompt plus the
  tokens drawn so far (the library's own soft reset), and empties the cache, prefix cache
  included: KV computed by the old weights would give wrong logprobs. So `keep` requests are
  re-prefilled on the new weights and continue; their earlier tokens keep the old version.
  `abort` ends in-flight requests with what they have (finish_reason `abort`); `wait` lets them
  finish on the old weights before parking. Requests that arrive while paused wait for resume.

The touchpoints inside the library (`ModelRunner._sample`, the IO's `requests_in_batch`, the
scheduler's request tables, `PagedAttentionCache.reset`, `RequestState`'s soft reset) are private
API, checked when the engine starts; they were read in transformers 5.24. A crash of the
generation thread fails every waiting request with `engine_error`; the engine then reports
itself unhealthy and refuses new requests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from bureau.config import StrictModel
from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, SamplingParams
from bureau.inference.control import PAUSE_MODES, PauseMode
from bureau.inference.sampling import draw, sampled_logprobs
from bureau.inference.weights import WeightPlan

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Kind = SystemErrorKind
DType = Literal["float32", "bfloat16", "float16", "auto"]


class EngineConfig(StrictModel):
    """How the built-in engine batches, caches and samples."""

    served_model_name: str = "bureau"
    """The model name clients send and `/v1/models` lists."""
    dtype: DType = "float32"
    """Weights and activations dtype; `auto` keeps the checkpoint's."""
    max_batch: int = Field(default=64, ge=1)
    """Most sequences in one forward step."""
    max_batch_tokens: int = Field(default=512, ge=16)
    """Most tokens in one forward step; longer prompts are prefilled in chunks."""
    max_model_len: int = Field(default=4096, ge=2)
    """Most tokens of one sequence, prompt plus completion."""
    cache_tokens: int = Field(default=32768, ge=2)
    """KV cache capacity in tokens, over all sequences; at least `max_model_len`."""
    page_size: int = Field(default=256, ge=4)
    """Tokens per cache page; prefix caching shares whole pages."""
    prefix_cache: bool = True
    """Reuse the KV of prompt prefixes already computed (emptied on every weight update)."""
    seed: int | None = None
    """Seed of the generator used by requests without their own seed; random when unset."""
    device: str = "cpu"
    """Where the model runs: `cpu`, `cuda`, `cuda:N`, or `auto` (cuda when torch sees one).
    Weights pushed to the engine are copied straight into the model on this device."""

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        if value in ("cpu", "cuda", "auto") or re.fullmatch(r"cuda:\d+", value):
            return value
        raise ValueError(f"device must be cpu, cuda, cuda:N or auto, not {value!r}")


def resolve_device(device: str) -> str:
    """`EngineConfig.device` as a torch device name; `ValueError` when CUDA is asked for and
    torch has none (a CPU build of torch, or no visible GPU)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"the engine was asked to run on {device}, but torch {torch.__version__} sees no "
                "CUDA device (a CPU build, or CUDA_VISIBLE_DEVICES is empty); set device = 'cpu'"
            )
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"{device}: torch sees {torch.cuda.device_count()} CUDA devices")
    return device


class RequestFuture(Future[Completion]):
    """The pending result of one request; `request_id` names it for `cancel`."""

    def __init__(self, request_id: str) -> None:
        super().__init__()
        self.request_id = request_id


@dataclass
class _Request:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    stop_ids: frozenset[int]
    future: RequestFuture
    generator: torch.Generator | None
    versions: list[int] = field(default_factory=list)
    sent: bool = False
    started: float = field(default_factory=time.perf_counter)


class _Parked:
    """Holds transformers' pause from its own thread (the library counts pauses per thread)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._entered = threading.Event()
        self._release = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._hold, name="bureau-engine-pause", daemon=True)

    def _hold(self) -> None:
        try:
            with self._manager.pause():
                self._entered.set()
                self._release.wait()
        except BaseException as exc:  # reported to the thread that asked for the pause
            self._error = exc
            self._entered.set()

    def enter(self) -> None:
        self._thread.start()
        self._entered.wait()
        if self._error is not None:
            self._thread.join()
            raise BureauSystemError(Kind.engine_error, f"could not pause the engine: {self._error}")

    def leave(self) -> None:
        self._release.set()
        self._thread.join()


class _SuppressPsutilNotice(logging.Filter):
    """CB logs an ERROR on CPU without psutil although it sizes the cache from our config."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "psutil" not in record.getMessage()


class InferenceEngine:
    """Continuous-batching generation on one loaded model; see the module docstring.

    Thread-safe: `submit` may be called from any thread, `complete` from any event loop.
    `start()` before use, `stop()` (idempotent) after; also a context manager.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase | None = None,
        config: EngineConfig | None = None,
        *,
        source: str = "",
    ) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.config = config or EngineConfig()
        self.source = source
        if self.config.max_model_len > self.config.cache_tokens:
            raise ValueError(
                f"max_model_len ({self.config.max_model_len}) exceeds cache_tokens "
                f"({self.config.cache_tokens}): one sequence must fit in the cache"
            )
        text_config = model.config.get_text_config()
        self.vocab_size = int(text_config.vocab_size)
        self.eos_ids = _eos_ids(model)
        self._lock = threading.RLock()  # the request table, held requests and the pause state
        self._control = threading.Lock()  # one pause / resume / update / stop at a time
        self._dispatch = threading.Lock()  # taking results off CB's queue and delivering them
        self._idle = threading.Condition(self._lock)
        self._requests: dict[str, _Request] = {}
        self._held: list[_Request] = []
        self._ids = itertools.count()
        self._version = 0
        self._paused = False
        self._parked: _Parked | None = None
        # transformers' ContinuousBatchingManager and its batch processor (types it does not export)
        self._manager: Any = None
        self._processor: Any = None
        self._collector: threading.Thread | None = None
        self._stopped = threading.Event()
        self._error: str | None = None  # the generation thread died
        self._weights_error: str | None = None  # a weight load failed midway
        seed = self.config.seed if self.config.seed is not None else random.randrange(2**62)
        self._rng = torch.Generator().manual_seed(seed)

    @classmethod
    def from_checkpoint(cls, path: Path, config: EngineConfig | None = None) -> InferenceEngine:
        """Load a local Hugging Face checkpoint folder (not started)."""
        import torch

        from bureau.models.checkpoint import load_checkpoint

        config = config or EngineConfig()
        device = resolve_device(config.device)
        model, tokenizer = load_checkpoint(Path(path), dtype=_torch_dtype(config.dtype))
        torch.nn.Module.to(model, device)
        return cls(model, tokenizer, config, source=str(path))

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> InferenceEngine:
        from transformers import ContinuousBatchingConfig, GenerationConfig

        if self._manager is not None:
            raise RuntimeError("the engine was already started")
        cfg = self.config
        cb_config = ContinuousBatchingConfig(
            return_logprobs=True,
            page_size=cfg.page_size,
            num_blocks=-(-cfg.cache_tokens // cfg.page_size),
            max_batch_tokens=cfg.max_batch_tokens,
            max_requests_per_batch=cfg.max_batch,
            allow_block_sharing=cfg.prefix_cache,
            # The sampler reads the batch it samples for: the synchronous loop, no graphs.
            use_async_batching=False,
            use_cuda_graph=False,
            default_compile_level=0,
            # Keep the model's attention kernel, the one the trainer's forward pass uses.
            auto_switch_to_flash=False,
        )
        generation_config = GenerationConfig(do_sample=False, eos_token_id=list(self.eos_ids))
        cb_logger = logging.getLogger("ContinuousBatchingLogger")
        quiet = _SuppressPsutilNotice()
        cb_logger.addFilter(quiet)
        try:
            # A generation mixin method, which the `PreTrainedModel` annotation does not show.
            causal_lm: Any = self.model
            manager = causal_lm.init_continuous_batching(
                generation_config=generation_config, continuous_batching_config=cb_config
            )
            manager.warmup()  # builds the batch processor now, so the sampler can be installed
        finally:
            cb_logger.removeFilter(quiet)
        processor = manager.batch_processor
        _check_internals(processor)
        processor.model_runner._sample = _BatchSampler(self, processor.inputs_and_outputs)
        self._manager, self._processor = manager, processor
        manager.start()
        self._collector = threading.Thread(
            target=self._collect, name="bureau-engine-results", daemon=True
        )
        self._collector.start()
        return self

    def stop(self) -> None:
        """Stop generating; requests still waiting fail with `engine_unavailable`."""
        with self._control:
            if self._manager is None or self._stopped.is_set():
                return
            with self._lock:
                self._stopped.set()
                held, self._held = self._held, []
            if self._parked is not None:
                self._parked.leave()
                self._parked = None
            gone = BureauSystemError(Kind.engine_unavailable, "the engine was stopped")
            for request in held:
                self._finish(request, error=gone)
            self._manager.stop(block=True, timeout=30, hard_stop=True)
            if self._collector is not None:
                self._collector.join(timeout=30)
            with self._lock:
                leftovers = list(self._requests.values())
                self._requests.clear()
            for request in leftovers:
                self._finish(request, error=gone)
            self._manager.destroy()

    def __enter__(self) -> InferenceEngine:
        return self.start() if self._manager is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ state

    @property
    def weight_version(self) -> int:
        return self._version

    @property
    def is_paused(self) -> bool:
        return self._paused

    @property
    def error(self) -> str | None:
        """Why the engine cannot serve (crashed, or a weight load failed midway), if it cannot."""
        return self._error or self._weights_error

    @property
    def healthy(self) -> bool:
        manager = self._manager
        return (
            manager is not None
            and not self._stopped.is_set()
            and self._error is None
            and self._weights_error is None
            and manager.is_running()
            and manager.background_thread_status.fatal_error is None
        )

    def progress(self, request_id: str) -> int | None:
        """Tokens drawn so far for a request in flight; None once it is finished or unknown."""
        request = self._requests.get(request_id)
        return None if request is None else len(request.versions)

    @property
    def num_in_flight(self) -> int:
        """Requests submitted and not finished, held ones included."""
        with self._lock:
            return len(self._requests)

    # ------------------------------------------------------------------ requests

    def check_prompt(self, prompt_ids: list[int], params: SamplingParams) -> list[int]:
        """The prompt as ints; `ValueError` naming the problem if the engine cannot serve it."""
        if not prompt_ids:
            raise ValueError("prompt is empty")
        ids = [int(t) for t in prompt_ids]
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt has token ids outside [0, {self.vocab_size}): {bad[:5]}")
        total = len(ids) + params.max_tokens
        if total > self.config.max_model_len:
            raise ValueError(
                f"prompt ({len(ids)} tokens) plus max_tokens ({params.max_tokens}) exceeds "
                f"max_model_len ({self.config.max_model_len})"
            )
        return ids

    def submit(
        self, prompt_ids: list[int], params: SamplingParams, *, ignore_eos: bool = False
    ) -> RequestFuture:
        """Queue one sample of a continuation of `prompt_ids`.

        Stops at any of `params.stop_token_ids` and, unless `ignore_eos` (or
        `params.ignore_eos`), the model's EOS ids.
        Raises `ValueError` for a prompt the engine cannot serve, `BureauSystemError`
        (`engine_unavailable`) when the engine is not serving.
        """
        import torch

        ids = self.check_prompt(prompt_ids, params)
        ignore_eos = ignore_eos or params.ignore_eos
        stop_ids = set(params.stop_token_ids) | (set() if ignore_eos else set(self.eos_ids))
        generator = None
        if params.seed is not None:
            generator = torch.Generator().manual_seed(params.seed)
        request_id = f"bureau-{next(self._ids)}"
        request = _Request(
            request_id=request_id,
            prompt_ids=ids,
            params=params,
            stop_ids=frozenset(stop_ids),
            future=RequestFuture(request_id),
            generator=generator,
        )
        with self._lock:
            self._raise_unless_serving()
            self._requests[request_id] = request
            if self._paused:
                self._held.append(request)
            else:
                self._send(request)
        return request.future

    def cancel(self, request_id: str) -> None:
        """Drop a request; its future is cancelled. Unknown or finished ids are ignored."""
        with self._lock:
            request = self._requests.pop(request_id, None)
            if request is None:
                return
            if request in self._held:
                self._held.remove(request)
            elif request.sent and self._manager is not None:
                self._manager.cancel_request(request_id)
            self._idle.notify_all()
        request.future.cancel()

    def generate(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        *,
        ignore_eos: bool = False,
        timeout_s: float | None = None,
    ) -> Completion:
        """`submit` and wait; `engine_timeout` (and the request is cancelled) after `timeout_s`."""
        future = self.submit(prompt_ids, params, ignore_eos=ignore_eos)
        try:
            return future.result(timeout=timeout_s)
        except TimeoutError as exc:
            self.cancel(future.request_id)
            raise BureauSystemError(Kind.engine_timeout, f"no completion in {timeout_s} s") from exc

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        """The `Sampler` protocol, in process (`session_id` matters only to routers)."""
        future = self.submit(prompt_ids, params)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.cancel(future.request_id)
            raise

    # ------------------------------------------------------------------ pause and weights

    def pause(self, mode: PauseMode = "keep", *, timeout_s: float | None = None) -> int:
        """Stop scheduling until `resume()`; returns how many requests `abort` ended.

        `keep`: in-flight requests freeze and continue after resume (re-prefilled if the weights
        changed). `abort`: they end now with what they have, finish_reason `abort`. `wait`: they
        finish first, on the current weights (`engine_timeout` after `timeout_s`, unpaused).
        Pausing a paused engine only applies `abort`.
        """
        if mode not in PAUSE_MODES:
            raise ValueError(f"mode must be one of {', '.join(PAUSE_MODES)}, not {mode!r}")
        with self._control:
            self._pause(mode, timeout_s)
            return self._abort_in_flight() if mode == "abort" else 0

    def resume(self) -> None:
        with self._control:
            self._resume()

    def update_weights(self, source: Path | str | Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights in place and label the tokens drawn from now on with `version`.

        `source` is a folder (every `*.safetensors` file in it is read) or a state dict. Names,
        shapes and dtypes are checked against the model before anything is touched: a bad
        source raises `FileNotFoundError` or `ValueError` and the old weights keep serving. An
        engine that is not paused is paused (`keep`) for the update and resumed after. If
        copying fails midway, the requests in flight fail, the engine reports itself unhealthy
        and refuses requests until an update succeeds.
        """
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"version must be a non-negative integer, not {version!r}")
        plan = WeightPlan.build(source, self.model)
        with self._control:
            with self._lock:
                self._raise_unless_serving(allow_broken_weights=True)
            implicit = not self._paused
            if implicit:
                self._pause("keep", None, allow_broken_weights=True)
            try:
                try:
                    plan.load_into(self.model)
                except Exception as exc:
                    self._weights_error = (
                        f"a weight update failed midway ({exc}): load good weights"
                    )
                    failed = BureauSystemError(Kind.engine_error, self._weights_error)
                    self._abort_in_flight(failed)
                    raise failed from exc
                self._weights_error = None
                self._requeue_in_flight()
                self._version = version
                self.source = plan.describe
            finally:
                if implicit:
                    self._resume()

    # ------------------------------------------------------------------ internals

    def _raise_unless_serving(self, *, allow_broken_weights: bool = False) -> None:
        if self._manager is None:
            raise BureauSystemError(Kind.engine_unavailable, "the engine is not started")
        if self._stopped.is_set():
            raise BureauSystemError(Kind.engine_unavailable, "the engine was stopped")
        if self._weights_error is not None and not allow_broken_weights:
            raise BureauSystemError(Kind.engine_unavailable, self._weights_error)
        manager = self._manager
        if self._error is not None or manager.background_thread_status.fatal_error is not None:
            raise BureauSystemError(
                Kind.engine_unavailable, f"the engine is not serving: {self._error or 'crashed'}"
            )
        if not manager.is_running():
            raise BureauSystemError(Kind.engine_unavailable, "the generation thread is not running")

    def _send(self, request: _Request) -> None:
        """Hand a request to CB; called with `_lock` held."""
        added = self._manager.add_request(
            input_ids=request.prompt_ids,
            request_id=request.request_id,
            max_new_tokens=request.params.max_tokens,
            eos_token_id=sorted(request.stop_ids),
        )
        if added is None:
            self._requests.pop(request.request_id, None)
            raise BureauSystemError(Kind.engine_unavailable, "the engine refused the request")
        request.sent = True

    def _pause(
        self, mode: PauseMode, timeout_s: float | None, *, allow_broken_weights: bool = False
    ) -> None:
        with self._lock:
            self._raise_unless_serving(allow_broken_weights=allow_broken_weights)
            if self._paused:
                return
            self._paused = True
            if mode == "wait":
                idle = self._idle.wait_for(
                    lambda: not any(r.sent for r in self._requests.values()), timeout=timeout_s
                )
                if not idle:
                    self._paused = False
                    self._flush_held()
                    raise BureauSystemError(
                        Kind.engine_timeout, f"in-flight requests still running after {timeout_s} s"
                    )
        parked = _Parked(self._manager)
        try:
            parked.enter()
        except BureauSystemError:
            with self._lock:
                self._paused = False
                self._flush_held()
            raise
        self._parked = parked

    def _resume(self) -> None:
        if self._parked is not None:
            self._parked.leave()
            self._parked = None
        with self._lock:
            self._paused = False
            self._flush_held()

    def _flush_held(self) -> None:
        held, self._held = self._held, []
        for request in held:
            try:
                if self._weights_error is not None:
                    self._requests.pop(request.request_id, None)
                    raise BureauSystemError(Kind.engine_unavailable, self._weights_error)
                self._send(request)
            except BureauSystemError as exc:
                self._finish(request, error=exc)

    def _abort_in_flight(self, error: BureauSystemError | None = None) -> int:
        """End every in-flight request with its partial output (or `error`); the loop is parked."""
        scheduler = self._processor.scheduler
        with self._dispatch:
            self._drain_results()
            with self._lock:
                victims = [r for r in self._requests.values() if r.sent]
                for request in victims:
                    del self._requests[request.request_id]
                self._idle.notify_all()
            for request in victims:
                rid = request.request_id
                state = scheduler.active_requests.get(rid) or scheduler.waiting_requests.get(rid)
                tokens: list[int] = []
                logprobs: list[float] = []
                if state is not None:
                    partial = state.to_generation_output()
                    tokens, logprobs = list(partial.generated_tokens), list(partial.logprobs)
                scheduler.set_request_cancellation(rid)
                self._manager.cancel_request(rid)
                if error is not None:
                    self._finish(request, error=error)
                else:
                    self._finish(request, tokens=tokens, logprobs=logprobs, finish_reason="abort")
        return len(victims)

    def _requeue_in_flight(self) -> None:
        """Re-prefill in-flight requests and drop all cached KV (the weights changed); parked."""
        from transformers.generation.continuous_batching import RequestStatus

        scheduler = self._processor.scheduler
        active = list(scheduler.active_requests.values())
        for state in active:
            fresh = state.create_equivalent_initial_request()
            state._status = RequestStatus.FINISHED
            scheduler.finish_request(state.request_id)
            scheduler.waiting_requests[fresh.request_id] = fresh
        requeued = [state.request_id for state in active]
        again = set(requeued)
        rest = [rid for rid in scheduler.waiting_requests_order if rid not in again]
        scheduler.waiting_requests_order = deque(requeued + rest)
        self._processor.cache.reset()

    def _collect(self) -> None:
        """Deliver CB's results to the futures; fail them all if the generation thread dies."""
        manager = self._manager
        while not self._stopped.is_set():
            with self._dispatch:
                output = manager.get_result(timeout=0.05)
                if output is not None:
                    self._deliver(output)
                    continue
            status = manager.background_thread_status
            if status.fatal_error is not None or not manager.is_running():
                if self._stopped.is_set():
                    break
                with self._dispatch:
                    self._drain_results()
                reason = status.fatal_error or "the generation thread exited"
                self._error = f"the generation thread crashed: {reason}"
                with self._lock:
                    orphans = list(self._requests.values())
                    self._requests.clear()
                    self._held.clear()
                    self._idle.notify_all()
                for request in orphans:
                    self._finish(request, error=BureauSystemError(Kind.engine_error, self._error))
                return
        with self._dispatch:
            self._drain_results()

    def _drain_results(self) -> None:
        """Deliver every result already queued; called with `_dispatch` held."""
        queue = self._manager.output_router.output_queue
        while not queue.empty():
            self._deliver(queue.get_nowait())

    def _deliver(self, output: Any) -> None:
        # Resolved under the lock, so that `pause("wait")` sees a finished request as done.
        with self._lock:
            request = self._requests.pop(output.request_id, None)
            if request is None:  # cancelled or aborted already
                return
            if output.error is not None:
                kind = Kind.engine_unavailable if self._stopped.is_set() else Kind.engine_error
                failure = BureauSystemError(kind, f"generation failed: {output.error}")
                self._finish(request, error=failure)
            else:
                tokens = list(output.generated_tokens)
                reason = "stop" if tokens and tokens[-1] in request.stop_ids else "length"
                logprobs = list(output.logprobs)
                self._finish(request, tokens=tokens, logprobs=logprobs, finish_reason=reason)
            self._idle.notify_all()

    def _finish(
        self,
        request: _Request,
        *,
        tokens: list[int] | None = None,
        logprobs: list[float] | None = None,
        finish_reason: str = "",
        error: BaseException | None = None,
    ) -> None:
        future = request.future
        if future.done():
            return
        if error is None:
            tokens = tokens or []
            try:
                result = Completion(
                    token_ids=tokens,
                    logprobs=logprobs or [],
                    finish_reason=finish_reason,
                    weight_versions=request.versions[: len(tokens)],
                    engine=f"engine:{self.config.served_model_name}",
                    latency_s=time.perf_counter() - request.started,
                    prompt_token_ids=request.prompt_ids,
                )
            except ValueError as exc:
                error = BureauSystemError(Kind.engine_error, f"inconsistent result: {exc}")
            else:
                future.set_result(result)
                return
        future.set_exception(error)


class _BatchSampler:
    """Stands in for `ModelRunner._sample(scores, output_ids)`; see the module docstring.

    Row i of `scores` is the next-token logits of the i-th request of the batch that gets a new
    token. Each row is drawn with its request's parameters; the logprob written back is that of
    the tempered logits (`sampled_logprobs`). Legend: N rows, V vocabulary.
    """

    def __init__(self, engine: InferenceEngine, io: Any) -> None:
        self._engine = engine
        self._io = io

    def __call__(self, scores: torch.Tensor, output_ids: torch.Tensor) -> None:
        import torch

        states = [fs.state for fs in self._io.requests_in_batch if fs.has_new_token]
        # The library computes one logit row per scheduled request, in batch order, with the
        # rows of requests that get a new token first; a request whose prompt is only partly
        # prefilled in this step (a chunk of a long prompt) contributes an unused row at the end.
        if len(states) > scores.shape[1]:
            raise RuntimeError(f"{scores.shape[1]} logit rows for {len(states)} requests")
        if not states:
            return
        logits_NV = scores[0, : len(states)]
        requests = [self._engine._requests.get(state.request_id) for state in states]
        params = [r.params if r is not None else None for r in requests]
        tokens_N = draw(
            logits_NV,
            params,
            [r.generator if r is not None else None for r in requests],
            self._engine._rng,
        )
        logprobs_N = sampled_logprobs(logits_NV, tokens_N, params)
        n = tokens_N.shape[0]
        output_ids[0, :n].copy_(tokens_N)
        output_ids[1, :n].copy_(logprobs_N.to(torch.float32).view(torch.int32))
        version = self._engine._version
        for request in requests:
            if request is not None:
                request.versions.append(version)


def _check_internals(processor: Any) -> None:
    """Fail at start, clearly, if transformers moved what the engine hooks into."""
    needed = {
        "model_runner._sample": lambda p: p.model_runner._sample,
        "inputs_and_outputs.requests_in_batch": lambda p: p.inputs_and_outputs.requests_in_batch,
        "scheduler.active_requests": lambda p: p.scheduler.active_requests,
        "scheduler.waiting_requests_order": lambda p: p.scheduler.waiting_requests_order,
        "cache.reset": lambda p: p.cache.reset,
        "return_logprobs": lambda p: p.return_logprobs or None,
        "synchronous batching": lambda p: None if p.use_async_batching else True,
    }
    missing = []
    for name, get in needed.items():
        try:
            if get(processor) is None:
                missing.append(name)
        except AttributeError:
            missing.append(name)
    if missing:
        raise RuntimeError(
            "this transformers version's continuous batching lacks what the engine hooks into: "
            + ", ".join(missing)
        )


def _eos_ids(model: PreTrainedModel) -> tuple[int, ...]:
    """The model's stop ids: generation_config's `eos_token_id`, else the config's."""
    value = getattr(model.generation_config, "eos_token_id", None)
    if value is None:
        value = getattr(model.config, "eos_token_id", None)
    if value is None:
        return ()
    values = [value] if isinstance(value, int) else list(value)
    return tuple(int(v) for v in values if int(v) >= 0)


def _torch_dtype(dtype: DType) -> Any:
    import torch

    return "auto" if dtype == "auto" else getattr(torch, dtype)
