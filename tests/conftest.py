"""Fixtures shared across packages: tiny random-weight Qwen3 models with the real vocabulary,
and a small generated dataset.

Tests never download weights. The models and the dataset are built once per test session, also
under pytest-xdist: the first worker that needs one builds it under a file lock in the session's
shared temporary folder, and the others wait for it and reuse it.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bureau.records import ToolCallRecord, TrajectoryRecord, TurnRecord
from fixture_support import shared

# Each pytest-xdist worker gets one core's worth of threads: two workers whose torch each spins
# up an OpenMP team of two on two cores wait on each other (measured: the pretraining and SFT
# tests side by side took 56 s with the default and 44 s with one thread each). Set before
# anything imports torch; processes the tests start (CLI runs, Ray actors) inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")

HOST_MEMORY_LOCK = Path(tempfile.gettempdir()) / f"bureau-tests-host-memory-{os.getuid()}.lock"


@pytest.fixture(autouse=True)
def _host_memory_turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests marked `host_memory` measure memory of the whole host (/proc/meminfo), which a
    test on another xdist worker would disturb (a sandbox filling its tmpfs grows Shmem by its
    storage limit): such a test holds this lock exclusively, every other test shares it."""
    exclusive = request.node.get_closest_marker("host_memory") is not None
    with open(HOST_MEMORY_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


DURATIONS = Path(__file__).with_name("durations.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, by their measured seconds (`durations.json`): pytest-xdist then
    hands them out first (with `--no-loadscope-reorder`), and the short ones fill the gaps
    instead of a long file running alone at the end. Order within a file is kept.

    The session's models (`tiny_model`, and `tool_model`: half a minute on one core) are built
    by the first test that asks for them, and a worker that asks while another builds them waits.
    So the second worker starts on the longest file that needs them when the first unit's first
    test does not (it builds them while that test runs, before the unit's later tests ask), and
    on the longest file that needs neither when it does (instead of waiting)."""
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}

    def file(item: pytest.Item) -> str:
        return ONE_AFTER_ANOTHER.get(item.nodeid.split("::", 1)[0], item.nodeid.split("::", 1)[0])

    cost: dict[str, float] = {}
    for name, spent in seconds.items():
        unit = ONE_AFTER_ANOTHER.get(name, name)
        cost[unit] = cost.get(unit, 0.0) + spent
    items.sort(key=lambda item: -cost.get(file(item), 1.0))
    models = {"tiny_model", "tool_model"}
    needs = {file(item) for item in items if models & set(getattr(item, "fixturenames", ()))}
    order = list(dict.fromkeys(file(item) for item in items))
    if not order:
        return
    first_needs = bool(models & set(getattr(items[0], "fixturenames", ())))
    second = next((f for f in order[1:] if (f in needs) != first_needs), None)
    if second is not None:
        rank = {f: i for i, f in enumerate(order)}
        rank[second] = 0.5  # right after the first
        items.sort(key=lambda item: rank[file(item)])


# Files whose tests each run a whole `bureau train` on Ray (a trainer, engines, rollout workers,
# sandboxes: several processes that expect both cores). Two at once on two cores took three
# times as long as one after the other, so they are one unit of work for pytest-xdist: one
# worker runs them in turn while the other runs everything else.
ONE_AFTER_ANOTHER = {
    "tests/loop/test_ray_loop.py": "ray-training-runs",
    "tests/learning/test_rl_learning.py": "ray-training-runs",
    "tests/loop/test_topology.py": "ray-training-runs",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile`, with the files of `ONE_AFTER_ANOTHER` grouped into one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return ONE_AFTER_ANOTHER.get(file, file)

    return Scheduling(config, log)


_measured: dict[str, float] = {}
_cpu: dict[str, float] = {}
CPU_SECONDS = DURATIONS.with_name("cpu-seconds.json")


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_cpu_group: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    """With BUREAU_RECORD_DURATIONS, each test process moves into a cgroup of its own in the
    cgroup v1 cpuacct hierarchy when it can (root, and the hierarchy mounted; bureau's
    sandboxes use the memory, pids and cpu ones): everything its tests start, Ray's raylet and
    actors and vLLM's processes included, is then counted, not only the children it waited for.
    """
    global _cpu_group
    if not os.environ.get("BUREAU_RECORD_DURATIONS") or not (CPUACCT / "cgroup.procs").is_file():
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if worker == "main" and getattr(config.option, "numprocesses", None):
        return  # pytest-xdist's controller: its workers run the tests
    group = CPUACCT / f"bureau-tests-{os.getppid() if worker != 'main' else os.getpid()}" / worker
    try:
        group.mkdir(parents=True, exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return  # not allowed here: the waited-for children's rusage, below
    _cpu_group = group


def pytest_unconfigure(config: pytest.Config) -> None:
    global _cpu_group
    if _cpu_group is None:
        return
    try:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))  # back to the root, then remove
        _cpu_group.rmdir()
        _cpu_group.parent.rmdir()
    except OSError:
        pass  # a process left in it, or the other worker's folder still there
    _cpu_group = None


def _cpu_seconds() -> float:
    """CPU time of this test process's cgroup (above) when it has one; otherwise of this
    process and of every child it (or a child of it) has waited for."""
    if _cpu_group is not None:
        return int((_cpu_group / "cpuacct.usage").read_text()) / 1e9
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if os.environ.get("BUREAU_RECORD_DURATIONS"):
        spent = _cpu_seconds() - getattr(item, "_bureau_cpu_mark", _cpu_seconds())
        item._bureau_cpu_mark = _cpu_seconds()  # type: ignore[attr-defined]
        report.user_properties.append(("cpu_s", spent))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if os.environ.get("BUREAU_RECORD_DURATIONS"):
        item._bureau_cpu_mark = _cpu_seconds()  # type: ignore[attr-defined]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    file = report.nodeid.split("::", 1)[0]
    _measured[file] = _measured.get(file, 0.0) + report.duration
    for key, value in report.user_properties:
        if key == "cpu_s":
            _cpu[file] = _cpu.get(file, 0.0) + float(value)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With BUREAU_RECORD_DURATIONS set (`make durations`), write each file's seconds (setup,
    call and teardown of its tests) to `durations.json`, for the order above, and the CPU
    seconds its tests spent to `cpu-seconds.json`: with a cpuacct cgroup per test process
    (`pytest_configure`), of every process they started; without one, of the test process and
    the processes it waited for (not Ray's actors, which the raylet starts)."""
    if os.environ.get("BUREAU_RECORD_DURATIONS") and not hasattr(session.config, "workerinput"):
        ranked = sorted(_measured.items(), key=lambda kv: -kv[1])
        DURATIONS.write_text(json.dumps({f: round(s, 1) for f, s in ranked}, indent=1) + "\n")
        spent = sorted(_cpu.items(), key=lambda kv: -kv[1])
        CPU_SECONDS.write_text(json.dumps({f: round(s, 1) for f, s in spent}, indent=1) + "\n")


# 2 layers, hidden 64: about 20M parameters, almost all of them the 151,936-row embeddings.
TINY_SHAPE = {"layers": 2, "hidden": 64, "heads": 2, "kv_heads": 1}


@pytest.fixture(scope="session")
def tokenizer_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = shared(tmp_path_factory, "tokenizer-cache", lambda p: p.mkdir())
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, tokenizer_cache: Path) -> Path:
    """A local Hugging Face checkpoint folder (qwen3 vocabulary, untied embeddings, fp32)."""
    import torch  # noqa: F401
    import transformers  # noqa: F401

    from bureau.models.checkpoint import init_checkpoint

    def build(out: Path) -> None:
        init_checkpoint("qwen3", out=out, seed=0, tokenizer_cache_dir=tokenizer_cache, **TINY_SHAPE)

    return shared(tmp_path_factory, "qwen3-tiny", build)


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One eval world with 6 tasks and about 20 files."""
    from bureau.worlds.builder import BuildConfig, build_split

    def build(out: Path) -> None:
        build_split(BuildConfig("eval", 1, 6, 3, out, files_per_world=20, jobs=1))

    return shared(tmp_path_factory, "dataset-eval-1x6", build)


@pytest.fixture(scope="session")
def tool_model(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_cache: Path, small_dataset: Path
) -> Path:
    """A tiny Qwen3 (`TINY_SHAPE`) on the demo vocabulary (`qwen3-demo`: Qwen3's BPE stopped at
    8,192 ranks, 8,320 rows) after `bureau model warm-start`: it calls three fs_ tools,
    imperfectly. The demo's vocabulary, as `make demo` uses: with Qwen3's 151,936 rows the
    output layer dominated every step of the engines and trainers that serve it, and the warm
    start took 51.8 s on one core instead of 21.3 s (`docs/benchmarks.md`)."""
    import tempfile

    from bureau.cli.common import task_dirs
    from bureau.harness.warmstart import warm_start
    from bureau.models.checkpoint import init_checkpoint

    def build(out: Path) -> None:
        with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
            base = init_checkpoint(
                "qwen3-demo", out=Path(scratch) / "base", seed=0,
                tokenizer_cache_dir=tokenizer_cache, **TINY_SHAPE,
            )  # fmt: skip
            warm_start(base, out, task_dirs(small_dataset))  # the default tools and steps

    return shared(tmp_path_factory, "qwen3-demo-tiny-tools", build)


@pytest.fixture
def make_record() -> Callable[..., TrajectoryRecord]:
    """A small hand-made trajectory record: two turns, one tool call (no model needed)."""
    return _record


def _record(trajectory_id: str = "t1", reward: float | None = 1.0) -> TrajectoryRecord:
    call = {"id": "call_1_0", "type": "function", "function": {"name": "fs_list", "arguments": {}}}
    return TrajectoryRecord(
        trajectory_id=trajectory_id,
        task_name="bureau/law-1",
        model="tiny",
        prompt_ids=[1, 2, 3],
        token_ids=[1, 2, 3, 10, 11, 4, 5, 12],
        loss_mask=[0, 0, 0, 1, 1, 0, 0, 1],
        sampler_logprobs=[0.0, 0.0, 0.0, -0.123456789012345, -2.5, 0.0, 0.0, -1e-9],
        weight_versions=[-1, -1, -1, 7, 7, -1, -1, 8],
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "reasoning_content": "hm", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1_0", "name": "fs_list", "content": "a.pdf"},
            {"role": "assistant", "content": "done"},
        ],
        tools=[{"type": "function", "function": {"name": "fs_list", "parameters": {}}}],
        turns=[
            TurnRecord(
                [10, 11],
                [-0.123456789012345, -2.5],
                [7, 7],
                "stop",
                "e",
                0.1,
                [4, 5],
                [{"role": "tool", "content": "a.pdf"}],
            ),
            TurnRecord([12], [-1e-9], [8], "stop", "e", 0.1),
        ],
        tool_calls=[ToolCallRecord(1, "call_1_0", "fs_list", {}, "ok", 0.01, 5, False)],
        stop_reason="answered",
        llm_time_s=0.2,
        tool_time_s=0.01,
        total_time_s=0.3,
        reward=reward,
    )
