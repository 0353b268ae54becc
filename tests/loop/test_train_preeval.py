"""`bureau train` with `preeval.enabled`: the starting policy runs over the training tasks
first, and training starts only when the system-error gate passes."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bureau.config import load_config
from bureau.evaluation.preeval import PreevalFailed
from bureau.loop.config import RunConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def dead_url() -> str:
    """An engine URL nothing answers at: every trial is `engine_unavailable`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def run_toml(tmp_path: Path, model: Path, dataset: Path, gate: float) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(
        f'out = "{tmp_path / "run"}"\nsteps = 1\n'
        f'[model]\npath = "{model}"\n[data]\ntrain = "{dataset}"\n'
        f'[engines]\nkind = "url"\nurls = ["{dead_url()}"]\n'
        "[rollout]\nattempts = 2\nmax_in_flight = 2\nagent_timeout_s = 60\n"
        # A dead engine is resent to with the usual backoff (0.5 s doubling) unless told not to
        # wait: the gate is about counting, not waiting.
        "[rollout.harness]\nengine_retry_backoff_s = 0.01\n"
        f"[preeval]\nmax_tasks = 2\nmax_system_error_rate = {gate}\n"
    )
    return path


def test_a_failing_gate_stops_training_before_it_starts(
    tiny_model: Path, small_dataset: Path, tmp_path: Path
) -> None:
    config = run_toml(tmp_path, tiny_model, small_dataset, 0.005)
    done = subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", "train", "--config", str(config), "--preeval"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    said = " ".join(done.stdout.split())  # rich wraps long lines
    assert "above the gate of 0.50%" in said and "preeval.json" in done.stdout.replace("\n", "")
    found = json.loads((tmp_path / "run" / "preeval" / "preeval.json").read_text())
    assert found["passed"] is False and found["trials"] == 2
    assert found["system_errors"]["engine_unavailable"]["count"] == 2
    assert found["retried"] == {"engine_unavailable": 4}  # two retries each, as in training
    assert not (tmp_path / "run" / "checkpoint").exists()
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_passing_gate_goes_on_to_training(
    tiny_model: Path, small_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bureau.loop.actors.cluster as cluster
    from bureau.loop.run import train

    class Started(Exception):
        pass

    def connect(config: RunConfig) -> bool:
        raise Started

    monkeypatch.setattr(cluster, "connect_ray", connect)
    config = load_config(
        RunConfig, run_toml(tmp_path, tiny_model, small_dataset, 1.0), ["preeval.enabled=true"]
    )
    with pytest.raises(Started):
        train(config, say=lambda _line: None)
    assert json.loads((tmp_path / "run" / "preeval" / "preeval.json").read_text())["passed"]
    config = config.model_copy(
        update={"preeval": config.preeval.model_copy(update={"max_system_error_rate": 0.0})}
    )
    with pytest.raises(PreevalFailed, match=r"see .*preeval\.json"):
        train(config, say=lambda _line: None)
