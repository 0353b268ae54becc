"""The code tools: results, limits, timeouts, and isolation from the server that runs them.

In these tests the "server" is the pytest process itself: it runs the tool functions directly,
exactly as the MCP server's worker thread does. One property per test.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from bureau.tools import code
from bureau.tools.core import FailureKind, ToolFailure, ToolSettings, Workspace
from bureau.tools.runner import _proc_table

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="code runs as its own uid only under root")


def _with(ws: Workspace, **changes: object) -> Workspace:
    return Workspace(ws.root, ws.settings.model_copy(update=changes))


def _alive(marker: str) -> list[int]:
    found = []
    for pid, _, _, state in _proc_table():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(pid)
    return found


def test_result_has_exit_code_stdout_and_stderr(ws: Workspace) -> None:
    out = code.code_run_shell(ws, "echo out; echo err >&2; exit 3")
    head, rest = out.split("\n", 1)
    assert head == f"exit code 3 (cwd {ws.root})"  # no timing: the same run, the same output
    assert rest == "--- stdout ---\nout\n--- stderr ---\nerr"


def test_python_runs_in_the_workspace(ws: Workspace, ws_root: Path) -> None:
    program = "import os\nprint(sorted(os.listdir('.'))[:2])\nopen('out.txt', 'w').write('hi')"
    out = code.code_run_python(ws, program)
    assert "--- stdout ---\n['calendar', 'chat']\n" in out
    assert (ws_root / "out.txt").read_text() == "hi"


@as_root
def test_code_runs_as_its_own_uid_and_can_write_the_workspace(ws: Workspace, ws_root: Path) -> None:
    owner = ws_root.stat().st_uid
    out = code.code_run_shell(
        ws, "id -u; id -G; echo more >> notes/readme.txt; mkdir -p output; stat -c %u output"
    )
    assert "--- stdout ---\n65534\n65534\n65534\n" in out  # the code owned what it made
    assert (ws_root / "notes" / "readme.txt").read_text().endswith("end\nmore\n")
    # ... and after the run the workspace is its owner's again, with what the code made
    for path in (ws_root, ws_root / "output", ws_root / "notes" / "readme.txt"):
        assert path.stat().st_uid == owner


@as_root
def test_files_hard_linked_from_outside_keep_their_owner(ws: Workspace, ws_root: Path) -> None:
    outside = ws_root.parent / "shared.txt"
    outside.write_text("dataset file")
    os.link(outside, ws_root / "linked.txt")
    code.code_run_shell(ws, "true")
    assert outside.stat().st_uid == 0


def test_environment_is_not_inherited(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUREAU_SERVER_SECRET", "s3cret")
    out = code.code_run_shell(ws, "env")
    assert "s3cret" not in out
    assert f"BUREAU_WORKSPACE={ws.real_root()}" in out


@as_root
def test_code_cannot_signal_or_read_the_server(ws: Workspace) -> None:
    pid = os.getpid()
    out = code.code_run_shell(
        ws, f"kill -9 {pid}; cat /proc/{pid}/environ; head -c1 /proc/{pid}/mem; ls /proc/{pid}/fd"
    )
    assert f"kill: ({pid}) - Operation not permitted" in out
    assert f"/proc/{pid}/environ: Permission denied" in out
    assert f"/proc/{pid}/mem' for reading: Permission denied" in out
    assert f"/proc/{pid}/fd': Permission denied" in out


@as_root
def test_code_cannot_ptrace_the_server(ws: Workspace) -> None:
    program = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"print(libc.ptrace(16, {os.getpid()}, 0, 0), ctypes.get_errno())"
    )
    assert "--- stdout ---\n-1 1\n" in code.code_run_python(ws, program)  # EPERM


def test_timeout_kills_the_run_and_reports_output_so_far(ws: Workspace) -> None:
    start = time.monotonic()
    with pytest.raises(ToolFailure) as info:
        code.code_run_shell(ws, "echo started; sleep 30", timeout_s=1)
    assert time.monotonic() - start < 5
    assert info.value.kind == FailureKind.timeout
    assert "did not finish within 1 s" in info.value.message
    assert "--- stdout ---\nstarted" in info.value.message


def test_nothing_outlives_a_run(ws: Workspace) -> None:
    marker = f"{random.randint(100_000, 999_999)}"
    command = f"(setsid sleep {marker}1 &); nohup sleep {marker}2 >/dev/null 2>&1 & echo ok"
    assert "ok" in code.code_run_shell(ws, command)
    assert _alive(f"sleep {marker}") == []
    with pytest.raises(ToolFailure):
        code.code_run_shell(ws, f"(setsid sleep {marker}3 &); sleep {marker}4", timeout_s=1)
    assert _alive(f"sleep {marker}") == []


@as_root
def test_what_a_sweep_out_of_time_left_is_swept_before_the_next_run(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork bomb on a loaded machine can outlast the sweep after its run; what it leaves
    must not hold the code uid's process limit against every later run."""
    from bureau.tools import runner

    marker = f"{random.randint(100_000, 999_999)}"
    monkeypatch.setattr(runner, "SWEEP_S", 0.0)  # the sweep's time is up before it starts
    # The run ends only once the daemon is `sleep` in a session of its own (before setsid it
    # is still in the run's process group, which the run's end kills).
    daemon = (
        f"(setsid sleep {marker}1 >/dev/null 2>&1 &); for _ in $(seq 1000); do "
        f"pgrep -xf 'sleep {marker}1' >/dev/null && break; sleep 0.01; done; echo ok"
    )
    assert "ok" in code.code_run_shell(ws, daemon)
    assert _alive(f"sleep {marker}")  # outside the run's process group: only a sweep ends it
    monkeypatch.setattr(runner, "SWEEP_S", 10.0)
    assert "ok" in code.code_run_shell(ws, "echo ok")
    assert _alive(f"sleep {marker}") == []


