"""Sandbox, tool-server and trial throughput, measured on this machine.

    .venv/bin/python bench/sandbox.py                  # everything (about 10 minutes)
    .venv/bin/python bench/sandbox.py --quick          # fewer samples, 40 tasks

Reports, side by side in one run:
1. start -> tool servers ready -> teardown, p50 and p95: from the warm pool (the default path
   of tool-using trials) and cold (a fresh sandbox and tool-server process), and their ratio;
2. p50 latency of one call of each tool, on a generated world;
3. oracle trials per minute over a task set at concurrency 1, 8 and 32, with system errors;
4. the CPU time of a tool server's start-up with every group against one with only the groups
   of the demo's harness (filesystem and code), interleaved (`--only-groups` runs just this);
5. warm sandboxes (every tool group ready) at 8 and 64 at once, with tool servers forked by the
   zygote against servers started with exec: PSS per warm sandbox (all of its processes, and
   the zygote's share), and CPU time and wall time per slot to fill the pool (`--only-memory`
   runs just this).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bureau.sandbox import get_runtime
from bureau.sandbox.limits import descendants as process_tree
from bureau.sandbox.limits import process_table
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.tools import GROUPS
from bureau.trials.agents import OracleAgent
from bureau.trials.mcp_link import open_tool_link
from bureau.trials.pool import WarmPool
from bureau.trials.scheduler import SchedulerConfig, run_trials
from bureau.worlds.builder import BuildConfig, build_split


def sample_calls(workspace: Path) -> dict[str, dict[str, Any]]:
    """One representative call per tool, on the files of a generated law world.

    Writes go to output/ and are made idempotent (overwrite) so repeats measure the same work.
    """

    def first(pattern: str) -> str:
        return str(sorted(workspace.glob(pattern))[0].relative_to(workspace))

    pdf, docx, pptx = (
        first("contracts/executed/*.pdf"),
        first("legal/ndas/*.docx"),
        first("admin/all_hands/*.pptx"),
    )
    xlsx, eml = "contracts/contract_register.xlsx", first("mail/inbox/*.eml").split("mail/")[1]
    chat = json.loads((workspace / "chat" / "legal-ops.json").read_text())
    thread = next(m["thread_ts"] for m in chat["messages"] if "thread_ts" in m)
    blocks = [
        {"kind": "heading", "text": "Summary", "level": 1},
        {"kind": "paragraph", "text": "Notice period: 90 days."},
        {"kind": "table", "rows": [["Item", "Amount"], ["Fees", 1200]]},
    ]
    return {
        "fs_list": {"path": "."},
        "fs_tree": {"max_depth": 2},
        "fs_find": {"pattern": "*.pdf"},
        "fs_search_content": {"query": "termination", "include_documents": False},
        "fs_read_text": {"path": "chat/legal-ops.json"},
        "fs_info": {"path": pdf},
        "fs_write_text": {"path": "output/note.txt", "content": "hello", "mode": "overwrite"},
        "pdf_read_pages": {"path": pdf, "pages": "1"},
        "pdf_extract_tables": {"path": pdf},
        "pdf_search": {"path": pdf, "query": "Liability"},
        "pdf_create": {
            "path": "output/n.pdf",
            "title": "Note",
            "blocks": blocks,
            "overwrite": True,
        },
        "sheet_create": {"path": "output/s.xlsx", "rows": [["a", 1]], "overwrite": True},
        "sheet_list": {"path": xlsx},
        "sheet_read": {"path": xlsx, "sheet": "Register"},
        "sheet_write": {
            "path": "output/s.xlsx",
            "sheet": "Sheet1",
            "start_cell": "B2",
            "rows": [[1, 2]],
        },
        "sheet_add_sheet": {"path": xlsx, "name": "Scratch"},
        "slides_create": {"path": "output/d.pptx", "title": "Deck", "overwrite": True},
        "slides_read": {"path": pptx},
        "slides_add_slide": {"path": "output/d.pptx", "title": "Sizing", "bullets": ["a", "b"]},
        "slides_edit_slide": {"path": "output/d.pptx", "slide": 1, "title": "Deck v2"},
        "slides_set_table": {
            "path": "output/d.pptx",
            "slide": 2,
            "rows": [["Seg", "TAM"], ["A", 1]],
        },
        "docx_create": {"path": "output/m.docx", "blocks": blocks, "overwrite": True},
        "docx_read": {"path": docx},
        "docx_append": {"path": "output/m.docx", "blocks": blocks[1:2]},
        "docx_edit_paragraph": {"path": "output/m.docx", "index": 1, "text": "Edited."},
        "mail_list": {},
        "mail_search": {"query": "amendment"},
        "mail_read": {"message": eml},
        "mail_save_attachments": {"message": eml, "folder": "output/att", "overwrite": True},
        "mail_send": {"to": ["a@example.com"], "subject": "Hi", "body": "Hello."},
        "mail_reply": {"message": eml, "body": "Thanks."},
        "chat_list_channels": {},
        "chat_read": {"channel": "legal-ops"},
        "chat_read_thread": {"channel": "legal-ops", "thread_ts": thread},
        "chat_search": {"query": "flagged"},
        "chat_post": {"channel": "legal-ops", "text": "On it."},
        "code_run_python": {"code": "print(1 + 1)"},
        "code_run_shell": {"command": "echo hi"},
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def start_to_ready(runtime: Any, task: TaskDir, root: Path, samples: int) -> dict[str, Any]:
    pool = WarmPool(runtime, root / "pool", size=2)
    await pool.warm(task)
    warm: list[float] = []
    for _ in range(samples):
        started = time.perf_counter()
        slot = await pool.acquire(task)
        await slot.close()
        warm.append(time.perf_counter() - started)
        await pool.warm(task)  # steady state: the refill is not part of a trial's wait
    await pool.close()
    cold: list[float] = []
    for _ in range(max(3, samples // 8)):
        started = time.perf_counter()
        sandbox = await asyncio.to_thread(runtime.start, task, timeout_s=60)
        link = await open_tool_link(sandbox, timeout_s=60)
        await link.close()
        await asyncio.to_thread(sandbox.stop)
        cold.append(time.perf_counter() - started)
    return {
        "warm_p50_ms": round(1000 * pct(warm, 0.5), 1),
        "warm_p95_ms": round(1000 * pct(warm, 0.95), 1),
        "cold_p50_ms": round(1000 * pct(cold, 0.5), 1),
        "cold_over_warm": round(pct(cold, 0.5) / pct(warm, 0.5), 1),
        "samples": len(warm),
    }


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def server_groups(workspace: Path, samples: int) -> dict[str, Any]:
    """CPU time of a tool server's start-up (imports, registration; it exits at once on a
    closed stdin) with every group against the groups of the demo's harness, alternating so
    both see the same machine."""
    variants = {"all": ",".join(GROUPS), "filesystem+code": "filesystem,code"}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(samples):
        for name, groups in variants.items():
            before = children_cpu_s()
            subprocess.run(
                [sys.executable, "-P", "-m", "bureau.tools", "--groups", groups,
                 "--workspace", str(workspace)],
                stdin=subprocess.DEVNULL, check=True,
            )  # fmt: skip
            cpu[name].append(children_cpu_s() - before)
    out: dict[str, Any] = {
        f"{name}_cpu_s_p50": round(statistics.median(cpu[name]), 3) for name in cpu
    }
    out["all_over_filesystem_code"] = round(
        statistics.median(cpu["all"]) / statistics.median(cpu["filesystem+code"]), 2
    )
    out["samples"] = samples
    return out


def sandbox_processes(root: int) -> list[int]:
    """Every live process below `root`, and every process in the pid namespace of one of them
    (a forked tool server's parent is the zygote's intermediate, which exits: the kernel then
    re-parents the server outside the tree, while it stays in the sandbox's pid namespace)."""
    below = descendants(root)
    namespaces = set()
    for pid in below:
        with contextlib.suppress(OSError):
            namespaces.add(os.readlink(f"/proc/{pid}/ns/pid"))
    namespaces.discard(os.readlink("/proc/self/ns/pid"))
    found = set(below)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry.name}/ns/pid") in namespaces:
                    found.add(int(entry.name))
    return sorted(found)


