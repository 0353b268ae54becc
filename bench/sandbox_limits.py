"""Kernel-enforced sandbox limits against the polled fallback, side by side in one run.

Three measurements, each with cgroups (what this machine offers) and without them (the polled
memory watch and signals, `LocalRuntime(use_cgroups=False)`):

1. overshoot: six processes write 200 MiB each as fast as they can in a sandbox of memory_mb
   384. With a memory cgroup the kernel's own peak (`memory.max_usage_in_bytes` or
   `memory.peak`) is the bound; with the watch, the most the sandbox's processes held at
   once, sampled every 2 ms from their /proc/<pid>/statm, is what got past it.
2. lifecycle: start a sandbox, run `true`, stop it: the cost of creating, joining and removing
   the cgroups (median of N).
3. teardown: `stop` of a sandbox holding 60 processes (daemons, a loop that ignores SIGTERM,
   a shell that keeps forking), by each mechanism this machine has: v2 `cgroup.kill`, the v1
   freezer, signals.

    .venv/bin/python bench/sandbox_limits.py --repeats 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bureau.sandbox import cgroups
from bureau.sandbox.base import Limits
from bureau.sandbox.limits import MIB, process_table
from bureau.sandbox.local import LocalRuntime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sandbox"))
from sandbox_helpers import write_task

HOG = "held = [b'x' * (10 << 20) for _ in range(20)]; import time; time.sleep(1)"
HOGS = f'for i in 1 2 3 4 5 6; do python3 -c "{HOG}" & done; wait'
DAEMONS = (
    "for i in $(seq 50); do (setsid sleep 300 &); done; "
    "nohup sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 & "
    "(sh -c 'while :; do sh -c \"sleep 300\" & sleep 0.01; done' &); echo started"
)
LIMITS = Limits(cpus=1, memory_mb=384, storage_mb=64, max_processes=256, cpu_time_s=60)


def overshoot(runtime: LocalRuntime, task_dir: Path) -> dict[str, float]:
    sandbox = runtime.start(write_task(task_dir), timeout_s=60)
    uids = frozenset({sandbox.uid})
    sampled = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal sampled
        while not done.is_set():
            held = sum(p.anon_bytes for p in process_table(uids).values())
            sampled = max(sampled, held / MIB)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = sandbox.exec(["bash", "-c", HOGS], timeout_s=120)
    finally:
        done.set()
        sampler.join()
    kernel_peak = sandbox.memory_peak_bytes("agent")
    kills = sandbox.memory_kills
    sandbox.stop()
    return {
        "limit_mib": LIMITS.memory_mb + (LIMITS.storage_mb if kernel_peak is not None else 0),
        "kernel_peak_mib": round(kernel_peak / MIB, 1) if kernel_peak is not None else -1,
        "sampled_peak_anon_mib": round(sampled, 1),
        "killed": kills,
        "exit": result.returncode,
    }


def lifecycle_ms(runtime: LocalRuntime, task_dir: Path, repeats: int) -> float:
    task = write_task(task_dir)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        sandbox = runtime.start(task, timeout_s=60)
        sandbox.exec(["true"], timeout_s=30)
        sandbox.stop()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def teardown_ms(runtime: LocalRuntime, task_dir: Path, repeats: int) -> tuple[float, int]:
    task = write_task(task_dir)
    times, left = [], 0
    for _ in range(repeats):
        sandbox = runtime.start(task, timeout_s=60)
        # A command that stays (an exec's namespace would end with it, daemons included).
        holder = sandbox.spawn(["bash", "-c", DAEMONS + "; sleep 300"])
        assert holder.stdout is not None and holder.stdout.readline() == b"started\n"
        time.sleep(0.5)  # the forking loop gets going
        started = time.perf_counter()
        sandbox.stop()
        times.append((time.perf_counter() - started) * 1000)
        left += len(process_table(frozenset({sandbox.uid})))
        holder.wait()
    return statistics.median(times), left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bureau-bench-limits-"))
    kernel = LocalRuntime(root / "kernel", limits=LIMITS)
    polled = LocalRuntime(root / "polled", limits=LIMITS, use_cgroups=False)
    report: dict[str, object] = {"kernel": kernel.enforcement, "polled": polled.enforcement}
    for name, runtime in (("kernel", kernel), ("polled", polled)):
        report[f"overshoot_{name}"] = overshoot(runtime, root / f"hog-{name}")
        print(json.dumps({name: report[f"overshoot_{name}"]}), flush=True)
    lifecycle = {
        name: lifecycle_ms(runtime, root / f"life-{name}", args.repeats)
        for name, runtime in (("kernel", kernel), ("polled", polled))
    }
    report["start_exec_stop_ms"] = {k: round(v, 1) for k, v in lifecycle.items()}
    ratio = lifecycle["kernel"] / lifecycle["polled"]
    report["start_exec_stop_kernel_over_polled"] = round(ratio, 2)
    print(json.dumps({"start_exec_stop_ms": report["start_exec_stop_ms"]}), flush=True)
    support = kernel.cgroups
    hierarchies = cgroups.discover(
        Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text()
    )
    mechanisms: dict[str, LocalRuntime] = {"signals (no cgroups)": polled}
    if support.kill is not None:
        name = "v2 cgroup.kill" if support.kill.version == 2 else "v1 freezer"
        mechanisms[name] = kernel
    for h in hierarchies:
        if h.version == 1 and "freezer" in h.controllers and "v1 freezer" not in mechanisms:
            mechanisms["v1 freezer"] = _with_kill(root, support, h)
    mechanisms["cgroups, signals"] = _with_kill(root, support, None)
    teardown = {}
    for name, runtime in mechanisms.items():
        ms, left = teardown_ms(runtime, root / f"down-{len(teardown)}", max(3, args.repeats // 4))
        teardown[name] = {"stop_ms": round(ms, 1), "processes_left": left}
        print(json.dumps({name: teardown[name]}), flush=True)
    report["teardown_60_processes"] = teardown
    for runtime in {id(r): r for r in (kernel, polled, *mechanisms.values())}.values():
        runtime.close()
    print(json.dumps(report, indent=2))


def _with_kill(
    root: Path, support: cgroups.CgroupSupport, h: cgroups.Hierarchy | None
) -> LocalRuntime:
    runtime = LocalRuntime(root / f"kill-{h.version if h else 0}", limits=LIMITS)
    runtime.cgroups = dataclasses.replace(support, kill=h)
    return runtime


if __name__ == "__main__":
    main()
