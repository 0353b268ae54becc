"""No trial leaves a process or a descriptor behind, whichever way it ends.

`leak_driver.py` runs three rounds of eight real trials (24 in all) in a process of its own that
is a child subreaper, so that whatever bureau orphans lands there, in sight, instead of with the
machine's init. Every agent leaves daemons behind (a double fork, a loop that ignores SIGTERM, a
`setsid` sleeper) through the code tool or through `exec`, and the trials end every way they
can: completed, past the agent's time limit, with the tool server killed under the agent, with
the sandbox stopped under it, and past the verifier's time limit with the verifier's own
daemon. After each round there must be no child of the driver (a zombie or an orphan), no
process of any of the round's sandbox uids, no sandbox folder, and no more descriptors than
after the first round.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def test_trials_that_end_every_way_leave_no_process_and_no_descriptor(tmp_path: Path) -> None:
    driver = Path(__file__).with_name("leak_driver.py")
    done = subprocess.run(
        [sys.executable, str(driver), str(tmp_path), "3"],
        cwd=driver.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    rounds = report["rounds"]
    assert len(rounds) == 3 and sum(r["trials"] for r in rounds) == 24
    for number, result in enumerate(rounds):
        # Each ending happened, so each teardown path ran.
        kinds = Counter(outcome.split(":")[0] for outcome in result["outcomes"])
        assert kinds["agent_timeout"] == 2 and kinds["verifier_timeout"] == 1, result
        assert kinds["completed"] == 3 and kinds.total() == 8, result  # 2: sandbox stopped
        assert result["children"] == {}, f"round {number}: zombies or orphans {result}"
        assert result["sandbox_processes"] == {}, f"round {number}: {result}"
        assert result["sandbox_folders"] == [], f"round {number}: {result}"
    assert rounds[-1]["fds"] <= rounds[0]["fds"], [r["fds"] for r in rounds]
    assert report["children_after_close"] == {}, report
