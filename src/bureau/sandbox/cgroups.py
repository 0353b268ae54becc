"""Per-sandbox cgroups: the kernel's own bound on what a sandbox's processes hold together, its
process count and CPU share, and a teardown that ends all of its processes at once.

RLIMIT_AS bounds each process's address space, not what a sandbox's processes hold together,
and a polled sum (`limits.MemoryWatch`) is outrun by a fast writer. A memory cgroup is not: the
kernel charges every page a sandbox's processes touch (heap, files written into its tmpfs, SysV
shared memory, page tables, pipe buffers) and, at the limit, reclaims what it can and then
OOM-kills a process inside that cgroup, never one outside it.

**Where.** Everything lives under this process's own cgroup, in a folder `bureau/`, so whatever
already accounts for this process (a container, a systemd unit, the machine's own agent) still
counts its sandboxes: charges go up the hierarchy.

    v1 (a hierarchy per controller):  memory/<own>/bureau/<sandbox>/{agent,verifier}
                                      pids/<own>/bureau/<sandbox>, cpu/..., freezer/...
    v2 (one hierarchy):               <own>/bureau/<sandbox>/{agent,verifier}

A machine may mount both (controllers on v1 and an empty cgroup2 beside them, as systemd's hybrid
layout does): each capability comes from the version that offers it, and v2's `cgroup.kill`
serves teardown even where v2 holds no controller. On v2 with controllers, this process's cgroup
must be delegated to it (systemd `Delegate=yes`, a container's own cgroup namespace); if it holds
processes, they are moved to a leaf `bureau-host` beside the sandboxes first, as the kernel's
rule of no processes in inner cgroups requires.

**Memory domains.** A sandbox's memory is two leaves:

| domain | commands | limit |
|---|---|---|
| agent | setup, agent, solution, full: tool server, agent code, solve.sh | memory_mb + storage |
| verifier | the verifier phase | memory_mb + storage + the verifier's folders |

(storage: the tmpfs a domain's commands can fill, where one is mounted.)

A page written to a tmpfs is charged to the writer's cgroup and, without swap, cannot be
reclaimed; each limit therefore adds the tmpfs its commands may fill, so an agent that fills
its disk meets ENOSPC, as it would on a disk, and not the OOM killer. Swap is never allowed on
top (`memsw`, `memory.swap.max`).

**Joining.** A command joins before it runs: bwrap is started with `--block-fd`, reports the
host pid of the process that will become the command's pid 1, and waits; that pid is moved into
the sandbox's groups (`join`), then bwrap is let go, so everything the command forks is born
inside. bwrap's own process stays outside, so a kill of the cgroup ends what the sandbox ran
while bwrap reaps it and exits: nothing is orphaned.

**Teardown.** `kill` ends every process of the sandbox at once: v2's `cgroup.kill`, else v1's
freezer (freeze, SIGKILL each member, thaw), else SIGKILL of the members until none is left.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MEMORY_DOMAINS = ("agent", "verifier")
BASE = "bureau"
HOST_LEAF = "bureau-host"
CFS_PERIOD_US = 100_000
_CONTROLLERS = ("memory", "pids", "cpu")
_KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy and this process's cgroup in it."""

    version: int
    mount: Path
    controllers: frozenset[str]
    """v1: the controllers the mount holds; v2: those this process's cgroup offers."""
    own: Path
    """This process's cgroup folder."""

    @property
    def base(self) -> Path:
        return self.own / BASE

    @property
    def label(self) -> str:
        return f"cgroup v{self.version}"


def parse_mountinfo(text: str) -> list[tuple[int, Path, str, frozenset[str]]]:
    """(version, mount point, root of the mount, v1 controllers) of each cgroup mount."""
    found = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            found.append((2, point, fields[3], frozenset[str]()))
        else:
            options = set(tail[2].split(",")) & {*_CONTROLLERS, "freezer"}
            found.append((1, point, fields[3], frozenset(options)))
    return found


def parse_proc_cgroup(text: str) -> tuple[dict[str, str], str | None]:
    """This process's v1 cgroup path per controller, and its v2 path (None without one)."""
    v1: dict[str, str] = {}
    v2 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        for name in controllers.split(","):
            v1[name] = path
    return v1, v2


