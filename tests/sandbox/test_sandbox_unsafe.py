"""`--isolation none`: the same interface, paths passed through environment variables only."""

from __future__ import annotations

from pathlib import Path

from sandbox_helpers import MakeTask

from bureau.sandbox import get_runtime
from bureau.sandbox.unsafe import UnsafeSandbox


def test_plain_command_runs_in_the_workspace_copy(tmp_path: Path, make_task: MakeTask) -> None:
    runtime = get_runtime("local", isolation="none", root=tmp_path / "sbx")
    sb = runtime.start(make_task(), timeout_s=30)
    assert isinstance(sb, UnsafeSandbox)
    try:
        result = sb.exec(
            ["bash", "-c", 'cat data.txt; echo out > "$BUREAU_WORKSPACE/made.txt"; pwd'],
            timeout_s=10,
        )
        made = sb.host_path("/workspace/made.txt").read_text()
    finally:
        sb.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["hello", str(sb.path / "workspace")]
    assert made == "out\n"
    assert not sb.path.exists()


def test_verifier_script_finds_its_folders_through_the_variables(
    tmp_path: Path, make_task: MakeTask
) -> None:
    task = make_task()
    runtime = get_runtime("local", isolation="none", root=tmp_path / "sbx")
    sb = runtime.start(task, timeout_s=30)
    try:
        sb.upload(task.tests_dir, "/tests")
        script = 'bash "$BUREAU_TESTS_DIR/test.sh"'
        result = sb.exec(["bash", "-c", script], timeout_s=10, phase="verifier")
        sb.download("/logs/verifier", tmp_path / "verifier")
    finally:
        sb.stop()
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "verifier" / "reward.txt").read_text() == "1\n"


def test_timeout_kills_the_command(tmp_path: Path, make_task: MakeTask) -> None:
    runtime = get_runtime("local", isolation="none", root=tmp_path / "sbx")
    sb = runtime.start(make_task(), timeout_s=30)
    try:
        result = sb.exec(["sleep", "30"], timeout_s=0.5)
    finally:
        sb.stop()
    assert result.timed_out and result.duration_s < 10
