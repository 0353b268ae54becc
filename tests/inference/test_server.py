"""`bureau serve`'s HTTP app, driven by the real clients: EngineClient and EngineControl."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
import transformers  # noqa: F401
import uvicorn  # noqa: F401
from safetensors.torch import save_file

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import EngineClient, SamplingParams
from bureau.inference.control import EngineControl, WeightSync
from bureau.inference.engine import EngineConfig, InferenceEngine
from bureau.inference.server import ServerThread

NAME = "tiny"
PROMPT = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]
GREEDY = SamplingParams(max_tokens=8, temperature=0.0)


@pytest.fixture(scope="module")
def engine(tiny_model: Path) -> Iterator[InferenceEngine]:
    config = EngineConfig(served_model_name=NAME, seed=0, max_model_len=256, cache_tokens=4096)
    with InferenceEngine.from_checkpoint(tiny_model, config) as eng:
        yield eng


@pytest.fixture(scope="module")
def url(engine: InferenceEngine) -> Iterator[str]:
    with ServerThread(engine) as server:
        yield server.url


def post(url: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=60)


def complete(url: str, params: SamplingParams, prompt: list[int] = PROMPT) -> Any:
    async def go() -> Any:
        client = EngineClient(url, NAME, timeout_s=60)
        try:
            return await client.complete(prompt, params)
        finally:
            await client.aclose()

    return asyncio.run(go())


def control(url: str, action: str, *args: Any) -> Any:
    async def go() -> Any:
        async with EngineControl(url, timeout_s=60) as ctl:
            return await getattr(ctl, action)(*args)

    return asyncio.run(go())


def test_health_and_models(url: str) -> None:
    assert httpx.get(f"{url}/health").status_code == 200
    models = httpx.get(f"{url}/v1/models").json()
    assert [card["id"] for card in models["data"]] == [NAME]
    assert control(url, "health") is True


def test_completions_through_the_engine_client(url: str, engine: InferenceEngine) -> None:
    result = complete(url, GREEDY)
    assert result.token_ids == engine.generate(PROMPT, GREEDY).token_ids
    assert len(result.logprobs) == len(result.token_ids) == len(result.weight_versions)
    assert result.finish_reason in {"stop", "length"}
    assert result.prompt_token_ids == PROMPT
    assert all(lp <= 0 for lp in result.logprobs)


def test_vllm_shape_and_batches(url: str) -> None:
    body = {"model": NAME, "prompt": [PROMPT, PROMPT[:4]], "max_tokens": 3, "temperature": 0}
    answer = post(url, "/v1/completions", {**body, "logprobs": 1, "ignore_eos": True}).json()
    assert [c["index"] for c in answer["choices"]] == [0, 1]
    first = answer["choices"][0]
    assert first["logprobs"]["tokens"] == [f"token_id:{t}" for t in first["token_ids"]]
    assert (
        first["prompt_token_ids"] == PROMPT
        and answer["choices"][1]["prompt_token_ids"] == PROMPT[:4]
    )
    assert answer["usage"] == {"prompt_tokens": 13, "completion_tokens": 6, "total_tokens": 19}
    assert answer["weight_version"] == 0 and first["weight_versions"] == [0, 0, 0]
    assert post(url, "/v1/completions", body).json()["choices"][0]["logprobs"] is None


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"prompt": "hello", "max_tokens": 4}, 400, "text prompts are not supported"),
        ({"prompt": ["hel", "lo"]}, 400, "text prompts are not supported"),
        ({"prompt": [], "max_tokens": 4}, 400, "prompt: must be a non-empty list"),
        ({"prompt": [1, 2], "max_tokens": 0}, 400, "max_tokens"),
        ({"prompt": [1, 2], "temperature": -1}, 400, "temperature"),
        ({"prompt": [1, 2], "top_p": 0}, 400, "top_p"),
        ({"prompt": [1, 2], "stream": True}, 400, "streaming is not supported"),
        ({"prompt": [1, 2], "logprobs": 5}, 400, "logprobs"),
        ({"prompt": [1, 2], "max_tokens": 300}, 400, "max_model_len"),
        ({"prompt": [1, 10**9]}, 400, "outside"),
        ({"prompt": [1, 2], "model": "other"}, 404, "does not exist"),
    ],
)
def test_bad_requests_name_the_problem(url: str, body: Any, status: int, says: str) -> None:
    response = post(url, "/v1/completions", body)
    assert response.status_code == status
    assert says in response.json()["error"]["message"]


def test_invalid_json_and_the_client_error(url: str) -> None:
    response = httpx.post(f"{url}/v1/completions", content=b"{not json", timeout=10)
    assert response.status_code == 400 and "not valid JSON" in response.text
    with pytest.raises(BureauSystemError) as caught:
        complete(url, GREEDY, prompt=[10**9])
    assert caught.value.kind is SystemErrorKind.engine_error and "400" in str(caught.value)


def test_pause_resume_and_update_weights(url: str, engine: InferenceEngine, tmp_path: Path) -> None:
    before = complete(url, GREEDY)
    assert control(url, "pause", "keep") is None
    assert control(url, "is_paused") is True
    control(url, "resume")
    assert control(url, "is_paused") is False
    bad_mode = httpx.post(f"{url}/pause", params={"mode": "later"})
    assert bad_mode.status_code == 400 and "mode must be one of" in bad_mode.text

    with pytest.raises(BureauSystemError, match="does not exist") as caught:
        control(url, "update_weights", tmp_path / "missing", 1)
    assert caught.value.kind is SystemErrorKind.engine_error
    assert control(url, "weight_version") == 0
    assert complete(url, GREEDY).token_ids == before.token_ids

    gen = torch.Generator().manual_seed(3)
    state = {
        k: v + 0.5 * v.std() * torch.randn(v.shape, generator=gen)
        for k, v in engine.model.state_dict().items()
    }
    save_file(state, str(tmp_path / "model.safetensors"))
    assert control(url, "update_weights", tmp_path, 1) >= 0
    assert control(url, "weight_version") == 1
    assert control(url, "is_paused") is False  # the update cycle resumed the engine
    with pytest.raises(TypeError, match="state dict cannot be pushed over HTTP"):
        control(url, "update_weights", state, 2)
    assert issubclass(EngineControl, WeightSync)
    after = complete(url, GREEDY)
    assert after.weight_versions == [1] * len(after.token_ids)
    assert after.token_ids != before.token_ids


def test_unreachable_engine_is_unavailable() -> None:
    with pytest.raises(BureauSystemError) as caught:
        control("http://127.0.0.1:9", "weight_version")
    assert caught.value.kind is SystemErrorKind.engine_unavailable


def test_bureau_serve_command(tiny_model: Path) -> None:
    """The command line other code launches: prints the URL once listening, stops on SIGINT."""
    argv = [sys.executable, "-m", "bureau.cli.main", "serve", "--model", str(tiny_model)]
    argv += ["--port", "0", "--served-model-name", NAME, "--max-model-len", "256"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the first line is the announcement
        served = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        assert served is not None, line
        assert httpx.get(f"{served.group(1)}/health", timeout=10).status_code == 200
        result = complete(served.group(1), GREEDY)
        assert len(result.token_ids) == len(result.logprobs) > 0
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0


def test_bureau_serve_refuses_a_folder_without_a_model(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bureau.cli.main", "serve", "--model", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not a Hugging Face checkpoint" in done.stderr


def test_chat_completions_answer_the_judge_client(url: str) -> None:
    """The judge client speaks to the engine's chat endpoint. With random weights the reply is
    no verdict, which the client reports as such (not as a broken endpoint)."""
    from bureau.judge import JudgeClient, JudgeConfig, JudgeRequest, VerdictError

    raw = post(url, "/v1/chat/completions", {
        "model": NAME, "max_tokens": 6, "temperature": 0,
        "messages": [{"role": "user", "content": "Say hi."}],
    })  # fmt: skip
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] <= 6
    assert isinstance(body["choices"][0]["message"]["content"], str)
    assert post(url, "/v1/chat/completions", {"messages": []}).status_code == 400

    async def ask() -> Any:
        settings = JudgeConfig(url=f"{url}/v1", model=NAME, max_tokens=16, timeout_s=60,
                               invalid_verdict_retries=0)  # fmt: skip
        async with JudgeClient(settings, ["unused"]) as judge:
            try:
                outcome: Any = await judge.judge(
                    JudgeRequest(question="q", reference="r", work="w")
                )
            except VerdictError as exc:
                outcome = exc
            return outcome, judge.calls

    outcome, calls = asyncio.run(ask())
    assert [c.status for c in calls] == [200]
    assert calls[0].outcome in ("ok", "invalid_verdict"), calls
    assert isinstance(outcome, VerdictError) == (calls[0].outcome == "invalid_verdict")
