"""Adversarial tests of the local runtime: one attack per test, run as solve.sh or agent code.

Every test asserts three things: the attack is contained (the forbidden thing did not happen
on the host), it is reported (non-zero exit, an error message, or a timeout), and the host and
other trials are unaffected (`assert_unaffected`: the host still starts processes and a
bystander sandbox still runs a command). Limits are small (see `sandbox_helpers.SMALL`), so each
attack ends in seconds.
"""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import MakeTask, assert_unaffected, bash, python

from bureau.errors import BureauSystemError
from bureau.sandbox import cgroups
from bureau.sandbox.base import ExecResult, Limits
from bureau.sandbox.limits import MIB, is_mountpoint, processes_of_uid
from bureau.sandbox.local import LocalRuntime, LocalSandbox


@pytest.fixture
def home_secret() -> Iterator[Path]:
    """A secret file in the user's home (not under the test's tmp dir)."""
    folder = Path(tempfile.mkdtemp(prefix=".bureau-attack-", dir=Path.home()))
    (folder / "secret.txt").write_text("home-secret-7f3a\n")
    yield folder / "secret.txt"
    shutil.rmtree(folder)


def test_cannot_read_host_shadow(sandbox: LocalSandbox, bystander: LocalSandbox) -> None:
    result = bash(sandbox, "cat /etc/shadow; ls /etc")
    assert result.returncode == 0, "ls ran, so the exit code is the listing's"
    assert "No such file" in result.stderr
    assert "shadow" not in result.stdout and "root:" not in result.stdout
    assert_unaffected(bystander)


def test_cannot_read_user_home_or_host_tmp(
    sandbox: LocalSandbox, bystander: LocalSandbox, home_secret: Path, tmp_path: Path
) -> None:
    host_tmp_secret = tmp_path / "tmp-secret.txt"
    host_tmp_secret.write_text("tmp-secret-91c2\n")
    result = bash(sandbox, f"cat {home_secret} {host_tmp_secret}; ls -A /root")
    assert "No such file" in result.stderr
    assert "secret" not in result.stdout
    assert result.stdout.split() == [".pyenv"], "only the Python installation is under /root"
    assert_unaffected(bystander)


@pytest.mark.parametrize(
    "target", ["/etc/passwd", "/usr/bin/evil", "/evil", "/logs/evil", "/root/evil", "VENV"]
)
def test_cannot_write_outside_workspace(
    sandbox: LocalSandbox, bystander: LocalSandbox, tmp_path: Path, target: str
) -> None:
    if target == "VENV":
        import sys

        target = f"{sys.prefix}/evil"
    before = Path(target).read_bytes() if Path(target).is_file() else None
    result = bash(sandbox, f"echo pwned > {target}")
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr
    after = Path(target).read_bytes() if Path(target).is_file() else None
    assert before == after
    assert_unaffected(bystander)


