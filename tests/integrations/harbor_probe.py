"""Drives BubblewrapEnvironment directly through Harbor's BaseEnvironment API, one feature each.

Runs in the Harbor venv (Python >= 3.12), not under pytest: `python harbor_probe.py TASK_DIR OUT`
starts the environment on TASK_DIR (a task with `workdir = "/app"` and no network) and writes a
JSON object to OUT with what each probe observed; the interop test asserts on it. Probing here
rather than through `harbor run` keeps each feature separate and avoids Harbor's 10 s CLI start.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harbor.models.task.config import NetworkMode, NetworkPolicy
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths

from bureau.integrations.harbor import BubblewrapEnvironment

NO_NETWORK = (
    "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\""
    " 2>/dev/null && echo connected || echo refused"
)


async def probe(task_dir: Path, scratch: Path) -> dict[str, Any]:
    task = Task(task_dir)
    trial_paths = TrialPaths(scratch / "trial")
    trial_paths.mkdir()
    env = BubblewrapEnvironment(
        environment_dir=task.paths.environment_dir,
        environment_name="probe",
        session_id="probe__env",
        trial_paths=trial_paths,
        task_env_config=task.config.environment,
        network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK),
    )
    seen: dict[str, Any] = {"type": env.type()}
    started = time.perf_counter()
    await env.start(force_build=False)
    seen["start_s"] = round(time.perf_counter() - started, 3)
    try:
        result = await env.exec("pwd; echo out; echo err >&2; exit 3")
        seen["exec"] = [result.stdout, result.stderr, result.return_code]
        result = await env.exec('echo "$GREETING"', env={"GREETING": "hi there"})
        seen["env"] = result.stdout
        result = await env.exec("pwd", cwd="/tmp")
        seen["cwd"] = result.stdout
        seen["network"] = (await env.exec(NO_NETWORK)).stdout

        host_file = scratch / "note.txt"
        host_file.write_text("uploaded\n")
        await env.upload_file(host_file, "/app/in/note.txt")
        # The agent tries to plant files where the verifier will run and read.
        planted = await env.exec(
            "echo forged > /tests/test.sh; echo agent > /tmp/agent-note; "
            "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt; "
            "test -e /tests && echo tests-visible; test -e /logs/verifier && echo logs-visible"
        )
        seen["agent_sees"] = planted.stdout
        # Harbor's verifier: upload /tests, run the tests, download /logs/verifier.
        folder = scratch / "folder"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "a.txt").write_text("a\n")
        (folder / "test.sh").write_text("#!/bin/bash\necho verifier ran\n")
        await env.upload_dir(folder, "/tests")
        listing = await env.exec("cat /app/in/note.txt /tests/sub/a.txt")
        seen["upload"] = listing.stdout
        seen["verifier_sees"] = (
            await env.exec("ls -A /tmp /tests /logs/verifier; /tests/test.sh; touch /tests/x")
        ).stdout
        seen["is_dir"] = [await env.is_dir("/tests/sub"), await env.is_file("/tests/sub/a.txt")]
        await env.exec("mkdir -p /logs/verifier/deep && echo 0.5 > /logs/verifier/deep/r.txt")
        await env.exec("echo x > /logs/verifier/keep.txt && echo y > /logs/verifier/drop.log")
        await env.download_dir_filtered(
            source_dir="/logs/verifier", target_dir=scratch / "filtered", include=["*.txt"]
        )
        await env.download_dir_with_exclusions(
            source_dir="/logs/verifier", target_dir=scratch / "excluded", exclude=["deep"]
        )
        await env.download_dir("/logs/verifier", scratch / "down")
        await env.download_file("/app/in/note.txt", scratch / "down-file" / "note.txt")
        seen["download"] = [
            (scratch / "down" / "deep" / "r.txt").read_text(),
            (scratch / "down-file" / "note.txt").read_text(),
        ]
        seen["filtered"] = [
            sorted(p.relative_to(scratch / d).as_posix() for p in (scratch / d).rglob("*.*"))
            for d in ("filtered", "excluded")
        ]
        # The download of /logs/verifier ends verification: the agent's phase again.
        seen["after_verification"] = (
            await env.exec("cat /tmp/agent-note; test -e /tests && echo tests-visible")
        ).stdout

        started = time.perf_counter()
        try:
            await env.exec("sleep 30", timeout_sec=1)
            seen["timeout"] = "no error"
        except RuntimeError as exc:
            seen["timeout"] = str(exc)
        seen["timeout_s"] = round(time.perf_counter() - started, 3)

        # A background child lives as long as its command (the control for the next probe).
        await env.exec("(sleep 0.2; touch /app/early.txt) & sleep 1")
        seen["early_file"] = (await env.exec("test -e /app/early.txt")).return_code == 0

        # A caller's cancellation (Harbor's phase timeouts) must kill what the command started:
        # the background writer below would otherwise create /app/late.txt two seconds later.
        started = time.perf_counter()
        try:
            await asyncio.wait_for(env.exec("(sleep 2; touch /app/late.txt) & sleep 30"), 1)
            seen["cancel"] = "no timeout"
        except TimeoutError:
            seen["cancel"] = "timed out"
        seen["cancel_s"] = round(time.perf_counter() - started, 3)
        await asyncio.sleep(3)
        seen["late_file"] = (await env.exec("test -e /app/late.txt")).return_code == 0

        many = await asyncio.gather(*(env.exec(f"echo {i}") for i in range(8)))
        seen["concurrent"] = [r.stdout for r in many]
    finally:
        await env.stop(delete=True)
        await env.stop(delete=True)  # idempotent
    try:
        await env.exec("true")
        seen["after_stop"] = "ran"
    except RuntimeError as exc:
        seen["after_stop"] = str(exc)
    return seen


def main() -> None:
    task_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="harbor-probe-") as scratch:
        seen = asyncio.run(probe(task_dir, Path(scratch)))
    out.write_text(json.dumps(seen, indent=2) + "\n")


if __name__ == "__main__":
    main()
