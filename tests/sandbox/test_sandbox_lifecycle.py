"""Phases, teardown, the exit hook, and failures of the sandbox machinery itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sandbox_helpers import MakeTask, bash

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox import cgroups, get_runtime
from bureau.sandbox.limits import is_mountpoint, processes_of_uid
from bureau.sandbox.local import LocalRuntime, LocalSandbox

LOOK = "for p in /tests /solution /logs/verifier /logs/agent; do test -e $p && echo $p; done"


def _fill(sb: LocalSandbox, tmp_path: Path) -> None:
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "t" / "test.sh").write_text("echo test")
    sb.upload(tmp_path / "t", "/tests")
    sb.upload(tmp_path / "t", "/solution")


def test_agent_sees_neither_tests_nor_solution_nor_verifier_logs(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    _fill(sandbox, tmp_path)
    assert bash(sandbox, LOOK).stdout.split() == ["/logs/agent"]
    assert bash(sandbox, LOOK, phase="setup").stdout.split() == ["/logs/agent"]


def test_solution_phase_reads_solution_only(sandbox: LocalSandbox, tmp_path: Path) -> None:
    _fill(sandbox, tmp_path)
    assert bash(sandbox, LOOK, phase="solution").stdout.split() == ["/solution", "/logs/agent"]
    assert bash(sandbox, "touch /solution/x", phase="solution").returncode != 0


def test_verifier_sees_tests_and_its_logs_and_reads_agent_logs(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    _fill(sandbox, tmp_path)
    seen = bash(sandbox, LOOK, phase="verifier").stdout.split()
    assert seen == ["/tests", "/logs/verifier", "/logs/agent"]
    writes = bash(
        sandbox,
        "echo 1 > /logs/verifier/reward.txt && ! touch /logs/agent/x && ! touch /tests/x",
        phase="verifier",
    )
    assert writes.returncode == 0, writes.stderr
    assert sandbox.host_path("/logs/verifier/reward.txt").read_text() == "1\n"


def test_full_phase_sees_everything_writable(sandbox: LocalSandbox, tmp_path: Path) -> None:
    _fill(sandbox, tmp_path)
    result = bash(
        sandbox, "touch /tests/a /solution/a /logs/verifier/a /logs/agent/a", phase="full"
    )
    assert result.returncode == 0, result.stderr


def test_verifier_gets_a_tmp_of_its_own(sandbox: LocalSandbox) -> None:
    bash(sandbox, "mkdir -p /tmp/.local/lib && echo planted > /tmp/marker")
    seen = bash(sandbox, "ls -A /tmp", phase="verifier").stdout.split()
    # Only mount points of a checkout that itself lives under /tmp may show up here.
    assert "marker" not in seen and ".local" not in seen


def test_stop_is_idempotent_and_removes_everything(
    runtime: LocalRuntime, make_task: MakeTask
) -> None:
    sb = runtime.start(make_task(), timeout_s=30)
    proc = sb.spawn(["sleep", "60"])
    sb.stop()
    sb.stop()
    assert proc.poll() is not None
    assert not sb.path.exists() and not is_mountpoint(sb.path)
    assert processes_of_uid(sb.uid) == []
    with pytest.raises(BureauSystemError):
        bash(sb, "true")


def test_bwrap_failure_is_sandbox_crashed_and_stop_still_runs(sandbox: LocalSandbox) -> None:
    with pytest.raises(BureauSystemError) as caught:
        sandbox.exec(["true"], timeout_s=10, cwd="/no/such/folder")
    assert caught.value.kind == SystemErrorKind.sandbox_crashed
    assert "bwrap" in caught.value.message and "/no/such/folder" in caught.value.message
    sandbox.stop()
    assert not sandbox.path.exists()


def test_a_missing_command_is_a_failed_command_not_a_crash(sandbox: LocalSandbox) -> None:
    result = sandbox.exec(["no-such-program"], timeout_s=10)
    assert result.returncode == 127 and "no-such-program" in result.stderr


def test_missing_bubblewrap_is_a_clear_refusal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BureauSystemError) as caught:
        get_runtime("local", root=tmp_path / "sbx")
    assert caught.value.kind == SystemErrorKind.sandbox_unavailable
    assert "bubblewrap" in caught.value.message and "--isolation none" in caught.value.message
    with pytest.raises(BureauSystemError):
        LocalRuntime(tmp_path / "sbx", bwrap=str(tmp_path / "bwrap"))
    assert get_runtime("local", isolation="none", root=tmp_path / "sbx").name == "local-unsafe"


def test_start_past_its_timeout_is_reported_and_cleaned_up(
    runtime: LocalRuntime, make_task: MakeTask
) -> None:
    task = make_task(files={f"f{i}.txt": "x" for i in range(50)})
    with pytest.raises(BureauSystemError) as caught:
        runtime.start(task, timeout_s=0)
    assert caught.value.kind == SystemErrorKind.sandbox_start_timeout
    assert list(runtime.root.iterdir()) == []


def test_a_workdir_on_a_reserved_path_is_refused(
    runtime: LocalRuntime, make_task: MakeTask
) -> None:
    with pytest.raises(BureauSystemError) as caught:
        runtime.start(make_task(workdir="/usr/src/app"), timeout_s=30)
    assert caught.value.kind == SystemErrorKind.sandbox_start_failed


def test_other_workdirs_are_honoured(runtime: LocalRuntime, make_task: MakeTask) -> None:
    sb = runtime.start(make_task(workdir="/home/user/work"), timeout_s=30)
    try:
        result = bash(sb, 'pwd; echo "$BUREAU_WORKSPACE"; cat data.txt')
    finally:
        sb.stop()
    assert result.stdout.split() == ["/home/user/work", "/home/user/work", "hello"]


LEAVER = """
import json, os, signal, sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from sandbox_helpers import SMALL, write_task
from bureau.sandbox.local import LocalRuntime
runtime = LocalRuntime(Path({root!r}), limits=SMALL)
sb = runtime.start(write_task(Path({task!r})), timeout_s=30)
# Wait until the spawned command runs: bwrap arms its parent-death signal only once started.
sb.spawn(["sh", "-c", "echo up; exec sleep 60"]).stdout.readline()
# The stamp goes out with the rest: without `wait`, the exit hook removes the folder (and the
# stamp) as soon as this process ends, which may be before the test reads anything.
stamp = (sb.path / ".owner").read_text()
print(json.dumps({{"path": str(sb.path), "uid": sb.uid, "id": sb.id, "stamp": stamp}}), flush=True)
if {wait!r}:
    time.sleep(60)
