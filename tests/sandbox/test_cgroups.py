"""Per-sandbox cgroups: finding the hierarchies, the groups a sandbox gets, and teardown.

The parsing is checked on literal mount tables of the three layouts (v1, v2, hybrid). The rest
runs on this machine's real cgroups, whatever it offers: each test of a mechanism skips only
where the machine lacks it, and says so (this one has memory, pids, cpu and freezer on v1 and an
empty cgroup2 with `cgroup.kill`, so only v2's controllers are not exercised here).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import SMALL, MakeTask, bash

from bureau.sandbox import cgroups
from bureau.sandbox.cgroups import CgroupSupport, Hierarchy, discover
from bureau.sandbox.limits import MIB, processes_of_uid
from bureau.sandbox.local import VERIFIER_STORAGE_MB, LocalRuntime

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_SELF = """\
9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/agent/42
2:cpu,cpuacct:/
0::/
"""


def test_a_hybrid_machine_offers_each_v1_controller_and_the_unified_tree() -> None:
    found = {(h.version, h.mount.name): h for h in discover(HYBRID, HYBRID_SELF)}
    assert set(found) == {
        (1, "cpu,cpuacct"), (1, "memory"), (1, "freezer"), (1, "pids"), (2, "unified"),
    }  # fmt: skip
    assert found[(1, "cpu,cpuacct")].controllers == {"cpu"}
    # Under this process's own cgroup: whatever accounts for it also counts its sandboxes.
    assert found[(1, "memory")].base == Path("/sys/fs/cgroup/memory/agent/42/bureau")
    assert found[(2, "unified")].own == Path("/sys/fs/cgroup/unified")


def test_a_v2_machine_and_a_container_that_sees_only_its_own_subtree() -> None:
    v2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    (h,) = discover(v2, "0::/system.slice/bureau.service\n")
    assert (h.version, h.own) == (2, Path("/sys/fs/cgroup/system.slice/bureau.service"))
    # A mount of a subtree (mount root /docker/abc) shows our cgroup below its root.
    sub = "30 23 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    (h,) = discover(sub, "0::/docker/abc/worker\n")
    assert h.own == Path("/sys/fs/cgroup/worker")
    # A cgroup outside what the mount shows cannot be used.
    assert discover(sub, "0::/elsewhere\n") == []


def test_what_is_missing_is_said() -> None:
    none = CgroupSupport.none("not running as root")
    assert none.hierarchies() == []
    text = none.describe()
    assert "memory: no cgroup (not running as root)" in text and "teardown: signals" in text


# -- on this machine ------------------------------------------------------------------------


@pytest.fixture
def support() -> CgroupSupport:
    found = cgroups.support()
    if not found.hierarchies():
        pytest.skip(f"no cgroups offered here: {dict(found.missing)}")
    return found


def _runtime(tmp_path: Path, support: CgroupSupport) -> LocalRuntime:
    runtime = LocalRuntime(tmp_path / "sbx", limits=SMALL)
    runtime.cgroups = support
    return runtime


def _group(support: CgroupSupport, h: Hierarchy | None, sandbox_id: str) -> Path:
    assert h is not None
    return h.base / sandbox_id


def test_a_sandbox_gets_its_limits_and_each_phase_its_memory_leaf(
    tmp_path: Path, make_task: MakeTask, support: CgroupSupport
) -> None:
    if support.memory is None or support.pids is None or support.cpu is None:
        pytest.skip(f"not every controller here: {dict(support.missing)}")
    runtime = _runtime(tmp_path, support)
    sandbox = runtime.start(make_task(), timeout_s=30)
    try:
        memory = _group(support, support.memory, sandbox.id)
        agent = SMALL.memory_mb + SMALL.storage_mb  # the tmpfs it may fill is RAM too
        verifier = agent + 2 * VERIFIER_STORAGE_MB
        v1 = support.memory.version == 1
        limit = "memory.limit_in_bytes" if v1 else "memory.max"
        assert int((memory / "agent" / limit).read_text()) == agent * MIB
        assert int((memory / "verifier" / limit).read_text()) == verifier * MIB
        swap = memory / "agent" / "memory.memsw.limit_in_bytes"
        if v1 and swap.exists():  # memory and swap together: no swap on top
            assert int(swap.read_text()) == agent * MIB
        pids = _group(support, support.pids, sandbox.id)
        assert (pids / "pids.max").read_text().strip() == str(SMALL.max_processes)
        cpu = _group(support, support.cpu, sandbox.id)
        if support.cpu.version == 1:
            quota = (cpu / "cpu.cfs_quota_us").read_text()
        else:
            quota = (cpu / "cpu.max").read_text().split()[0]
        assert int(quota) == int(SMALL.cpus * cgroups.CFS_PERIOD_US)
        # Each command is in its phase's leaf from its first instruction on.
        own = str(support.memory.own.relative_to(support.memory.mount))
        for phase, leaf in (("agent", "agent"), ("verifier", "verifier"), ("setup", "agent")):
            seen = bash(sandbox, "cat /proc/self/cgroup", phase=phase).stdout  # type: ignore[arg-type]
            assert f"/{own}/bureau/{sandbox.id}/{leaf}\n" in seen, seen
    finally:
        sandbox.stop()
        runtime.close()
    assert not any(p.exists() for p in (memory, pids, cpu))


def daemons(seconds: int) -> str:
    """Daemons (double forks, `setsid`) that sleep `seconds`, a loop that ignores SIGTERM, and
    one that forks a child every 50 ms for ever. Its children live 0.2 s, so the two copies a
    test runs stay below the sandbox's 64 processes: a loop that kept them all filled the cap
    within a second, and on a loaded machine the second copy's forks then failed until its
    command timed out."""
    return (
        f"for i in $(seq 15); do (setsid sleep {seconds} &); done; "
        "nohup sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 & "
        "(sh -c 'while :; do sh -c \"sleep 0.2\" & sleep 0.05; done' &) ; echo started"
    )


def _commands_of_uid(uid: int) -> list[str]:
    """The command lines of `uid`'s processes (those that exit while being read are left out)."""
    lines = []
    for pid in processes_of_uid(uid):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return lines


