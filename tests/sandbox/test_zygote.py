"""The tool-server zygote: a forked server is the process an exec would have started.

Each test starts the real tool server (`python3 -P -m bureau.tools`) in a bubblewrap sandbox,
once forked by the runtime's zygote and once executed the usual way, and reads both from the
host's /proc: identity, capabilities, no_new_privs, seccomp, rlimits, namespaces, cgroups, the
root it sees and its working directory must be the same. (/proc/PID/environ of a forked server
shows the zygote's start-up environment, which exec would have replaced; the server's own
`os.environ` is the sandbox's.)
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import SMALL, MakeTask

from bureau.sandbox.local import LocalRuntime, LocalSandbox
from bureau.trials.mcp_link import tool_server_cmd

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the zygote joins namespaces, which needs root"),
]

STATUS_FIELDS = (
    "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
    "Seccomp", "Seccomp_filters",
)  # fmt: skip
NAMESPACES = ("mnt", "pid", "net", "ipc", "uts")
SERVER = tool_server_cmd(["filesystem"])


@pytest.fixture
def runtimes(tmp_path: Path) -> Iterator[tuple[LocalRuntime, LocalRuntime]]:
    forked = LocalRuntime(tmp_path / "forked", limits=SMALL, zygote=True)
    execed = LocalRuntime(tmp_path / "execed", limits=SMALL, zygote=False)
    yield forked, execed
    forked.close()
    execed.close()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _ns(pid: int, name: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{name}")


def _server_pid(proc: subprocess.Popen[bytes], uid: int, timeout_s: float = 30) -> int:
    """The Python process of the sandbox that `proc` (bwrap) started: in the pid namespace of
    bwrap's child (the command's pid 1), running as the sandbox's uid; an exec'd server is that
    pid 1 itself."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        inits = _children(proc.pid)
        if inits:
            pidns = _ns(inits[0], "pid")
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    same = _ns(int(entry.name), "pid") == pidns
                    status = (entry / "status").read_text()
                except OSError:
                    continue
                python = re.search(r"^Name:\s*python", status, re.M) is not None
                if same and python and f"Uid:\t{uid}\t" in status:
                    return int(entry.name)
        time.sleep(0.05)
    raise AssertionError("no server process found")


def _read(path: str) -> str:
    return Path(path).read_text()


def _alive(pid: int) -> bool:
    """Running, not gone and not a zombie waiting for whoever reaps it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _status(pid: int) -> dict[str, str]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {k: fields[k].strip() for k in STATUS_FIELDS}


def _profile(sandbox: LocalSandbox, proc: subprocess.Popen[bytes]) -> dict[str, object]:
    pid = _server_pid(proc, sandbox.uid)
    init = _children(proc.pid)[0]
    return {
        "status": _status(pid),
        "limits": Path(f"/proc/{pid}/limits").read_text(),
        "namespaces": [_ns(pid, n) == _ns(init, n) for n in NAMESPACES],
        "cgroups": _read(f"/proc/{pid}/cgroup") == _read(f"/proc/{init}/cgroup"),
        "root": sorted(os.listdir(f"/proc/{pid}/root")),
        "cwd": os.readlink(f"/proc/{pid}/cwd"),
        # Its own session, apart from the host's and the zygote's (an exec'd server shares
        # the session of bwrap's init; a forked one leads a session of its own).
        "session": os.getsid(pid) not in (os.getsid(0), os.getsid(proc.pid)),
    }


def test_a_forked_server_is_the_process_an_exec_would_start(
    runtimes: tuple[LocalRuntime, LocalRuntime], make_task: MakeTask
) -> None:
    profiles = []
    for runtime in runtimes:
        sandbox = runtime.start(make_task(files={"a.txt": "x"}), timeout_s=30)
        try:
            proc = sandbox.spawn(SERVER, tool_server=True)
            profiles.append(_profile(sandbox, proc))
        finally:
            sandbox.stop()
    forked, execed = profiles
    assert forked["namespaces"] == [True] * len(NAMESPACES)
    assert forked["cwd"] == "/"  # not the workspace, where the agent writes
    uid = forked["status"]["Uid"].split()[0]  # type: ignore[index]
    assert int(uid) >= 1_000_000  # the sandbox's own uid, not root
    assert forked["status"]["CapEff"] != "0000000000000000"  # type: ignore[index]
    # Same uids aside (each sandbox leases its own), the two are the same process.
    for profile in profiles:
        status = profile["status"]
        assert isinstance(status, dict)
        for key in ("Uid", "Gid", "Groups"):
            status[key] = re.sub(r"\d{7}", "UID", status[key])
    assert forked == execed


def test_a_server_forked_from_a_host_with_secrets_carries_none(
    tmp_path: Path, make_task: MakeTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", "sk-do-not-leak")
    runtime = LocalRuntime(tmp_path / "sbx", limits=SMALL, zygote=True)
    sandbox = runtime.start(make_task(), timeout_s=30)
    try:
        proc = sandbox.spawn(SERVER, tool_server=True)
        pid = _server_pid(proc, sandbox.uid)
        assert b"sk-do-not-leak" not in Path(f"/proc/{pid}/environ").read_bytes()
        zygote = runtime.zygote_for("bureau.tools")._proc
        assert zygote is not None
        environ = Path(f"/proc/{zygote.pid}/environ").read_bytes().split(b"\0")
        names = {e.split(b"=")[0] for e in environ if e}
        assert names == {b"PATH", b"LANG", b"HOME", b"PYTHONNOUSERSITE", b"PYTHONDONTWRITEBYTECODE"}
        # The server keeps nothing the zygote holds open (its socket to the host, its signal
        # pipe): once running, it has its stdio, the holder's pipe and what its event loop
        # opened itself.
        server = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        zygote_fds = os.listdir(f"/proc/{zygote.pid}/fd")
        held = {os.readlink(f"/proc/{zygote.pid}/fd/{fd}") for fd in zygote_fds}
        assert not (server & held - {"/dev/null"}), server & held
    finally:
        sandbox.stop()
        runtime.close()


@pytest.fixture
def forked(
    runtimes: tuple[LocalRuntime, LocalRuntime], make_task: MakeTask
) -> Iterator[tuple[LocalRuntime, LocalSandbox]]:
    """A sandbox of the runtime that forks its tool servers."""
    sandbox = runtimes[0].start(make_task(), timeout_s=30)
    yield runtimes[0], sandbox
    sandbox.stop()


def test_the_sandbox_ends_when_its_server_ends_and_the_server_dies_with_it(
    forked: tuple[LocalRuntime, LocalSandbox],
) -> None:
    _, sandbox = forked
    proc = sandbox.spawn(SERVER, tool_server=True)
    assert proc.stdin is not None
    proc.stdin.close()  # MCP over stdio: end of input ends the server
    assert proc.wait(timeout=30) is not None
    proc = sandbox.spawn(SERVER, tool_server=True)
    pid = _server_pid(proc, sandbox.uid)
    proc.kill()  # the host kills the sandbox's bwrap
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_a_dead_zygote_is_started_again(forked: tuple[LocalRuntime, LocalSandbox]) -> None:
    runtime, sandbox = forked
    first = sandbox.spawn(SERVER, tool_server=True)
    zygote = runtime.zygote_for("bureau.tools")._proc
    assert zygote is not None
    os.kill(zygote.pid, signal.SIGKILL)
    zygote.wait()
    second = sandbox.spawn(SERVER, tool_server=True)
    assert _server_pid(second, sandbox.uid)
    assert first.poll() is None  # a server outlives the zygote that forked it