def test_memory_is_limited(ws: Workspace) -> None:
    out = code.code_run_python(ws, "b = bytearray(10 * 1024**3)")
    assert out.startswith("exit code 1")
    assert "MemoryError" in out


@as_root
def test_process_count_is_limited(ws: Workspace) -> None:
    program = (
        "import os, time\nn = 0\nfor _ in range(100):\n"
        "    try:\n        pid = os.fork()\n    except BlockingIOError:\n        break\n"
        "    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    n += 1\nprint(n)"
    )
    out = code.code_run_python(_with(ws, code_max_processes=20), program)
    forked = int(out.split("--- stdout ---\n")[1].split("\n")[0])
    assert forked < 20


def test_file_size_is_limited(ws: Workspace, ws_root: Path) -> None:
    out = code.code_run_shell(_with(ws, code_max_file_mb=1), "head -c 5000000 /dev/zero > big.bin")
    assert not out.startswith("exit code 0")
    assert (ws_root / "big.bin").stat().st_size <= 1024 * 1024


def test_long_output_keeps_head_and_tail(ws: Workspace) -> None:
    out = code.code_run_shell(_with(ws, max_output_chars=2000), "seq 1 1000000")
    assert "--- stdout ---\n1\n2\n3\n" in out
    assert " of 6,888,896 bytes cut here ...]\n" in out
    assert "\n1000000\n" in out
    assert out.endswith("999999\n1000000\n--- stderr ---\n(empty)")
    assert len(out) < 2500


def test_same_uid_mode_still_times_out(ws: Workspace) -> None:
    same = _with(ws, code_uid=None)
    assert f"--- stdout ---\n{os.geteuid()}\n" in code.code_run_shell(same, "id -u")
    with pytest.raises(ToolFailure) as info:
        code.code_run_shell(same, "sleep 30", timeout_s=0.5)
    assert info.value.kind == FailureKind.timeout


def test_unreachable_workspace_is_reported(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs a code uid")
    ws = Workspace(tmp_path, ToolSettings())  # pytest's tmp_path sits in a 0700 folder
    with pytest.raises(ToolFailure) as info:
        code.code_run_shell(ws, "true")
    assert info.value.kind == FailureKind.code_runner_failed
    assert "cannot enter" in info.value.message
