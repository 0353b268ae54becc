"""The Docker runtime: argument building always; a real container only where an engine answers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from sandbox_helpers import MakeTask

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox import get_runtime
from bureau.sandbox.base import Limits
from bureau.sandbox.docker import environment_tag, exec_args, run_args


def _engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def test_run_args_carry_the_limits_and_no_network() -> None:
    limits = Limits(cpus=1.5, memory_mb=512, max_processes=100, max_file_mb=8, cpu_time_s=60)
    args = run_args("docker", "bureau-x", "img:1", limits, "/workspace")
    joined = " ".join(args)
    for expected in (
        "--network none",
        "--cpus 1.5",
        "--memory 512m",
        "--memory-swap 512m",
        "--pids-limit 100",
        f"--ulimit fsize={8 * 2**20}",
        "--ulimit cpu=60",
        "--security-opt no-new-privileges",
        "-w /workspace",
    ):
        assert expected in joined
    assert args[-3:] == ["sleep", "img:1", "infinity"]


def test_exec_args_pass_env_cwd_and_stdin() -> None:
    args = exec_args("docker", "c", ["bash", "-c", "x"], {"A": "1"}, "/w", stdin=True)
    assert args == ["docker", "exec", "-i", "-w", "/w", "-e", "A=1", "c", "bash", "-c", "x"]


def test_environment_tag_follows_the_environment_files(make_task: MakeTask) -> None:
    task = make_task()
    before = environment_tag(task.environment_dir)
    assert before == environment_tag(task.environment_dir)
    (task.environment_dir / "Dockerfile").write_text("FROM debian:12\n")
    assert environment_tag(task.environment_dir) != before


@pytest.mark.skipif(not _engine_answers(), reason="no Docker engine answers here")
def test_a_container_runs_a_trial(tmp_path: Path, make_task: MakeTask) -> None:
    from bureau.sandbox.docker import DockerRuntime

    task = make_task()
    (task.environment_dir / "Dockerfile").write_text("FROM busybox\n")
    runtime = DockerRuntime()
    sb = runtime.start(task, timeout_s=300)
    try:
        result = sb.exec(["sh", "-c", "cat data.txt; wget -q -T 2 http://1.1.1.1"], timeout_s=30)
        sb.upload(task.tests_dir, "/tests")
        spin = sb.exec(["sh", "-c", "while :; do :; done"], timeout_s=1)
        sb.download("/workspace/data.txt", tmp_path / "data.txt")
    finally:
        sb.stop()
        sb.stop()
    assert result.stdout == "hello\n" and result.returncode != 0
    assert spin.timed_out
    assert (tmp_path / "data.txt").read_text() == "hello\n"


@pytest.mark.skipif(_engine_answers(), reason="a Docker engine answers here")
def test_without_an_engine_docker_is_unavailable() -> None:
    with pytest.raises(BureauSystemError) as caught:
        get_runtime("docker")
    assert caught.value.kind == SystemErrorKind.sandbox_unavailable
