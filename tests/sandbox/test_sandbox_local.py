"""The local runtime's everyday behaviour: commands, output, timeouts, files, Python inside."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
from sandbox_helpers import MakeTask, bash, python

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.bwrap import sandbox_python
from bureau.sandbox.limits import processes_of_uid
from bureau.sandbox.local import LocalRuntime, LocalSandbox


def test_exec_runs_in_the_workdir_with_the_documented_environment(sandbox: LocalSandbox) -> None:
    result = bash(sandbox, 'pwd; echo "$BUREAU_WORKSPACE $BUREAU_VERIFIER_DIR $HOME"; cat data.txt')
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["/workspace", "/workspace /logs/verifier /tmp", "hello"]
    assert not result.timed_out


def test_cwd_is_inside_paths_relative_to_the_workdir(sandbox: LocalSandbox) -> None:
    bash(sandbox, "mkdir -p sub/deeper")
    assert sandbox.exec(["pwd"], timeout_s=10, cwd="sub").stdout == "/workspace/sub\n"
    assert sandbox.exec(["pwd"], timeout_s=10, cwd="/logs/agent").stdout == "/logs/agent\n"


def test_exit_code_stderr_and_stdin_come_back(sandbox: LocalSandbox) -> None:
    result = sandbox.exec(
        ["bash", "-c", "cat; echo oops >&2; exit 3"], timeout_s=10, stdin="from stdin"
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, "from stdin", "oops\n")


def test_host_environment_does_not_leak_in(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUREAU_TEST_SECRET", "hunter2")
    result = sandbox.exec(["env"], timeout_s=10, env={"EXTRA": "given"})
    assert "hunter2" not in result.stdout
    assert "EXTRA=given" in result.stdout


def test_workspace_is_a_private_copy(runtime: LocalRuntime, make_task: MakeTask) -> None:
    task = make_task()
    first = runtime.start(task, timeout_s=30)
    second = runtime.start(task, timeout_s=30)
    try:
        bash(first, "echo changed > data.txt")
        assert bash(second, "cat data.txt").stdout == "hello\n"
        assert (task.workspace_dir / "data.txt").read_text() == "hello\n"
        paths = [sb.host_path("/workspace/data.txt") for sb in (first, second)]
        paths.append(task.workspace_dir / "data.txt")
        inodes = {(os.stat(p).st_dev, os.stat(p).st_ino) for p in paths}
        assert len(inodes) == 3
    finally:
        first.stop()
        second.stop()


def test_long_output_is_capped_keeping_head_and_tail(tmp_path: Path, make_task: MakeTask) -> None:
    runtime = LocalRuntime(tmp_path / "sbx", output_cap_bytes=1000)
    sb = runtime.start(make_task(), timeout_s=30)
    try:
        result = bash(sb, "echo START; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END")
    finally:
        sb.stop()
    assert result.returncode == 0
    assert result.stdout.startswith("START") and result.stdout.rstrip().endswith("END")
    assert "bytes cut" in result.stdout and len(result.stdout) < 1200


def test_timeout_kills_the_command_and_everything_it_started(sandbox: LocalSandbox) -> None:
    started = time.monotonic()
    result = bash(sandbox, "sleep 300 & setsid sleep 300 & sleep 300", timeout_s=1)
    assert result.timed_out and result.returncode != 0
    assert time.monotonic() - started < 8
    assert processes_of_uid(sandbox.uid) == []


def test_threads_subprocesses_and_multiprocessing_work(sandbox: LocalSandbox) -> None:
    code = (
        "import multiprocessing, subprocess, threading\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "print(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip())\n"
        "with multiprocessing.Pool(2) as pool: print(sum(pool.map(abs, [-1, -2])))\n"
    )
    result = python(sandbox, code, timeout_s=30)
    assert result.stdout.split() == ["thread", "child", "3"], result.stderr


def test_spawn_gives_a_long_running_process_with_binary_pipes(sandbox: LocalSandbox) -> None:
    proc = sandbox.spawn(["cat"])
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"\x00\xffping\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"\x00\xffping\n"
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


def test_upload_and_download_files_and_folders(sandbox: LocalSandbox, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.sh").write_text("#!/bin/sh\necho B\n")
    (src / "sub" / "b.sh").chmod(0o755)
    sandbox.upload(src, "/workspace/in")
    sandbox.upload(src / "a.txt", "/logs/agent/deep/a.txt")
    result = bash(sandbox, "in/sub/b.sh; cat /logs/agent/deep/a.txt; echo out > made.txt")
    assert result.stdout == "B\nA" and result.returncode == 0
    sandbox.download("/workspace", tmp_path / "back")
    sandbox.download("/workspace/made.txt", tmp_path / "one.txt")
    assert (tmp_path / "back" / "in" / "sub" / "b.sh").read_text().endswith("echo B\n")
    assert (tmp_path / "one.txt").read_text() == "out\n"


@pytest.mark.parametrize("dest", ["/etc/x", "/tmp/x", "/usr/lib/x", "/workspace/../etc", "rel"])
def test_upload_refuses_paths_outside_the_exchange_folders(
    sandbox: LocalSandbox, tmp_path: Path, dest: str
) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(BureauSystemError) as caught:
        sandbox.upload(tmp_path / "f", dest)
    assert caught.value.kind == SystemErrorKind.upload_failed


def test_download_of_a_missing_path_is_file_not_found(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError):
        sandbox.download("/logs/verifier/reward.json", tmp_path / "r.json")


def test_sandbox_python_imports_the_tool_stack(tmp_path: Path, make_task: MakeTask) -> None:
    runtime = LocalRuntime(tmp_path / "sbx")
    sb = runtime.start(make_task(memory_mb=2048), timeout_s=30)
    modules = ["pdfplumber", "pypdf", "openpyxl", "pptx", "docx", "pandas", "numpy", "mcp"]
    if importlib.util.find_spec("bureau.tools") is not None:
        modules.insert(0, "bureau.tools")
    try:
        code = f"import {', '.join(modules)}; import sys; print(sys.executable)"
        result = sb.exec([sandbox_python(), "-c", code], timeout_s=60)
        plain = python(sb, "import numpy, pandas; print('ok')", timeout_s=60)
    finally:
        sb.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == sandbox_python()
    assert plain.stdout.strip() == "ok", "python3 on PATH is the venv's"


def test_bureau_package_exposes_only_the_tool_servers(sandbox: LocalSandbox) -> None:
    result = python(sandbox, "import bureau.grading")
    assert result.returncode != 0 and "No module named 'bureau.grading'" in result.stderr
    assert python(sandbox, "import bureau.errors").returncode == 0
