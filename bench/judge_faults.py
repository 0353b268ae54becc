"""The judge client under faults, side by side with a clean endpoint, in one run.

A scripted endpoint on 127.0.0.1 (`tests/judge/fault_server.py`) answers each request with a
fault drawn at the given rates (429 with Retry-After, 500, a body that is not JSON, a
truncated body, a reply that is not a verdict, a hang past the timeout) or a verdict. The same
number of verdicts is then asked of a clean endpoint. Printed: the share of verdicts that came
back, the mean time per verdict both ways and the difference, the calls per verdict, and the
most requests any key sent in any 60-second window against its RPM limit.

    .venv/bin/python bench/judge_faults.py --verdicts 150 --rpm 40 --keys 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "judge"))
from fault_server import VERDICT_YES, FaultServer

from bureau.judge import JudgeClient, JudgeConfig, JudgeRequest
from bureau.judge.client import CallRecord

FAULTS = {  # kind, argument, rate
    "429": ("1", 0.08),
    "500": (None, 0.08),
    "not_json": (None, 0.05),
    "truncated": (None, 0.05),
    "verdict_invalid": ("looks right to me", 0.05),
    "hang": (5, 0.05),
}


def script(calls: int, seed: int) -> list[tuple[str, Any]]:
    rng = random.Random(seed)
    steps: list[tuple[str, Any]] = []
    for _ in range(calls):
        draw, chosen = rng.random(), ("verdict", VERDICT_YES)
        for kind, (arg, rate) in FAULTS.items():
            if draw < rate:
                chosen = ("verdict", arg) if kind == "verdict_invalid" else (kind, arg)
                break
            draw -= rate
        steps.append(chosen)
    return [*steps, ("verdict", VERDICT_YES)]


async def run(
    url: str, verdicts: int, keys: int, rpm: int | None
) -> tuple[int, float, list[CallRecord]]:
    settings = JudgeConfig(
        url=url, model="judge", timeout_s=1.0, rpm_per_key=rpm, max_concurrency=8,
        backoff_base_s=0.1, backoff_max_s=2.0, max_attempts=8,
    )  # fmt: skip
    request = JudgeRequest(question="Is the total right?", reference="41.2", work="41.2")
    async with JudgeClient(settings, [f"sk-bench-{i}" for i in range(keys)]) as client:

        async def one() -> float | None:
            started = time.perf_counter()
            try:
                await client.judge(request)
            except Exception:
                return None
            return time.perf_counter() - started

        times = await asyncio.gather(*(one() for _ in range(verdicts)))
    done = [t for t in times if t is not None]
    return len(done), statistics.fmean(done) if done else float("nan"), client.calls


def busiest_minute(calls: list[CallRecord]) -> int:
    worst = 0
    for key in {c.key_index for c in calls}:
        sent = sorted(c.sent for c in calls if c.key_index == key)
        worst = max(worst, *(sum(1 for t in sent[i:] if t < s + 60) for i, s in enumerate(sent)))
    return worst


def scenario(name: str, steps: list[tuple[str, Any]], verdicts: int, keys: int, rpm: int | None):
    with FaultServer(steps) as server:
        started = time.perf_counter()
        done, mean_s, calls = asyncio.run(run(server.url, verdicts, keys, rpm))
        wall = time.perf_counter() - started
    outcomes: dict[str, int] = {}
    for call in calls:
        outcomes[call.outcome] = outcomes.get(call.outcome, 0) + 1
    row = {
        "verdicts": f"{done}/{verdicts}",
        "mean_s_per_verdict": round(mean_s, 3),
        "calls_per_verdict": round(len(calls) / max(done, 1), 2),
        "busiest_key_minute": busiest_minute(calls),
        "rpm_limit": rpm,
        "wall_s": round(wall, 1),
        "outcomes": outcomes,
    }
    print(json.dumps({name: row}), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verdicts", type=int, default=150)
    parser.add_argument("--keys", type=int, default=3)
    parser.add_argument("--rpm", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    faults = script(4 * args.verdicts, args.seed)
    clean = [("verdict", VERDICT_YES)]
    report: dict[str, Any] = {
        # Latency: no rate limit, so the difference is what the faults and retries cost.
        "faults": scenario("faults", faults, args.verdicts, args.keys, None),
        "clean": scenario("clean", clean, args.verdicts, args.keys, None),
        # Rate: the same faults under an RPM limit per key, counted per 60 s window.
        "faults_rpm": scenario("faults_rpm", faults, args.verdicts, args.keys, args.rpm),
    }
    report["added_s_per_verdict"] = round(
        report["faults"]["mean_s_per_verdict"] - report["clean"]["mean_s_per_verdict"], 3
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