def _teardowns() -> Iterator[object]:
    """Each teardown this machine can do: its own choice, then each mechanism forced."""
    found = cgroups.support()
    if not found.hierarchies():
        return
    probed = "none" if found.kill is None else f"v{found.kill.version}"
    yield pytest.param(found, id=f"as-probed-{probed}")  # here: v2's cgroup.kill
    freezer = [h for h in _hierarchies() if h.version == 1 and "freezer" in h.controllers]
    if freezer and found.kill != freezer[0]:
        yield pytest.param(dataclasses.replace(found, kill=freezer[0]), id="v1-freezer")
    yield pytest.param(dataclasses.replace(found, kill=None), id="signals")


def _hierarchies() -> list[Hierarchy]:
    return discover(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())


@pytest.mark.parametrize("teardown", list(_teardowns()))
def test_stop_ends_every_process_at_once_and_leaves_no_group(
    tmp_path: Path, make_task: MakeTask, teardown: CgroupSupport
) -> None:
    """Daemons, a loop that ignores SIGTERM and a process that keeps forking. Those of an agent's
    command die with the command (its pid namespace ends with it). Those of a spawned process
    live on until `stop`; when `stop` returns, none of them is left, not even as a zombie, and
    every group is gone."""
    runtime = _runtime(tmp_path, teardown)
    sandbox = runtime.start(make_task(), timeout_s=30)
    spawned = sandbox.spawn(["bash", "-c", daemons(300) + "; sleep 300"])
    try:
        started = bash(sandbox, daemons(301), timeout_s=60)
        assert started.stdout.strip() == "started", started
        assert not [c for c in _commands_of_uid(sandbox.uid) if c.startswith("sleep 301")]
        assert spawned.stdout is not None and spawned.stdout.readline() == b"started\n"
        # Every daemon, the loop that ignores SIGTERM and a forked child, all running at once.
        deadline = time.monotonic() + 30
        while True:
            seen = _commands_of_uid(sandbox.uid)
            sleepers = sum(c.startswith("sleep 300") for c in seen)
            if sleepers == 16 and any("trap" in c for c in seen) and "sleep 0.2 " in seen:
                break
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)
        groups = sandbox._cgroups.dirs if sandbox._cgroups else []
        assert groups
        sandbox.stop()
        assert processes_of_uid(sandbox.uid) == []  # at once: no grace period
        assert spawned.poll() is not None
        assert not any(g.exists() for g in groups)
    finally:
        sandbox.stop()
        runtime.close()


def test_a_delegated_v2_cgroup_holding_processes_is_split_before_its_controllers_are_enabled(
    tmp_path: Path,
) -> None:
    """cgroup v2 lets an inner cgroup enable controllers for its children only while it
    holds no process. bureau's own cgroup usually holds bureau: its processes move to a leaf
    `bureau-host` first. Exercised with the controller this machine's cgroup2 offers."""
    unified = [h for h in _hierarchies() if h.version == 2]
    if not unified or not (unified[0].own / "cgroup.controllers").read_text().split():
        pytest.skip("no cgroup2 here with a controller to enable")
    controller = (unified[0].own / "cgroup.controllers").read_text().split()[0]
    parent = unified[0].own / "cgroup.subtree_control"
    was_enabled = controller in parent.read_text().split()
    parent.write_text(f"+{controller}")  # so that our stand-in for a delegated cgroup has it
    own = unified[0].own / f"bureau-test-{os.getpid()}"
    own.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (own / "cgroup.procs").write_text(str(sleeper.pid))
        h = Hierarchy(2, unified[0].mount, frozenset(), own)
        assert cgroups._enable_v2(h, [controller]) == {controller}
        assert (own / cgroups.HOST_LEAF / "cgroup.procs").read_text().split() == [str(sleeper.pid)]
        assert controller in (own / "cgroup.subtree_control").read_text()
        assert controller in (h.base / "cgroup.subtree_control").read_text()
    finally:
        sleeper.kill()
        sleeper.wait()
        cgroups.remove_groups([own / "bureau", own / cgroups.HOST_LEAF, own])
        if not was_enabled:
            parent.write_text(f"-{controller}")
    assert not own.exists()
