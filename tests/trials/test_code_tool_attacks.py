"""Attacks through the code tool, end to end: tool server in a bubblewrap sandbox, over MCP.

One property per test. Each asserts that the attack is contained (the host is untouched), that
it is reported to the model (a tool error, a failing exit code or a timeout), and that another
trial's sandbox keeps working. `tests/sandbox/test_sandbox_attacks.py` runs the same attacks
through plain `exec`, the way a solve.sh would.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bureau.sandbox import get_runtime
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.mcp_link import ToolLink, open_tool_link

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
T = TypeVar("T")


class Loop:
    """One event loop for the module: tool links belong to the loop that opened them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _task(root: Path) -> TaskDir:
    path = root / "task"
    (path / "environment" / "workspace").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "environment" / "workspace" / "notes.txt").write_text("hello\n")
    (path / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (path / "instruction.md").write_text("x\n")
    (path / "tests" / "test.sh").write_text("#!/bin/bash\n")
    (path / "task.toml").write_text("[environment]\nstorage_mb = 64\nmemory_mb = 1024\n")
    return load_task_dir(path)


class Trial:
    def __init__(self, runtime: Any, task: TaskDir, loop: Loop) -> None:
        self.sandbox = runtime.start(task, timeout_s=60)
        self.loop = loop
        self.link: ToolLink = loop.run(open_tool_link(self.sandbox, timeout_s=60))

    def code(self, kind: str, source: str, timeout_s: float = 10) -> str:
        """The tool result's text; a dead server raises BureauSystemError."""
        name, key = ("code_run_python", "code") if kind == "py" else ("code_run_shell", "command")

        async def call() -> str:
            result = await self.link.call(name, {key: source, "timeout_s": timeout_s}, 60)
            return "\n".join(getattr(c, "text", "") for c in result.content)

        return self.loop.run(call())

    def close(self) -> None:
        self.loop.run(self.link.close())
        self.sandbox.stop()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("attacks")
    runtime = get_runtime("local", root=root / "sandboxes")
    task = _task(root)
    loop = Loop()
    victim, bystander = Trial(runtime, task, loop), Trial(runtime, task, loop)
    yield {
        "victim": victim,
        "bystander": bystander,
        "root": root,
        "runtime": runtime,
        "task": task,
        "loop": loop,
    }
    for trial in (victim, bystander):
        trial.close()
    runtime.close()
    loop.close()


def bystander_ok(env: dict[str, Any]) -> None:
    assert "42" in env["bystander"].code("py", "print(6 * 7)")


def test_cannot_read_host_shadow(env: dict[str, Any]) -> None:
    out = env["victim"].code("py", "print(open('/etc/shadow').read())")
    assert "No such file" in out and "root:" not in out
    bystander_ok(env)


def test_cannot_read_the_users_home(env: dict[str, Any]) -> None:
    secret = Path.home() / f".bureau-attack-{id(env)}"
    secret.write_text("top secret")
    try:
        out = env["victim"].code("sh", f"cat {secret}; ls -a {Path.home()}")
        assert "top secret" not in out
    finally:
        secret.unlink()


def test_cannot_write_outside_the_workspace(env: dict[str, Any]) -> None:
    out = env["victim"].code("sh", "echo x > /usr/pwned; echo x > /etc/pwned; echo x > /pwned")
    assert "Read-only file system" in out or "Permission denied" in out
    assert not Path("/usr/pwned").exists() and not Path("/etc/pwned").exists()


def test_symlink_out_of_the_workspace_leads_nowhere(env: dict[str, Any]) -> None:
    host_secret = env["root"] / "host-secret.txt"
    host_secret.write_text("host only")
    code = f"import os; os.symlink({str(host_secret)!r}, 'link'); print(open('link').read())"
    out = env["victim"].code("py", code)
    assert "host only" not in out and "No such file" in out


def test_no_tcp_to_the_hosts_loopback(env: dict[str, Any]) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        out = env["victim"].code("py", code)
        assert "Error" in out  # ConnectionRefusedError or a network-unreachable OSError
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_no_dns(env: dict[str, Any]) -> None:
    out = env["victim"].code("py", "import socket; print(socket.getaddrinfo('pypi.org', 443))")
    assert "gaierror" in out


def test_fork_bomb_is_contained(env: dict[str, Any]) -> None:
    out = env["victim"].code("sh", "bomb() { bomb | bomb & }; bomb", timeout_s=3)
    assert out  # reported: a timeout or "Resource temporarily unavailable"
    bystander_ok(env)
    assert "ok" in env["victim"].code("sh", "sleep 1; echo ok")  # the victim recovers too


def test_ten_gigabytes_are_refused(env: dict[str, Any]) -> None:
    out = env["victim"].code("py", "b = bytearray(10 * 2**30)")
    assert "MemoryError" in out
    bystander_ok(env)


def test_many_memory_hogs_are_killed_and_the_tool_server_lives(env: dict[str, Any]) -> None:
    """Eight processes of 300 MiB are 2.4 GiB against memory_mb = 1024: the memory watch
    kills the agent's code (its largest first), never the tool server that ran it, so the
    trial goes on as the agent's own failure."""
    hog = "import time; held = [b'x' * (10 << 20) for _ in range(30)]; time.sleep(2)"
    script = f'for i in $(seq 8); do python3 -c "{hog}" & done; wait; echo finished'
    out = env["victim"].code("sh", script, timeout_s=30)
    assert "finished" in out and out.count("Killed") >= 5, out
    assert "2" in env["victim"].code("py", "print(1 + 1)")  # the same server answers
    bystander_ok(env)


def test_filling_the_disk_stops_at_the_storage_limit(env: dict[str, Any]) -> None:
    code = "dd if=/dev/zero of=big bs=1M count=500; ls -l big; rm -f big"
    out = env["victim"].code("sh", code, timeout_s=20)
    assert "No space left" in out or "File size limit" in out or "storage" in out
    assert shutil.disk_usage("/").free > 2**30


SYSV_SEGMENT = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
sid = libc.shmget(0, 16 << 20, 0o1600)
if sid < 0:
    print("refused", ctypes.get_errno())
else:
    ctypes.memset(libc.shmat(sid, None, 0), 1, 16 << 20)
    print("kept")
"""


def test_shared_memory_does_not_pile_up_across_code_runs(env: dict[str, Any]) -> None:
    # Segments outlive the run that made them (the tool server's ipc namespace lives on), so
    # they count together against the sandbox's storage limit (64 MiB here).
    trial = Trial(env["runtime"], env["task"], env["loop"])
    try:
        outs = [trial.code("py", SYSV_SEGMENT) for _ in range(8)]
        kept = sum("kept" in out for out in outs)
        assert kept == 4 and "refused" in outs[-1], outs
    finally:
        trial.close()
    bystander_ok(env)


def test_memfd_is_not_available_to_agent_code(env: dict[str, Any]) -> None:
    out = env["victim"].code("py", "import os\nos.memfd_create('x')")
    assert "Function not implemented" in out
    bystander_ok(env)


def test_cpu_spin_is_stopped_at_the_timeout(env: dict[str, Any]) -> None:
    out = env["victim"].code("py", "while True: pass", timeout_s=2)
    assert "timed out" in out.lower() or "timeout" in out.lower()
    bystander_ok(env)


def test_code_cannot_kill_or_read_its_tool_server(env: dict[str, Any]) -> None:
    trial = Trial(env["runtime"], env["task"], env["loop"])
    try:
        out = trial.code("sh", "kill -9 $PPID; kill -9 -1; cat /proc/$PPID/environ", timeout_s=3)
        assert "Operation not permitted" in out or "No such process" in out
        assert "BUREAU_" not in out  # the server's environment stays unreadable
        assert "2" in trial.code("py", "print(1 + 1)")  # the server is still there
    finally:
        trial.close()
    bystander_ok(env)


def test_other_trials_are_invisible_in_proc(env: dict[str, Any]) -> None:
    env["bystander"].code("sh", "(sleep 30 &) ; echo started", timeout_s=5)
    out = env["victim"].code("sh", "ps -eo pid,args 2>/dev/null || ls /proc | head -50")
    assert "sleep 30" not in out
    bystander_ok(env)


def test_verifier_folder_is_out_of_reach_while_the_agent_runs(env: dict[str, Any]) -> None:
    out = env["victim"].code("sh", "echo 1 > /logs/verifier/reward.txt; ls /logs /tests")
    assert "reward.txt" not in out.split("ls")[-1]
    assert not (env["victim"].sandbox.host_path("/logs/verifier") / "reward.txt").exists()


def test_the_code_tool_has_the_environment_the_instruction_promises(env: dict[str, Any]) -> None:
    """python3 in a shell is the one with the document libraries; the code's uid has a /tmp
    and a /dev/shm; after a run, the agent's own commands can still write the workspace,
    including what the code made."""
    trial = env["bystander"]
    out = trial.code(
        "sh",
        "python3 -c 'import openpyxl, pandas, docx, pptx, pypdf; print(\"libraries ok\")'; "
        "echo a > /tmp/code.txt && echo b > /dev/shm/shm.txt && cat /tmp/code.txt; "
        "mkdir -p made && echo c > made/by-code.txt",
    )
    assert "libraries ok" in out and "\na\n" in out and "exit code 0" in out, out
    done = trial.sandbox.exec(
        ["sh", "-c", "echo d > /workspace/after.txt && echo e >> /workspace/made/by-code.txt "
         "&& rm /workspace/made/by-code.txt && echo agent ok"],
        timeout_s=20,
    )  # fmt: skip
    assert done.returncode == 0 and "agent ok" in done.stdout, done
    assert "d" in trial.code("py", "print(open('after.txt').read())")  # and the code again