def _own_dir(point: Path, mount_root: str, path: str) -> Path | None:
    """The folder of cgroup `path` under a mount of the hierarchy's `mount_root`."""
    if mount_root == "/":
        return point / path.lstrip("/")
    if path == mount_root or path.startswith(mount_root.rstrip("/") + "/"):
        return point / path[len(mount_root) :].lstrip("/")
    return None  # our cgroup is outside what this mount shows


def discover(mountinfo: str, proc_cgroup: str) -> list[Hierarchy]:
    """The hierarchies this process could place sandboxes in, from its mount table and its
    /proc/self/cgroup (no file system access: the probing is `probe`'s)."""
    v1_paths, v2_path = parse_proc_cgroup(proc_cgroup)
    found: list[Hierarchy] = []
    for version, point, root, controllers in parse_mountinfo(mountinfo):
        if version == 2:
            if v2_path is None or any(h.version == 2 for h in found):
                continue
            own = _own_dir(point, root, v2_path)
            if own is not None:
                found.append(Hierarchy(2, point, frozenset(), own))
            continue
        if not controllers:
            continue
        name = next(iter(sorted(controllers)))
        if name not in v1_paths:
            continue
        own = _own_dir(point, root, v1_paths[name])
        if own is not None and not any(h.mount == point for h in found):
            found.append(Hierarchy(1, point, controllers, own))
    return found


@dataclass(frozen=True)
class CgroupSupport:
    """Which hierarchy enforces what for this process's sandboxes; None where none can."""

    memory: Hierarchy | None = None
    pids: Hierarchy | None = None
    cpu: Hierarchy | None = None
    kill: Hierarchy | None = None
    """v2 (`cgroup.kill`) or v1's freezer hierarchy."""
    missing: Mapping[str, str] = field(default_factory=dict)
    """Why a capability is not available, by capability."""

    @classmethod
    def none(cls, why: str) -> CgroupSupport:
        return cls(missing=dict.fromkeys((*_CONTROLLERS, "kill"), why))

    def hierarchies(self) -> list[Hierarchy]:
        used: list[Hierarchy] = []
        for h in (self.memory, self.pids, self.cpu, self.kill):
            if h is not None and h not in used:
                used.append(h)
        return used

    def describe(self) -> str:
        def what(name: str, h: Hierarchy | None) -> str:
            if h is None:
                return f"{name}: no cgroup ({self.missing.get(name, '?')})"
            return f"{name} by {h.label}"

        if self.kill is None:
            kill = f"teardown: signals ({self.missing.get('kill', '?')})"
        else:
            kill = "teardown by " + ("cgroup.kill" if self.kill.version == 2 else "freezer")
        parts = [what("memory", self.memory), what("pids", self.pids), what("cpu", self.cpu), kill]
        return "; ".join(parts)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _enable_v2(h: Hierarchy, wanted: Iterable[str]) -> frozenset[str]:
    """Enable `wanted` controllers for children of `h.own` and of `h.base`; those enabled."""
    offered = set((h.own / "cgroup.controllers").read_text().split()) & set(wanted)
    if not offered:
        return frozenset()
    request = " ".join(f"+{c}" for c in sorted(offered))
    try:
        _write(h.own / "cgroup.subtree_control", request)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        # Processes in our own cgroup keep its children from having controllers: move them
        # to a leaf of their own, as a delegated unit's payload is expected to.
        leaf = h.own / HOST_LEAF
        leaf.mkdir(exist_ok=True)
        pids = (h.own / "cgroup.procs").read_text().split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                _write(leaf / "cgroup.procs", pid)
        log.warning("moved %d processes of %s into %s to delegate %s", len(pids), h.own, leaf,
                    request)  # fmt: skip
        _write(h.own / "cgroup.subtree_control", request)
    h.base.mkdir(exist_ok=True)
    _write(h.base / "cgroup.subtree_control", request)
    return frozenset(offered)