def descendants(root: int) -> list[int]:
    """Every live process below `root`."""
    return sorted(process_tree(process_table(), {root}) - {root})


def pss_mib(pids: list[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        pss = [line for line in text.splitlines() if line.startswith("Pss:")]
        total_kb += int(pss[0].split()[1])
    return total_kb / 1024


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime + children_cpu_s()


def tree_cpu_s(pids: list[int]) -> float:
    """CPU time of live processes and of the children they reaped (a sandbox's server is reaped
    by its bwrap init, which dies by SIGKILL: counted now or never)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


async def warm_memory(task: TaskDir, root: Path, counts: list[int]) -> dict[str, Any]:
    """PSS per warm sandbox and CPU per slot, tool servers forked (zygote) against exec'd."""
    from bureau.sandbox.local import LocalRuntime

    out: dict[str, Any] = {}
    for count in counts:
        for variant, zygote in (("forked", True), ("exec", False)):
            runtime = LocalRuntime(root / f"mem-{variant}-{count}", zygote=zygote)
            pool = WarmPool(
                runtime, root / f"pool-mem-{variant}-{count}", size=count, start_timeout_s=900
            )
            cpu, started = own_cpu_s(), time.perf_counter()
            await pool.warm(task)
            wall = time.perf_counter() - started
            await asyncio.sleep(2)  # let start-up garbage settle
            ready = sum(q.qsize() for q in pool._ready.values())
            pids = sandbox_processes(os.getpid())
            pss = pss_mib(pids)
            cpu = own_cpu_s() - cpu + tree_cpu_s(pids)
            await pool.close()
            runtime.close()
            out[f"{variant}_{count}"] = {
                "ready": ready,
                "pss_mib_per_sandbox": round(pss / max(1, ready), 1),
                "cpu_s_per_slot": round(cpu / max(1, ready), 2),
                "wall_s_per_slot": round(wall / max(1, ready), 2),
            }
            print(f"{variant} x{count}: {out[f'{variant}_{count}']}", flush=True)
        f, e = out[f"forked_{count}"], out[f"exec_{count}"]
        out[f"exec_over_forked_{count}"] = {
            "pss": round(e["pss_mib_per_sandbox"] / f["pss_mib_per_sandbox"], 1),
            "cpu": round(e["cpu_s_per_slot"] / f["cpu_s_per_slot"], 1),
        }
    return out


async def tool_latency(runtime: Any, task: TaskDir, root: Path, repeats: int) -> dict[str, Any]:
    pool = WarmPool(runtime, root / "pool-tools", size=1)
    slot = await pool.acquire(task)
    out: dict[str, Any] = {}
    try:
        calls = sample_calls(task.workspace_dir)
        served = {t.name for t in slot.tools.tools}
        # The order of `calls`: files are created before the calls that edit them.
        for name in [*(n for n in calls if n in served), *sorted(served - set(calls))]:
            args = calls.get(name)
            if args is None:
                out[name] = "no sample call"
                continue
            times = []
            error = None
            for _ in range(repeats):
                started = time.perf_counter()
                result = await slot.tools.call(name, args, timeout_s=60)
                times.append(time.perf_counter() - started)
                if result.is_error:
                    error = str(result.content[0])[:120] if result.content else "error"
            out[name] = {"p50_ms": round(1000 * statistics.median(times), 1)}
            if error:
                out[name]["error"] = error
    finally:
        await slot.close()
        await pool.close()
    return out


async def throughput(runtime: Any, tasks: list[TaskDir], root: Path, levels: list[int]) -> Any:
    out = {}
    for concurrency in levels:
        started = time.perf_counter()
        results = await run_trials(
            tasks,
            OracleAgent,
            runtime,
            root / f"trials-{concurrency}",
            config=SchedulerConfig(concurrency=concurrency, max_starting=min(concurrency, 8)),
        )
        seconds = time.perf_counter() - started
        errors = [r for r in results if r.system_error]
        out[f"c{concurrency}"] = {
            "trials": len(results),
            "seconds": round(seconds, 1),
            "trials_per_min": round(60 * len(results) / seconds, 1),
            "system_errors": len(errors),
            "not_1.0": sum(1 for r in results if r.reward != 1.0),
        }
        print(f"concurrency {concurrency}: {out[f'c{concurrency}']}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels; '' skips")
    parser.add_argument("--only-tools", action="store_true", help="just the tool latencies")
    parser.add_argument("--only-groups", action="store_true", help="just the server groups")
    parser.add_argument("--only-memory", action="store_true", help="just the warm sandboxes")
    parser.add_argument("--warm", default="8,64", help="warm-sandbox counts for the memory part")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bureau-bench-sandbox-"))
    n_tasks = 40 if args.quick else args.tasks
    build_split(BuildConfig("eval", max(3, n_tasks // 17), n_tasks, 7, root / "ds", force=True))
    tasks = [load_task_dir(p) for p in sorted((root / "ds").iterdir()) if p.is_dir()]
    law = next(t for t in tasks if "-law-" in t.path.name)
    runtime = get_runtime("local", root=root / "sandboxes")
    report: dict[str, Any] = {}
    if args.warm:
        counts = [int(x) for x in args.warm.split(",") if x]
        report["warm_sandboxes"] = asyncio.run(warm_memory(law, root, counts))
        print(json.dumps(report["warm_sandboxes"], indent=2), flush=True)
    if args.only_memory:
        runtime.close()
        return
    report["server_groups"] = server_groups(law.workspace_dir, 4 if args.quick else 10)
    print(json.dumps(report["server_groups"], indent=2), flush=True)
    if args.only_groups:
        runtime.close()
        return
    if not args.only_tools:
        report["start_to_ready_to_teardown"] = asyncio.run(
            start_to_ready(runtime, law, root, 10 if args.quick else 40)
        )
        print(json.dumps(report, indent=2), flush=True)
    report["tool_call_latency"] = asyncio.run(
        tool_latency(runtime, law, root, 3 if args.quick else 10)
    )
    print(json.dumps(report["tool_call_latency"], indent=2), flush=True)
    levels = [] if args.only_tools else [int(x) for x in args.levels.split(",") if x]
    if levels:
        report["oracle_throughput"] = asyncio.run(throughput(runtime, tasks, root, levels))
    runtime.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
