"""What the memory watch costs: one poll of the process table, side by side in one run.

The watch (`bureau.sandbox.limits.MemoryWatch`) polls every 50 ms. Sandboxes with uids of
their own (runs as root) let it read only their processes; otherwise it reads every process
of the machine. With N sandboxes each running a few processes, this prints the time of one
poll both ways and their ratio.

    .venv/bin/python bench/memory_watch.py --sandboxes 8 32
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bureau.sandbox.limits import process_table
from bureau.sandbox.local import LocalRuntime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sandbox"))
from sandbox_helpers import write_task


def poll_ms(uids: frozenset[int] | None, repeats: int = 40) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        process_table(uids)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sandboxes", type=int, nargs="+", default=[8, 32])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bureau-bench-memwatch-"))
    task = write_task(root / "task", files=None, workdir="/workspace", memory_mb=512)
    report = {}
    for count in args.sandboxes:
        runtime = LocalRuntime(root / f"sbx-{count}")
        sandboxes = [runtime.start(task, timeout_s=60) for _ in range(count)]
        procs = [sb.spawn(["bash", "-c", "sleep 60 & sleep 60 & wait"]) for sb in sandboxes]
        time.sleep(1)
        uids = frozenset(u for sb in sandboxes for u in (sb.uid, sb.code_uid))
        everyone, own = poll_ms(None), poll_ms(uids)
        report[f"sandboxes_{count}"] = {
            "processes_on_machine": len(process_table()),
            "poll_all_ms": round(everyone, 2),
            "poll_own_uids_ms": round(own, 2),
            "all_over_own": round(everyone / own, 1),
            "cpu_share_of_a_core_at_50ms": round(own / 50, 4),
        }
        print(json.dumps({count: report[f"sandboxes_{count}"]}), flush=True)
        for proc in procs:
            proc.kill()
        for sb in sandboxes:
            sb.stop()
        runtime.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
