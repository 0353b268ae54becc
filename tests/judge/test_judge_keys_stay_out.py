"""The judge's API keys live in the host's environment (or a file there): no command of a
sandbox, in any phase, sees them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from bureau.sandbox.local import LocalRuntime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from sandbox_helpers import write_task

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.mark.parametrize("phase", ["agent", "solution", "verifier"])
def test_no_sandbox_command_sees_the_judge_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    secret = "sk-judge-never-in-a-sandbox-5c1e"
    monkeypatch.setenv("BUREAU_JUDGE_API_KEY", secret)
    keys = tmp_path / "judge-keys"
    keys.write_text(secret + "\n")
    runtime = LocalRuntime(tmp_path / "sbx")
    sandbox = runtime.start(write_task(tmp_path / "task"), timeout_s=30)
    try:
        done = sandbox.exec(
            ["bash", "-c", f"env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; cat {keys}"],
            timeout_s=20,
            phase=phase,  # type: ignore[arg-type]
        )
        assert secret not in done.stdout + done.stderr
        assert "No such file" in done.stderr  # the host's key file is not there either
    finally:
        sandbox.stop()
        runtime.close()