"""


@dataclass(frozen=True)
class Left:
    """What the leaver process reports about the sandbox it leaves behind."""

    path: Path
    uid: int
    id: str
    cgroups: list[Path]


def _leaver(tmp_path: Path, *, wait: bool) -> tuple[subprocess.Popen[str], Left]:
    code = LEAVER.format(
        tests=str(Path(__file__).parent),
        root=str(tmp_path / "sbx"),
        task=str(tmp_path / "task"),
        wait=wait,
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    stamp = str(info["stamp"]).splitlines()
    groups = json.loads(next(line for line in stamp if line.startswith("cgroups="))[8:])
    left = Left(Path(info["path"]), int(info["uid"]), str(info["id"]), [Path(g) for g in groups])
    return proc, left


def _wait_no_processes(uid: int) -> None:
    deadline = time.monotonic() + 5
    while processes_of_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_of_uid(uid) == []


def _assert_gone(left: Left) -> None:
    _wait_no_processes(left.uid)
    assert not left.path.exists() and not is_mountpoint(left.path)
    assert not any(group.exists() for group in left.cgroups), left.cgroups


def test_exit_hook_stops_sandboxes_left_running(tmp_path: Path) -> None:
    proc, info = _leaver(tmp_path, wait=False)
    assert proc.wait(timeout=30) == 0
    _assert_gone(info)


def test_sigterm_stops_sandboxes_left_running(tmp_path: Path) -> None:
    proc, info = _leaver(tmp_path, wait=True)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    _assert_gone(info)


def test_after_sigkill_processes_die_and_the_next_runtime_sweeps(tmp_path: Path) -> None:
    proc, info = _leaver(tmp_path, wait=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _wait_no_processes(info.uid)
    assert info.path.exists(), "a SIGKILL leaves the folder behind"
    if cgroups.support().hierarchies():
        assert info.cgroups and all(group.exists() for group in info.cgroups)
    LocalRuntime(tmp_path / "sbx")
    _assert_gone(info)
