"""The built-in engine on the tiny Qwen3: raw-model logprobs, stop ids, batching, pause, weights."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import safetensors  # noqa: F401
import torch
import transformers  # noqa: F401
from safetensors.torch import save_file

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import SamplingParams
from bureau.inference.engine import EngineConfig, InferenceEngine
from bureau.inference.sampling import nucleus
from bureau.models.checkpoint import load_checkpoint

# Small pages so that a 40-token prompt fills prefix-cache blocks.
CONFIG = EngineConfig(seed=0, max_model_len=512, cache_tokens=8192, page_size=16)
PROMPT = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]


def prompt(n: int, offset: int = 0) -> list[int]:
    return [(7919 * (i + offset)) % 150000 for i in range(n)]


def greedy(max_tokens: int = 12) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0)


def teacher_forced(
    model: torch.nn.Module, prompt_ids: list[int], ids: list[int], temperature: float = 1.0
) -> torch.Tensor:
    """log_softmax(logits / temperature) of one plain forward pass over prompt + ids, at the ids."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + ids])).logits.float()[0]
    rows = torch.log_softmax(logits[len(prompt_ids) - 1 : -1] / temperature, dim=-1)
    return rows.gather(1, torch.tensor(ids)[:, None]).squeeze(1)


def perturbed(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {k: v + 0.5 * v.std() * torch.randn(v.shape, generator=gen) for k, v in state.items()}


def wait_for_progress(engine: InferenceEngine, request_id: str, tokens: int) -> None:
    deadline = time.monotonic() + 30
    while (engine.progress(request_id) or 0) < tokens:
        assert time.monotonic() < deadline, "the request made no progress"
        time.sleep(0.005)


@pytest.fixture(scope="module")
def reference(tiny_model: Path) -> torch.nn.Module:
    """The original weights, outside any engine."""
    return load_checkpoint(tiny_model, dtype=torch.float32)[0]


@pytest.fixture(scope="module")
def engine(tiny_model: Path) -> Iterator[InferenceEngine]:
    """Serves the original weights throughout the module."""
    with InferenceEngine.from_checkpoint(tiny_model, CONFIG) as eng:
        yield eng


@pytest.fixture(scope="module")
def updatable(tiny_model: Path) -> Iterator[InferenceEngine]:
    """For the weight and pause tests; each test sets the weights it needs."""
    with InferenceEngine.from_checkpoint(tiny_model, CONFIG) as eng:
        yield eng


@pytest.fixture(scope="module")
def new_weights(tmp_path_factory: pytest.TempPathFactory, reference: torch.nn.Module) -> Path:
    folder = tmp_path_factory.mktemp("weights-v1")
    save_file(perturbed(reference.state_dict(), seed=1), str(folder / "model.safetensors"))
    return folder


def test_greedy_is_deterministic(engine: InferenceEngine) -> None:
    first = engine.generate(PROMPT, greedy(16), ignore_eos=True)
    second = engine.generate(PROMPT, greedy(16), ignore_eos=True)
    assert first.token_ids == second.token_ids
    assert len(first.token_ids) == 16 and first.finish_reason == "length"
    assert first.weight_versions == [0] * 16
    assert first.prompt_token_ids == PROMPT


def test_logprobs_are_of_the_tempered_distribution_before_top_p(
    engine: InferenceEngine, reference: torch.nn.Module
) -> None:
    """Sampled with temperature and top-p, batched: logprobs are the plain forward's at the
    request's temperature (greedy: the raw model's), with top-p not applied."""
    settings = [
        SamplingParams(max_tokens=24, temperature=1.0, seed=1),
        SamplingParams(max_tokens=24, temperature=0.7, top_p=0.9, seed=2),
        SamplingParams(max_tokens=24, temperature=0.0),
        SamplingParams(max_tokens=24, temperature=1.3, top_p=0.5, seed=3),
    ]
    prompts = [prompt(5 + 9 * i, offset=i) for i in range(len(settings))]
    futures = [engine.submit(p, s, ignore_eos=True) for p, s in zip(prompts, settings, strict=True)]
    deltas = []
    for p, s, future in zip(prompts, settings, futures, strict=True):
        result = future.result(timeout=60)
        temperature = s.temperature or 1.0
        expected = teacher_forced(reference, p, result.token_ids, temperature)
        if temperature != 1.0:  # the raw model's logprobs would differ
            assert (
                torch.tensor(result.logprobs) - teacher_forced(reference, p, result.token_ids)
            ).abs().max() > 1e-3
        deltas.append((torch.tensor(result.logprobs) - expected).abs())
    delta = torch.cat(deltas)
    print(f"logprob |delta| vs teacher-forced fp32: mean {delta.mean():.3g} max {delta.max():.3g}")
    assert delta.mean() <= 1e-5 and delta.max() <= 1e-4


def test_seeds_reproduce_and_differ(engine: InferenceEngine) -> None:
    def draw(seed: int) -> list[int]:
        params = SamplingParams(max_tokens=12, temperature=1.0, seed=seed)
        return engine.generate(PROMPT, params, ignore_eos=True).token_ids

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_tiny_top_p_is_greedy(engine: InferenceEngine) -> None:
    narrow = SamplingParams(max_tokens=10, temperature=1.0, top_p=1e-6, seed=4)
    assert (
        engine.generate(PROMPT, narrow).token_ids == engine.generate(PROMPT, greedy(10)).token_ids
    )


def test_nucleus_keeps_the_smallest_set_reaching_top_p() -> None:
    probs = torch.tensor([0.2, 0.5, 0.3])
    torch.testing.assert_close(nucleus(probs, 0.6), torch.tensor([0.0, 0.5, 0.3]))
    torch.testing.assert_close(nucleus(probs, 0.5), torch.tensor([0.0, 0.5, 0.0]))
    torch.testing.assert_close(nucleus(probs, 1.0), probs)


def test_stop_ids_end_the_sample_and_are_kept(engine: InferenceEngine) -> None:
    free = engine.generate(PROMPT, greedy(12), ignore_eos=True).token_ids
    k = next(i for i in range(2, len(free)) if free[i] not in free[:i])
    params = SamplingParams(max_tokens=12, temperature=0.0, stop_token_ids=(free[k],))
    stopped = engine.generate(PROMPT, params, ignore_eos=True)
    assert stopped.token_ids == free[: k + 1]
    assert stopped.finish_reason == "stop"
    assert len(stopped.logprobs) == len(stopped.weight_versions) == k + 1
    assert engine.eos_ids == (151645, 151643)  # <|im_end|>, <|endoftext|> by default


def test_concurrent_requests_match_sequential_ones(engine: InferenceEngine) -> None:
    prompts = [prompt(3 + 7 * i, offset=100 * i) for i in range(6)]
    alone = [engine.generate(p, greedy(10), ignore_eos=True) for p in prompts]
    futures = [engine.submit(p, greedy(10), ignore_eos=True) for p in prompts]
    batched = [f.result(timeout=60) for f in futures]
    for one, many in zip(alone, batched, strict=True):
        assert one.token_ids == many.token_ids
        torch.testing.assert_close(one.logprobs, many.logprobs, atol=1e-5, rtol=0)


def test_prompts_the_engine_cannot_serve_are_refused(engine: InferenceEngine) -> None:
    with pytest.raises(ValueError, match="empty"):
        engine.submit([], greedy())
    with pytest.raises(ValueError, match="outside"):
        engine.submit([1, engine.vocab_size], greedy())
    with pytest.raises(ValueError, match="max_model_len"):
        engine.submit(prompt(500), greedy(20))


def test_weight_update_changes_outputs_and_versions(
    updatable: InferenceEngine, reference: torch.nn.Module, new_weights: Path
) -> None:
    long_prompt = prompt(40, offset=3)  # fills prefix-cache blocks that the update must drop
    updatable.update_weights(reference.state_dict(), 1)
    before = updatable.generate(long_prompt, greedy(), ignore_eos=True)
    updatable.update_weights(new_weights, 2)
    after = updatable.generate(long_prompt, greedy(), ignore_eos=True)
    assert updatable.weight_version == 2
    assert after.weight_versions == [2] * len(after.token_ids)
    assert after.token_ids != before.token_ids
    expected = teacher_forced(updatable.model, long_prompt, after.token_ids)
    assert (torch.tensor(after.logprobs) - expected).abs().max() <= 1e-4
    updatable.update_weights(reference.state_dict(), 3)
    again = updatable.generate(long_prompt, greedy(), ignore_eos=True)
    assert again.token_ids == before.token_ids


def test_bad_weights_leave_the_old_ones_serving(
    updatable: InferenceEngine, reference: torch.nn.Module, tmp_path: Path
) -> None:
    updatable.update_weights(reference.state_dict(), 4)
    before = updatable.generate(PROMPT, greedy(), ignore_eos=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        updatable.update_weights(tmp_path / "missing", 5)
    with pytest.raises(FileNotFoundError, match=r"no \*\.safetensors"):
        updatable.update_weights(tmp_path, 5)
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(ValueError, match="cannot read"):
        updatable.update_weights(tmp_path, 5)
    state = reference.state_dict()
    wrong = {name: t.clone() for name, t in state.items()}
    wrong["lm_head.weight"] = torch.zeros(3, 64)
    save_file(wrong, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"wrong shape.*lm_head"):
        updatable.update_weights(tmp_path, 5)
    partial = {name: t.clone() for name, t in state.items() if "layers.1." not in name}
    save_file(partial, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="missing"):
        updatable.update_weights(tmp_path, 5)
    assert updatable.weight_version == 4 and updatable.healthy and not updatable.is_paused
    assert updatable.generate(PROMPT, greedy(), ignore_eos=True).token_ids == before.token_ids


def test_a_load_failing_midway_fails_requests_until_good_weights_arrive(
    updatable: InferenceEngine, reference: torch.nn.Module
) -> None:
    updatable.update_weights(reference.state_dict(), 6)
    before = updatable.generate(PROMPT, greedy(), ignore_eos=True)
    running = updatable.submit(PROMPT, greedy(200), ignore_eos=True)
    wait_for_progress(updatable, running.request_id, 1)
    # Passes the checks (names, shapes, float), then cannot be copied: a meta tensor, last.
    broken = {name: t.clone() for name, t in reference.state_dict().items()}
    last = list(broken)[-1]
    broken[last] = torch.empty(broken[last].shape, device="meta")
    with pytest.raises(BureauSystemError, match="failed midway"):
        updatable.update_weights(broken, 7)
    with pytest.raises(BureauSystemError, match="failed midway"):
        running.result(timeout=10)
    assert not updatable.healthy and updatable.weight_version == 6
    with pytest.raises(BureauSystemError) as refused:
        updatable.submit(PROMPT, greedy())
    assert refused.value.kind is SystemErrorKind.engine_unavailable
    updatable.update_weights(reference.state_dict(), 8)
    assert updatable.healthy and updatable.error is None
    assert updatable.generate(PROMPT, greedy(), ignore_eos=True).token_ids == before.token_ids


def test_keep_continues_in_flight_requests_on_the_new_weights(
    updatable: InferenceEngine, reference: torch.nn.Module, new_weights: Path
) -> None:
    updatable.update_weights(reference.state_dict(), 10)
    p = prompt(30, offset=5)
    future = updatable.submit(p, greedy(200), ignore_eos=True)
    wait_for_progress(updatable, future.request_id, 3)
    assert updatable.pause("keep") == 0
    frozen = updatable.progress(future.request_id)
    time.sleep(0.2)
    assert updatable.progress(future.request_id) == frozen and not future.done()
    updatable.update_weights(new_weights, 11)
    updatable.resume()
    result = future.result(timeout=60)
    old = result.weight_versions.count(10)
    assert old == frozen and result.weight_versions == [10] * old + [11] * (200 - old)
    # Old tokens under the old weights, new ones under the new weights: the KV was recomputed.
    ids = result.token_ids
    got = torch.tensor(result.logprobs)
    assert (got[:old] - teacher_forced(reference, p, ids[:old])).abs().max() <= 1e-4
    later = teacher_forced(updatable.model, p, ids)[old:]
    assert (got[old:] - later).abs().max() <= 1e-4


def test_abort_ends_in_flight_requests_and_holds_new_ones(updatable: InferenceEngine) -> None:
    running = updatable.submit(PROMPT, greedy(200), ignore_eos=True)
    wait_for_progress(updatable, running.request_id, 2)
    assert updatable.pause("abort") == 1
    aborted = running.result(timeout=10)
    assert aborted.finish_reason == "abort"
    assert 2 <= len(aborted.token_ids) < 200
    assert len(aborted.logprobs) == len(aborted.weight_versions) == len(aborted.token_ids)
    held = updatable.submit(PROMPT, greedy(4), ignore_eos=True)
    time.sleep(0.2)
    assert not held.done() and updatable.is_paused
    updatable.resume()
    assert held.result(timeout=30).finish_reason == "length"
    assert updatable.num_in_flight == 0


def test_wait_lets_in_flight_requests_finish(updatable: InferenceEngine) -> None:
    running = updatable.submit(PROMPT, greedy(20), ignore_eos=True)
    updatable.pause("wait")
    assert running.done() and running.result().finish_reason == "length"
    assert len(running.result().token_ids) == 20
    updatable.resume()


def test_a_crash_fails_waiting_requests(tiny_model: Path) -> None:
    engine = InferenceEngine.from_checkpoint(tiny_model, CONFIG).start()
    try:

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("injected failure")

        engine.model.model.layers[0].mlp.forward = broken
        futures = [engine.submit(PROMPT, greedy()) for _ in range(3)]
        for future in futures:
            with pytest.raises(BureauSystemError, match="injected failure") as caught:
                future.result(timeout=30)
            assert caught.value.kind is SystemErrorKind.engine_error
        assert not engine.healthy and "injected failure" in (engine.error or "")
        with pytest.raises(BureauSystemError) as refused:
            engine.submit(PROMPT, greedy())
        assert refused.value.kind is SystemErrorKind.engine_unavailable
    finally:
        engine.stop()


def test_prompts_longer_than_a_step_are_prefilled_in_chunks(
    tiny_model: Path, reference: torch.nn.Module
) -> None:
    """A prompt over `max_batch_tokens` takes several steps to prefill, alone or next to
    decoding requests; its logprobs still match the teacher-forced pass."""
    config = CONFIG.model_copy(update={"max_batch_tokens": 64})
    with InferenceEngine.from_checkpoint(tiny_model, config) as eng:
        short = eng.submit(prompt(8, offset=5), greedy(30), ignore_eos=True)
        long_prompt = prompt(300, offset=11)
        done = eng.generate(long_prompt, greedy(6), ignore_eos=True, timeout_s=120)
        assert len(done.token_ids) == 6
        expected = teacher_forced(reference, long_prompt, done.token_ids)
        assert torch.tensor(done.logprobs).sub(expected).abs().max() < 1e-4
        assert len(short.result(timeout=60).token_ids) == 30


def test_a_tied_model_takes_new_weights_through_its_one_embedding(
    tmp_path: Path, tokenizer_cache: Path
) -> None:
    """With tied embeddings the pushed state holds one name for the shared matrix (as
    `untie` leaves it); the engine's output layer must follow it."""
    from bureau.models.checkpoint import init_checkpoint
    from bureau.trainer.checkpoint import untie

    folder = init_checkpoint(
        "qwen3", 2, 64, tmp_path / "tied", heads=2, kv_heads=1, tie_embeddings=True,
        tokenizer_cache_dir=tokenizer_cache,
    )  # fmt: skip
    changed = load_checkpoint(folder, dtype=torch.float32)[0]
    assert changed.lm_head.weight is changed.model.embed_tokens.weight
    with torch.no_grad():
        for name, tensor in perturbed(changed.state_dict(), 5).items():
            changed.state_dict()[name].copy_(tensor)
    pushed = untie(changed.state_dict())
    assert "lm_head.weight" not in pushed
    long_prompt = prompt(30, offset=9)
    with InferenceEngine.from_checkpoint(folder, CONFIG) as eng:
        before = eng.generate(long_prompt, greedy(), ignore_eos=True)
        eng.update_weights(pushed, 1)
        after = eng.generate(long_prompt, greedy(), ignore_eos=True)
    # (a random tied model repeats its input token, so the ids may not change; the logprobs do)
    assert after.logprobs != before.logprobs
    expected = teacher_forced(changed, long_prompt, after.token_ids)
    assert (torch.tensor(after.logprobs) - expected).abs().max() <= 1e-4


def test_the_engine_runs_where_it_is_told_and_refuses_a_gpu_it_does_not_have(
    tiny_model: Path,
) -> None:
    with pytest.raises(ValueError, match="cpu, cuda, cuda:N or auto"):
        EngineConfig(device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA device"):
            InferenceEngine.from_checkpoint(
                tiny_model, CONFIG.model_copy(update={"device": "cuda"})
            )
    auto = InferenceEngine.from_checkpoint(tiny_model, CONFIG.model_copy(update={"device": "auto"}))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert {p.device.type for p in auto.model.parameters()} == {expected}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_on_a_gpu_the_engine_samples_there_and_takes_weights_there(tiny_model: Path) -> None:
    config = CONFIG.model_copy(update={"device": "cuda"})
    with InferenceEngine.from_checkpoint(tiny_model, config) as eng:
        assert {p.device.type for p in eng.model.parameters()} == {"cuda"}
        before = eng.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0))
        state = {k: v.detach().clone() * 1.01 for k, v in eng.model.state_dict().items()}
        assert all(t.is_cuda for t in state.values())
        eng.update_weights(state, 1)
        after = eng.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0))
        assert after.weight_versions == [1] * len(after.token_ids)
        assert before.weight_versions == [0] * len(before.token_ids)
