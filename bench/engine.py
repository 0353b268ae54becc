"""Built-in engine throughput against sequential transformers `generate`, on the tiny Qwen3.

    .venv/bin/python bench/engine.py                          # about 1 minute
    .venv/bin/python bench/engine.py --vllm-url http://127.0.0.1:8001   # and a running vLLM

Measured side by side in one run, on the same random-weight checkpoint (2 layers, hidden 64,
the real 151,936-token vocabulary, written by `init_checkpoint` into a temporary folder unless
`--model` names one), with the same prompts and sampling (temperature 1, top-p 1):
1. sequential `model.generate`, one request after another: the baseline;
2. the built-in engine in process (`InferenceEngine.submit`) at 1, 4 and 16 concurrent sequences;
3. the same engine over HTTP (`bureau serve`'s app on a local port, through `EngineClient`);
4. with `--vllm-url`, that server through `EngineClient` at the same concurrencies;
and the time of one in-place `update_weights` from the checkpoint folder.
Each level starts its sequences together and counts the tokens they drew over the wall time;
the ratios are against the baseline of the same run. Every side gets one warm-up request first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bureau.inference.client import EngineClient, SamplingParams
from bureau.inference.engine import EngineConfig, InferenceEngine
from bureau.inference.server import ServerThread


def make_prompts(count: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(0, 150_000) for _ in range(length)] for _ in range(count)]


def sequential_generate(model: Any, prompts: list[list[int]], tokens: int) -> dict[str, float]:
    import torch
    from transformers import GenerationConfig

    config = GenerationConfig(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=tokens,
        min_new_tokens=tokens, pad_token_id=151643, eos_token_id=[151645, 151643],
    )  # fmt: skip
    drawn = 0
    started = time.perf_counter()
    with torch.no_grad():
        for prompt in prompts:
            out = model.generate(torch.tensor([prompt]), generation_config=config)
            drawn += out.shape[1] - len(prompt)
    return rate(drawn, time.perf_counter() - started)


def engine_level(
    engine: InferenceEngine, prompts: list[list[int]], tokens: int
) -> dict[str, float]:
    params = SamplingParams(max_tokens=tokens, temperature=1.0)
    started = time.perf_counter()
    futures = [engine.submit(p, params, ignore_eos=True) for p in prompts]
    drawn = sum(len(f.result(timeout=600).token_ids) for f in futures)
    return rate(drawn, time.perf_counter() - started)


async def http_level(
    url: str, model: str, prompts: list[list[int]], tokens: int
) -> dict[str, float]:
    client = EngineClient(url, model, timeout_s=600)
    params = SamplingParams(max_tokens=tokens, temperature=1.0)
    try:
        started = time.perf_counter()
        results = await asyncio.gather(*(client.complete(p, params) for p in prompts))
        elapsed = time.perf_counter() - started
    finally:
        await client.aclose()
    return rate(sum(len(r.token_ids) for r in results), elapsed)


def rate(tokens: int, seconds: float) -> dict[str, float]:
    return {
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "tokens_per_s": round(tokens / seconds, 1),
    }


def show(side: str, concurrency: int, got: dict[str, float]) -> None:
    speed, ratio = got["tokens_per_s"], got["vs_sequential"]
    print(f"{side}, {concurrency:2d} concurrent: {speed} tokens/s (x{ratio})", flush=True)


def served_name(url: str) -> str:
    models = httpx.get(f"{url.rstrip('/')}/v1/models", timeout=30).json()
    return str(models["data"][0]["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--model", type=Path, default=None, help="checkpoint (default: a new tiny one)"
    )
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per sequence")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--sequential", type=int, default=4, help="requests for the baseline")
    parser.add_argument("--vllm-url", default=None, help="also measure this vLLM server")
    parser.add_argument("--no-http", action="store_true", help="skip the engine over HTTP")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    import torch

    from bureau.models.checkpoint import init_checkpoint, load_checkpoint

    path = args.model
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="bureau-bench-engine-")) / "qwen3-tiny"
        init_checkpoint("qwen3", layers=2, hidden=64, out=path, seed=args.seed)
    report: dict[str, Any] = {
        "model": str(path),
        "tokens_per_sequence": args.tokens,
        "prompt_len": args.prompt_len,
        "torch_threads": torch.get_num_threads(),
    }
    warmup = make_prompts(1, args.prompt_len, seed=args.seed + 99)

    model, _ = load_checkpoint(path, dtype=torch.float32)
    sequential_generate(model, warmup, 8)
    base = sequential_generate(
        model, make_prompts(args.sequential, args.prompt_len, args.seed), args.tokens
    )
    report["sequential_generate"] = base
    print(
        f"sequential generate: {base['tokens_per_s']} tokens/s ({base['tokens']} tokens)",
        flush=True,
    )
    del model

    config = EngineConfig(served_model_name="tiny", seed=args.seed, max_batch=max(levels))
    with InferenceEngine.from_checkpoint(path, config) as engine:
        engine_level(engine, warmup, 8)
        for c in levels:
            got = engine_level(engine, make_prompts(c, args.prompt_len, args.seed + c), args.tokens)
            got["vs_sequential"] = round(got["tokens_per_s"] / base["tokens_per_s"], 2)
            report[f"engine_c{c}"] = got
            show("engine", c, got)
        started = time.perf_counter()
        engine.update_weights(path, 1)  # the same weights again: pause, load, re-queue, resume
        report["update_weights_s"] = round(time.perf_counter() - started, 3)
        print(f"update_weights from {path}: {report['update_weights_s']} s", flush=True)
        if not args.no_http:
            with ServerThread(engine) as server:
                asyncio.run(http_level(server.url, "tiny", warmup, 8))
                for c in levels:
                    prompts = make_prompts(c, args.prompt_len, args.seed + c)
                    got = asyncio.run(http_level(server.url, "tiny", prompts, args.tokens))
                    got["vs_sequential"] = round(got["tokens_per_s"] / base["tokens_per_s"], 2)
                    report[f"engine_http_c{c}"] = got
                    show("engine over HTTP", c, got)

    if args.vllm_url:
        name = served_name(args.vllm_url)
        asyncio.run(http_level(args.vllm_url, name, warmup, 8))
        for c in levels:
            prompts = make_prompts(c, args.prompt_len, args.seed + c)
            got = asyncio.run(http_level(args.vllm_url, name, prompts, args.tokens))
            got["vs_sequential"] = round(got["tokens_per_s"] / base["tokens_per_s"], 2)
            report[f"vllm_c{c}"] = got
            show("vLLM over HTTP", c, got)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