def test_symlink_out_of_workspace_leads_nowhere(
    runtime: LocalRuntime, make_task: MakeTask, bystander: LocalSandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("outside-secret-55d1\n")
    task = make_task()
    (task.workspace_dir / "shipped-link").symlink_to(secret)
    sb = runtime.start(task, timeout_s=30)
    try:
        result = bash(sb, f"ln -s {secret} made-link; cat made-link; cat shipped-link")
    finally:
        sb.stop()
    assert result.returncode != 0 and result.stderr.count("No such file") == 2
    assert "outside-secret" not in result.stdout
    assert_unaffected(bystander)


def test_download_does_not_follow_a_planted_symlink(
    sandbox: LocalSandbox, bystander: LocalSandbox, home_secret: Path, tmp_path: Path
) -> None:
    result = bash(sandbox, f"mkdir out && ln -s {home_secret} out/leak && echo ok > out/real")
    assert result.returncode == 0
    sandbox.download("/workspace/out", tmp_path / "got")
    assert sorted(p.name for p in (tmp_path / "got").iterdir()) == ["real"]
    with pytest.raises(BureauSystemError, match="not a regular file"):
        sandbox.download("/workspace/out/leak", tmp_path / "leak.txt")
    assert not (tmp_path / "leak.txt").exists()
    assert_unaffected(bystander)


def test_upload_does_not_follow_a_planted_symlink(
    sandbox: LocalSandbox, bystander: LocalSandbox, tmp_path: Path
) -> None:
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    assert bash(sandbox, f"ln -s {host_dir} trap").returncode == 0
    (tmp_path / "payload.txt").write_text("payload")
    sandbox.upload(tmp_path / "payload.txt", "/workspace/trap/payload.txt")
    assert list(host_dir.iterdir()) == [], "nothing was written through the symlink"
    assert bash(sandbox, "cat trap/payload.txt").stdout == "payload"
    assert_unaffected(bystander)


def test_cannot_connect_to_a_host_loopback_server(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        result = python(sandbox, code)
        curl = bash(sandbox, f"exec 3<>/dev/tcp/127.0.0.1/{port}")
    finally:
        stop.set()
        thread.join()
        server.close()
    assert result.returncode != 0 and "ConnectionRefusedError" in result.stderr
    assert curl.returncode != 0
    assert accepted == []
    assert_unaffected(bystander)


def test_cannot_resolve_dns(sandbox: LocalSandbox, bystander: LocalSandbox) -> None:
    result = python(sandbox, "import socket; print(socket.getaddrinfo('example.com', 443))")
    assert result.returncode != 0 and "gaierror" in result.stderr
    assert result.stdout == ""
    assert_unaffected(bystander)


def test_fork_bomb_is_bounded(sandbox: LocalSandbox, bystander: LocalSandbox) -> None:
    results: list[ExecResult] = []

    def bomb() -> None:
        results.append(bash(sandbox, ":(){ :|:& };:; sleep 60", timeout_s=3))

    thread = threading.Thread(target=bomb)
    thread.start()
    time.sleep(1.0)
    assert_unaffected(bystander)  # while the bomb is going off
    thread.join(timeout=30)
    (result,) = results
    assert result.timed_out and result.duration_s < 15
    assert "Resource temporarily unavailable" in result.stderr
    assert processes_of_uid(sandbox.uid) == []
    assert bash(sandbox, "echo still-usable").stdout == "still-usable\n"


def test_allocating_10_gb_fails(sandbox: LocalSandbox, bystander: LocalSandbox) -> None:
    result = python(sandbox, "b = bytearray(10 * 2**30); print('allocated')")
    assert result.returncode != 0 and "MemoryError" in result.stderr
    assert "allocated" not in result.stdout
    assert_unaffected(bystander)


def test_filling_the_disk_stops_at_the_storage_limit(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    result = bash(
        sandbox, "for i in 1 2 3 4; do head -c 30000000 /dev/zero > fill$i || exit 1; done"
    )
    assert result.returncode != 0 and "No space left on device" in result.stderr
    written = sum(f.stat().st_size for f in sandbox.host_path("/workspace").glob("fill*"))
    assert written <= 64 * MIB
    assert is_mountpoint(sandbox.path), "the trial's files live in its own size-capped tmpfs"
    assert_unaffected(bystander)


def test_storage_limit_holds_without_tmpfs(
    tmp_path: Path, make_task: MakeTask, bystander: LocalSandbox
) -> None:
    limits = Limits(storage_mb=16, max_file_mb=8, max_processes=64, memory_mb=1024)
    runtime = LocalRuntime(tmp_path / "watched", limits=limits, storage="watch")
    sb = runtime.start(make_task(), timeout_s=30)
    try:
        script = "i=0; while :; do i=$((i+1)); head -c 4000000 /dev/zero > f$i; sleep 0.05; done"
        result = bash(sb, script, timeout_s=20)
        used = sum(f.stat().st_size for f in sb.host_path("/workspace").glob("f*"))
    finally:
        sb.stop()
    assert not result.timed_out and result.returncode != 0
    assert "storage limit of 16 MiB exceeded" in result.stderr
    assert used < 64 * MIB
    assert_unaffected(bystander)


def test_cannot_escape_limits_through_a_user_namespace(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    attack = "unshare -Urm sh -c 'mount -t tmpfs none /tmp && head -c 20000000 /dev/zero > /tmp/a'"
    result = bash(sandbox, attack)
    raw = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
    raw += "print(libc.unshare(0x10000000), ctypes.get_errno())"  # CLONE_NEWUSER
    syscall = python(sandbox, raw)
    assert result.returncode != 0 and "Operation not permitted" in result.stderr
    assert syscall.stdout.split() == ["-1", str(errno.EPERM)]
    assert_unaffected(bystander)


def test_one_huge_file_hits_the_file_size_limit(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    result = bash(sandbox, "head -c 40000000 /dev/zero > /tmp/big")
    assert result.returncode != 0 and "File size limit exceeded" in result.stderr
    assert sandbox.host_path("/workspace").parent.exists()
    assert_unaffected(bystander)


def test_cpu_spin_past_the_timeout_is_killed(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    result = python(sandbox, "while True: pass", timeout_s=1.5)
    assert result.timed_out and result.duration_s < 8
    assert processes_of_uid(sandbox.uid) == []
    assert_unaffected(bystander)


def test_background_processes_do_not_outlive_their_command(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    result = bash(sandbox, "(setsid nohup sleep 300 >/dev/null 2>&1 &); sleep 300 & disown; exit 7")
    assert result.returncode == 7
    # When exec returns, bwrap has reaped the command's pid 1, which the kernel lets go only
    # once everything in its namespace is gone: nothing to wait for.
    assert processes_of_uid(sandbox.uid) == []
    assert_unaffected(bystander)


def test_killing_the_parent_process_is_contained(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    server = sandbox.spawn(["sleep", "30"])
    try:
        parent = python(sandbox, "import os, signal; os.kill(os.getppid(), signal.SIGKILL)")
        everyone = bash(sandbox, "kill -9 1; kill -9 -1; echo survived")
        assert parent.returncode != 0 and "PermissionError" in parent.stderr
        # pid 1 is bwrap's init (root), and kill(-1) reaches only this command's namespace.
        assert "Operation not permitted" in everyone.stderr
        assert "No such process" in everyone.stderr
        assert server.poll() is None, "a process in another command of the sandbox survives"
        assert bash(sandbox, "echo next").stdout == "next\n"
    finally:
        server.kill()
        server.wait()
    assert_unaffected(bystander)


def test_cannot_see_another_trial_through_proc(
    runtime: LocalRuntime, make_task: MakeTask, bystander: LocalSandbox
) -> None:
    victim = runtime.start(make_task(files={"victim.txt": "victim-secret-a1b2\n"}), timeout_s=30)
    attacker = runtime.start(make_task(), timeout_s=30)
    sleeper = victim.spawn(["sleep", "31.5"])
    try:
        victim_file = victim.host_path("/workspace/victim.txt")
        scan = (
            "import glob\n"
            "for f in glob.glob('/proc/[0-9]*/cmdline'):\n"
            "    print(open(f, 'rb').read())\n"
            f"print(open('/proc/{sleeper.pid}/root/workspace/victim.txt').read())\n"
        )
        result = python(attacker, scan)
        direct = bash(attacker, f"cat {victim_file}")
        assert result.returncode != 0 and "FileNotFoundError" in result.stderr
        assert b"31.5" not in result.stdout.encode() and "victim-secret" not in result.stdout
        assert direct.returncode != 0 and "victim-secret" not in direct.stdout
        assert sleeper.poll() is None, "the victim's process is untouched"
        assert bash(victim, "cat victim.txt").stdout == "victim-secret-a1b2\n"
    finally:
        sleeper.kill()
        sleeper.wait()
        victim.stop()
        attacker.stop()
    assert_unaffected(bystander)


def test_agent_cannot_tamper_with_verifier_logs(
    sandbox: LocalSandbox, bystander: LocalSandbox
) -> None:
    attack = (
        "mkdir -p /logs/verifier; echo '{\"reward\": 1}' > /logs/verifier/reward.json; "
        "echo 1 > /logs/verifier/reward.txt"
    )
    tamper = bash(sandbox, attack)
    lingering = sandbox.spawn(["bash", "-c", "while :; do echo 1 > /logs/verifier/r.txt; done"])
    seen = bash(sandbox, "ls -A /logs/verifier; ls /tests", phase="verifier")
    assert tamper.returncode != 0 and "Read-only file system" in tamper.stderr
    assert seen.returncode == 0 and seen.stdout == ""
    assert list(sandbox.host_path("/logs/verifier").iterdir()) == []
    assert lingering.poll() is not None, "agent processes are ended before the verifier runs"
    assert_unaffected(bystander)


def test_cannot_gain_privileges(sandbox: LocalSandbox, bystander: LocalSandbox) -> None:
    code = (
        "import os\n"
        "status = open('/proc/self/status').read()\n"
        "print(os.getuid(), 'CapEff:\\t0000000000000000' in status, 'NoNewPrivs:\\t1' in status)\n"
        "for path in ('/proc/sys/kernel/hostname', '/proc/sysrq-trigger'):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "        print('opened', path)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    result = python(sandbox, code)
    uid, no_caps, no_new_privs, *opens = result.stdout.split()
    assert int(uid) == sandbox.uid != 0
    assert no_caps == no_new_privs == "True"
    assert all(line in ("PermissionError", "FileNotFoundError") for line in opens), opens
    su = bash(sandbox, "su -c id root </dev/null")
    assert su.returncode != 0
    assert subprocess.run(["true"]).returncode == 0
    assert_unaffected(bystander)


@pytest.fixture
def checkout_under_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A source folder on the sandboxed interpreters' import path that lives under /tmp, as
    an editable install in a CI clone under /tmp puts it: the sandbox binds it again over its
    private /tmp (`shadowed_args`)."""
    import bureau.sandbox.bwrap as bwrap

    root = Path(tempfile.mkdtemp(prefix="bureau-co-", dir="/tmp"))
    package = root / "main" / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 'host'\n")
    root.chmod(0o755)
    real = bwrap.python_trees
    monkeypatch.setattr(bwrap, "python_trees", lambda: [*real(), str(package)])
    yield package
    shutil.rmtree(root)


@pytest.mark.parametrize("phase", ["agent", "full"])
def test_nothing_beside_binds_under_tmp_is_the_agents(
    sandbox: LocalSandbox, bystander: LocalSandbox, checkout_under_tmp: Path, phase: str
) -> None:
    src, top = checkout_under_tmp.parent, checkout_under_tmp.parents[2]
    planted = (
        f'echo \'open("/logs/agent/pwned", "w").write("x")\' > {src}/sitecustomize.py; '
        f"mv {top} /tmp/moved && mkdir -p {src} && cp -r /tmp/moved/main/src/pkg {src}/ && "
        f"echo 'VALUE = \"forged\"' > {checkout_under_tmp}/__init__.py"
    )
    result = bash(sandbox, planted, phase=phase)  # type: ignore[arg-type]
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr or "busy" in result.stderr.lower()
    # A later interpreter with that folder on its path runs nothing of the agent's.
    check = bash(
        sandbox,
        f"PYTHONPATH={src} python3 -c 'import pkg; print(pkg.VALUE)'; ls /logs/agent",
        phase=phase,  # type: ignore[arg-type]
    )
    assert check.stdout.split() == ["host"], check
    assert_unaffected(bystander)


HOLD_MIB = 512
ATTACKS = {
    # SysV shared memory: 16 MiB segments, touched so the pages exist, never removed.
    "sysv": """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
held = 0
for _ in range({n}):
    sid = libc.shmget(0, 16 << 20, 0o1600)
    if sid < 0:
        print("refused", ctypes.get_errno()); break
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 16 << 20)
    held += 16
print("held", held, flush=True)
time.sleep(2)
""",
    # memfd: memory in no file system and no address space until mapped.
    "memfd": """
import os, time
held = 0
try:
    fds = []
    for _ in range({n}):
        fd = os.memfd_create("x"); os.write(fd, b"x" * (16 << 20)); fds.append(fd); held += 16
except OSError as exc:
    print("refused", exc.errno)
print("held", held, flush=True)
time.sleep(2)
""",
    # POSIX shared memory and /tmp: files in the sandbox's tmpfs folders.
    "posix_shm": """
import os, time
held = 0
try:
    for i in range({n}):
        with open(f"/dev/shm/seg{{i}}", "wb") as f: f.write(b"x" * (16 << 20))
        held += 16
except OSError as exc:
    print("refused", exc.errno)
print("held", held, flush=True)
time.sleep(2)
""",
}


def _host_shmem_mib() -> float:
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("Shmem:"))
    return int(line.split()[1]) / 1024


# With a memory cgroup, the kernel counts the sandbox's own shared memory (`memory.stat`), which
# no other test disturbs; without one, the host's Shmem is measured while no other test runs.
KERNEL_COUNTS = cgroups.support().memory is not None
HOST_MEMORY = () if KERNEL_COUNTS else (pytest.mark.host_memory,)


@pytest.mark.parametrize("kind", [pytest.param(k, marks=HOST_MEMORY) for k in sorted(ATTACKS)])
def test_shared_memory_of_every_kind_stays_within_the_sandbox(
    sandbox: LocalSandbox, bystander: LocalSandbox, kind: str
) -> None:
    storage = sandbox.limits.storage_mb
    assert 4 * storage <= HOLD_MIB  # the attack asks for far more than the sandbox may hold

    def _shmem_mib() -> float:
        if KERNEL_COUNTS and sandbox._cgroups is not None:
            return sandbox._cgroups.memory_stat("agent").get("shmem", 0) / MIB
        return _host_shmem_mib()

    before, peak = _shmem_mib(), 0.0
    done: list[ExecResult] = []
    runner = threading.Thread(
        target=lambda: done.append(python(sandbox, ATTACKS[kind].format(n=HOLD_MIB // 16))),
    )
    runner.start()
    while runner.is_alive():
        peak = max(peak, _shmem_mib() - before)
        time.sleep(0.05)
    out = done[0].stdout
    held = int(out.split("held")[1].split()[0])
    assert "refused" in out and held <= storage, out  # reported to the agent, and bounded
    assert peak <= storage + 16, f"{kind}: shared memory grew by {peak:.0f} MiB"
    if kind == "posix_shm":
        # Files of the sandbox's /tmp and /dev/shm live until its teardown, which unmounts
        # its tmpfs and so frees them.
        sandbox.stop()
        assert not is_mountpoint(sandbox.path) and not sandbox.path.exists()
        if KERNEL_COUNTS:
            return
    # Then nothing is left (the kernel frees a dead ipc namespace's segments a moment later).
    deadline = time.monotonic() + 10
    while _shmem_mib() - before >= 16 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _shmem_mib() - before < 16, kind
    assert_unaffected(bystander)


HOG = """
import os, sys, time
held = []
for _ in range(20):  # 200 MiB in 10 MiB steps, each page written
    held.append(b"x" * (10 << 20))
print("held", os.getpid(), flush=True)
time.sleep(float(sys.argv[1]))
"""
HOGS = "cat > /tmp/hog.py <<'EOF'\n" + HOG + "EOF\n"
HOGS += "for i in 1 2 3 4 5 6; do python3 /tmp/hog.py {hold} & done; wait; echo done"


def test_many_processes_cannot_sum_past_the_sandbox_memory(
    tmp_path: Path, make_task: MakeTask
) -> None:
    """RLIMIT_AS caps each process at memory_mb; six processes of 200 MiB under a 384 MiB
    limit would hold 1.2 GiB. The sandbox's memory cgroup holds them to the limit (memory_mb
    plus the 64 MiB its tmpfs may take) whatever the load: the kernel charges each page as it is
    touched and kills inside the cgroup at the limit (the largest process: a hog that is done
    allocating may die for the next one). So at least four hogs are killed, and the most the
    sandbox ever held, by the kernel's own count, is the limit."""
    limits = Limits(cpus=1, memory_mb=384, storage_mb=64, max_processes=64, cpu_time_s=60)
    runtime = LocalRuntime(tmp_path / "mem", limits=limits)
    if runtime.cgroups.memory is None:
        pytest.skip(f"no memory cgroup here: {runtime.cgroups.missing['memory']}")
    sandbox = runtime.start(make_task(), timeout_s=30)
    bystander = runtime.start(make_task(files={"mine.txt": "bystander\n"}), timeout_s=30)
    try:
        done = bash(sandbox, HOGS.format(hold=1), timeout_s=60)
        limit_mib = limits.memory_mb + limits.storage_mb
        assert done.stdout.strip().endswith("done"), done
        assert done.stderr.count("Killed") >= 4 and sandbox.memory_kills >= 4, done
        held = sandbox.memory_peak_bytes("agent")
        assert held is not None and 200 * MIB < held <= limit_mib * MIB, held / MIB
        assert_unaffected(bystander)
    finally:
        sandbox.stop()
        bystander.stop()
        runtime.close()


def test_without_cgroups_the_memory_watch_ends_the_largest_until_the_rest_fit(
    tmp_path: Path, make_task: MakeTask
) -> None:
    """The fallback where no memory cgroup can be made: the polled watch sums the sandbox's
    anonymous memory and kills the largest processes until the rest fit. A fast writer can
    overshoot it between two polls, so what is asserted is where it ends, not a peak."""
    limits = Limits(cpus=1, memory_mb=384, storage_mb=64, max_processes=64, cpu_time_s=60)
    runtime = LocalRuntime(tmp_path / "mem", limits=limits, use_cgroups=False)
    assert runtime.cgroups.memory is None and "polled watch" in runtime.enforcement
    sandbox = runtime.start(make_task(), timeout_s=30)
    try:
        done: list[ExecResult] = []
        script = HOGS.format(hold=30)
        runner = threading.Thread(target=lambda: done.append(bash(sandbox, script, timeout_s=60)))
        runner.start()
        # Six hogs of 200 MiB in a sandbox of 384: once their pages are written, at most one
        # may be left alive, whatever the load did to the polls meanwhile.
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            if sandbox.memory_kills >= 5 and _anon_mib(sandbox.uid) <= limits.memory_mb:
                break
            time.sleep(0.05)
        assert sandbox.memory_kills >= 5 and _anon_mib(sandbox.uid) <= limits.memory_mb
    finally:
        sandbox.stop()  # ends the hog still sleeping, and the shell waiting for it
        runtime.close()
    runner.join(30)


def _anon_mib(uid: int) -> float:
    from bureau.sandbox.limits import process_table

    return sum(p.anon_bytes for p in process_table(frozenset({uid})).values()) / MIB


def _used_mib() -> float:
    fields = {
        line.split(":")[0]: int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
    }
    return (fields["MemTotal"] - fields["MemAvailable"]) / 1024


def test_the_memory_watch_kills_the_largest_until_the_rest_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bureau.sandbox import limits as limits_module

    killed: list[int] = []
    monkeypatch.setattr(limits_module, "kill_if_same", lambda pid, uid: killed.append(pid) or True)
    table = {
        pid: limits_module.ProcessInfo(ppid=1, uid=0, anon_bytes=mib * MIB)
        for pid, mib in {10: 80, 11: 50, 12: 10, 13: 5}.items()
    }
    told: list[tuple[int, int]] = []
    watched = limits_module._Watched(
        100 * MIB, lambda t: {10, 11, 12}, lambda pid, size: told.append((pid, size >> 20))
    )
    limits_module.MemoryWatch.enforce(watched, table)  # 140 MiB of 100: the 80 goes
    assert killed == [10] and told == [(10, 80)]
    killed.clear()
    limits_module.MemoryWatch.enforce(
        limits_module._Watched(30 * MIB, lambda t: {11, 12, 13}, lambda *_: None), table
    )  # 65 of 30: the 50 goes, then 15 fits
    assert killed == [11]
    killed.clear()
    code = {
        20: limits_module.ProcessInfo(1, 7, 30 * MIB),
        21: limits_module.ProcessInfo(1, 5, 60 * MIB),
    }
    limits_module.MemoryWatch.enforce(
        limits_module._Watched(50 * MIB, lambda t: {20, 21}, lambda *_: None, first_uid=7), code
    )  # the agent's code (uid 7) goes first, though the server (uid 5) is larger
    assert killed == [20, 21]
    tree = {
        1: limits_module.ProcessInfo(0, 0, 0),
        2: limits_module.ProcessInfo(1, 0, 0),
        3: limits_module.ProcessInfo(2, 0, 0),
        4: limits_module.ProcessInfo(1, 0, 0),
    }
    assert limits_module.descendants(tree, {2, 99}) == {2, 3}


def test_the_memory_watch_kills_only_the_process_it_saw() -> None:
    """A pid whose owner changed since the scan (a reused number) is left alone."""
    import os

    from bureau.sandbox import limits as limits_module

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not limits_module.kill_if_same(child.pid, os.getuid() + 12345)
        assert child.poll() is None
        assert limits_module.kill_if_same(child.pid, os.getuid())
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()
        child.wait()
    assert not limits_module.kill_if_same(child.pid, os.getuid())  # reaped: gone