def probe(found: list[Hierarchy]) -> CgroupSupport:
    """Try each hierarchy: create `bureau/` and a trial group, set what a sandbox would set."""
    chosen: dict[str, Hierarchy] = {}
    missing: dict[str, str] = {}
    for h in sorted(found, key=lambda h: -h.version):  # v2 first: where it offers, it wins
        want = [c for c in _CONTROLLERS if c not in chosen]
        if "kill" not in chosen:
            want.append("freezer")
        if h.version == 1 and not set(want) & h.controllers:
            continue
        try:
            h.base.mkdir(parents=True, exist_ok=True)
            if h.version == 2:
                enabled = _enable_v2(h, [c for c in want if c in _CONTROLLERS])
                h = Hierarchy(2, h.mount, enabled, h.own)
            trial = h.base / f"probe-{os.getpid()}-{threading.get_ident()}"
            trial.mkdir(exist_ok=True)
            try:
                offers = set(h.controllers)
                if h.version == 2 and (trial / "cgroup.kill").exists():
                    offers.add("kill")
                if h.version == 1 and "freezer" in h.controllers:
                    offers.add("kill")
                    offers.discard("freezer")
                if "memory" in offers:
                    limit = "memory.max" if h.version == 2 else "memory.limit_in_bytes"
                    _write(trial / limit, str(1 << 40))
                for capability in sorted(offers):
                    chosen.setdefault(capability, h)
            finally:
                trial.rmdir()
        except OSError as exc:
            reason = f"{h.label} at {h.own}: {exc.strerror or exc}"
            for name in (*h.controllers, "kill"):
                missing.setdefault("kill" if name == "freezer" else name, reason)
    for name in (*_CONTROLLERS, "kill"):
        if name not in chosen:
            missing.setdefault(name, "not mounted or not offered to this process")
    return CgroupSupport(
        memory=chosen.get("memory"),
        pids=chosen.get("pids"),
        cpu=chosen.get("cpu"),
        kill=chosen.get("kill"),
        missing={k: v for k, v in missing.items() if k not in chosen},
    )


@functools.lru_cache(maxsize=1)
def support() -> CgroupSupport:
    """What this machine offers this process (probed once; nothing without root)."""
    if os.geteuid() != 0:
        return CgroupSupport.none("not running as root")
    try:
        mounts = Path("/proc/self/mountinfo").read_text()
        found = discover(mounts, Path("/proc/self/cgroup").read_text())
    except OSError as exc:
        return CgroupSupport.none(f"cannot read the cgroup mounts: {exc}")
    return probe(found)


def domain_of(phase: str) -> str:
    """The memory domain a command of `phase` runs in."""
    return "verifier" if phase == "verifier" else "agent"


