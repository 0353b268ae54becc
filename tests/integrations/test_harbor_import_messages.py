"""What a user sees when the Harbor plugin cannot import Harbor's parts (no Harbor needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _import_plugin(extra_path: Path | None) -> str:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", "import bureau.integrations.harbor"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0
    return done.stderr.strip().splitlines()[-1]


def test_without_harbor_the_error_says_what_to_install() -> None:
    try:
        import harbor  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Harbor is installed in this environment")
    assert _import_plugin(None) == (
        "ImportError: bureau.integrations.harbor needs Harbor in the same environment "
        "(Python >= 3.12): pip install 'harbor>=0.26,<0.27'"
    )


def test_an_older_harbor_is_named_with_the_module_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "harbor").mkdir()
    (tmp_path / "harbor" / "__init__.py").write_text("")
    info = tmp_path / "harbor-0.25.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: harbor\nVersion: 0.25.0\n")
    message = _import_plugin(tmp_path)
    assert message.startswith(
        "ImportError: bureau.integrations.harbor works with Harbor 0.26.x; this environment "
        "has Harbor 0.25.0, which has no harbor.environments"
    ), message
    assert message.endswith("pip install 'harbor>=0.26,<0.27'")