class SandboxCgroups:
    """One sandbox's cgroups in every hierarchy `support` uses; see the module docstring."""

    def __init__(
        self,
        support: CgroupSupport,
        name: str,
        *,
        max_processes: int,
        cpus: float,
        memory_bytes: Mapping[str, int],
    ) -> None:
        self.support = support
        self.dirs: list[Path] = []  # parents before children
        self._join: dict[str, list[Path]] = {domain: [] for domain in MEMORY_DOMAINS}
        self._memory: dict[str, Path] = {}
        self._kill_dir: Path | None = None
        try:
            for h in support.hierarchies():
                self._create(h, name, max_processes, cpus, memory_bytes)
        except BaseException:
            self.remove()
            raise

    def _create(
        self, h: Hierarchy, name: str, max_processes: int, cpus: float, memory: Mapping[str, int]
    ) -> None:
        group = h.base / name
        h.base.mkdir(exist_ok=True)
        group.mkdir()
        self.dirs.append(group)
        s = self.support
        if h is s.pids:
            _write(group / "pids.max", str(max_processes))
        if h is s.cpu:
            quota = max(1000, int(cpus * CFS_PERIOD_US))
            if h.version == 2:
                _write(group / "cpu.max", f"{quota} {CFS_PERIOD_US}")
            else:
                _write(group / "cpu.cfs_period_us", str(CFS_PERIOD_US))
                _write(group / "cpu.cfs_quota_us", str(quota))
        if h is s.kill:
            self._kill_dir = group
        if h.version == 2 and h is s.memory:
            _write(group / "cgroup.subtree_control", "+memory")
        if h.version == 1 and h is not s.memory:
            for domain in MEMORY_DOMAINS:
                self._join[domain].append(group)
            return
        for domain in MEMORY_DOMAINS:  # v2 keeps processes in leaves only
            leaf = group / domain
            leaf.mkdir()
            self.dirs.append(leaf)
            self._join[domain].append(leaf)
            if h is s.memory:
                self._memory[domain] = leaf
                self._limit_memory(h.version, leaf, memory[domain])

    @staticmethod
    def _limit_memory(version: int, leaf: Path, limit: int) -> None:
        if version == 2:
            _write(leaf / "memory.max", str(limit))
            if (leaf / "memory.swap.max").exists():
                _write(leaf / "memory.swap.max", "0")
            return
        _write(leaf / "memory.limit_in_bytes", str(limit))
        if (leaf / "memory.memsw.limit_in_bytes").exists():
            _write(leaf / "memory.memsw.limit_in_bytes", str(limit))

    @property
    def enforces_memory(self) -> bool:
        return bool(self._memory)

    def join_dirs(self, domain: str) -> list[Path]:
        """The groups a command of memory `domain` belongs in."""
        return list(self._join[domain])

    def join(self, pid: int, domain: str) -> None:
        """Move process `pid` (a host pid) into the groups of memory `domain`."""
        for group in self._join[domain]:
            _write(group / "cgroup.procs", str(pid))

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer ended in this sandbox's memory leaves."""
        total = 0
        for leaf in self._memory.values():
            name = "memory.events" if (leaf / "memory.events").exists() else "memory.oom_control"
            with contextlib.suppress(OSError, ValueError):
                for line in (leaf / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        total += int(value)
        return total

    def peak_bytes(self, domain: str) -> int | None:
        """The most memory `domain`'s leaf held at once (None without a memory cgroup)."""
        leaf = self._memory.get(domain)
        if leaf is None:
            return None
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            with contextlib.suppress(OSError, ValueError):
                return int((leaf / name).read_text())
        return None

    def memory_stat(self, domain: str) -> dict[str, int]:
        """`memory.stat` of `domain`'s leaf (bytes by kind: `rss`/`anon`, `shmem`, ...)."""
        leaf = self._memory.get(domain)
        if leaf is None:
            return {}
        stat = {}
        with contextlib.suppress(OSError):
            for line in (leaf / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if value.isdigit():
                    stat[key] = int(value)
        return stat

    def members(self) -> set[int]:
        found: set[int] = set()
        for group in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (group / "cgroup.procs").read_text().split())
        return found

    def kill(self, timeout_s: float = _KILL_WAIT_S) -> bool:
        """End every process of the sandbox; whether none is left within `timeout_s`."""
        if not self.dirs:
            return True
        group, kill = self._kill_dir, self.support.kill
        try:
            if group is not None and kill is not None and kill.version == 2:
                _write(group / "cgroup.kill", "1")
            elif group is not None and kill is not None:
                _freeze_and_kill(group)
        except OSError as exc:
            log.warning("killing cgroup %s: %s", group, exc)
        return _kill_until_empty(self.members, timeout_s)

    def remove(self) -> None:
        """Kill what is left and remove the groups (children first). Safe to repeat."""
        self.kill()
        remove_groups(self.dirs)
        self.dirs = []
        self._memory = {}
        self._kill_dir = None


def _freeze_and_kill(group: Path) -> None:
    """v1 freezer: no member can fork or exit while frozen, so the list killed is exact."""
    _write(group / "freezer.state", "FROZEN")
    deadline = time.monotonic() + 1.0
    while (group / "freezer.state").read_text().strip() != "FROZEN":
        if time.monotonic() > deadline:
            break  # a member in uninterruptible sleep: kill what can be killed anyway
        time.sleep(0.002)
    for pid in (group / "cgroup.procs").read_text().split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    _write(group / "freezer.state", "THAWED")


def _kill_until_empty(members: Callable[[], set[int]], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while left := members():
        if time.monotonic() > deadline:
            log.warning("cgroup members still alive after %.1f s: %s", timeout_s, sorted(left))
            return False
        for pid in left:
            _kill_member(pid, members)
        time.sleep(0.002)
    return True


def _kill_member(pid: int, members: Callable[[], set[int]]) -> None:
    """SIGKILL `pid` only while it is still a member: a pidfd pins the process while the
    membership is checked again (the number may have gone to another process since)."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if pid in members():
            signal.pidfd_send_signal(handle, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(handle)


def remove_groups(dirs: Iterable[Path]) -> None:
    """Remove groups, deepest first; a group empties a moment after its last member dies."""
    for group in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        for _ in range(250):
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    log.warning("removing cgroup %s: %s", group, exc)
                    break
                with contextlib.suppress(OSError, ValueError):
                    for pid in (group / "cgroup.procs").read_text().split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.02)
        else:
            log.warning("cgroup %s still busy after 5 s of kills: not removed", group)


def remove_stale(dirs: Iterable[Path]) -> None:
    """A dead owner's groups: kill what is left in them, then remove them."""
    groups = [d for d in dirs if d.is_dir() and BASE in d.parts]  # never anything but ours
    remove_groups(groups)
