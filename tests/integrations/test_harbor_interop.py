"""Harbor interoperability, both ways: Harbor runs bureau's tasks, bureau runs Harbor's.

- Harbor (in a Python 3.12 venv of its own, see `harbor_venv.py`) runs a generated bureau
  dataset, plus a task written by hand in Harbor's format, with `-a oracle` (reward 1.0) and
  `-a nop` (reward 0.0), in bureau's bubblewrap environment
  (`-e bureau.integrations.harbor:BubblewrapEnvironment`): no Docker involved.
- `harbor_probe.py` drives that environment through Harbor's `BaseEnvironment` API, one feature
  at a time (exec, env, cwd, upload/download, timeouts, cancellation, no network).
- `bureau tasks check` runs the hand-written Harbor task (a plain `reward.txt`, no bureau
  grader) in bureau's own trial runner: oracle passes, nop is reported broken.

The Harbor parts skip unless a Python >= 3.12 that actually starts is found. SLOW: the first run
builds `.venv-harbor/` (about 3 minutes, or 1 with a warm pip cache); later runs reuse it while
pyproject.toml is unchanged, and the whole module then takes about 40 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from harbor_venv import ensure_harbor_venv, find_python312

from bureau.records import TrajectoryRecord

pytestmark = [
    pytest.mark.harbor,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is missing"),
]

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "harbor-hello"
ENVIRONMENT = "bureau.integrations.harbor:BubblewrapEnvironment"
HARBOR_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def harbor_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of the Harbor venv. SLOW on first use: builds it (pip install harbor + bureau)."""
    python = find_python312()
    if python is None:
        pytest.skip("no Python >= 3.12 that runs (set BUREAU_PYTHON312 to one)")
    log = tmp_path_factory.mktemp("harbor-venv") / "pip.log"
    try:
        return ensure_harbor_venv(python, log=log)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"building the Harbor venv failed ({exc}):\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def dataset(harbor_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated world with 2 tasks (built by bureau on 3.12), plus the hand-written task."""
    root = tmp_path_factory.mktemp("harbor-ds") / "ds"
    build = [
        *("worlds", "build", "--split", "eval", "--worlds", "1", "--tasks", "2"),
        *("--files", "20", "--out", str(root), "--force"),
    ]
    done = subprocess.run(
        [str(harbor_bin / "bureau"), *build], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.copytree(FIXTURE, root / FIXTURE.name)
    return root


def harbor_run(harbor_bin: Path, path: Path, agent: str, jobs_dir: Path) -> list[dict[str, Any]]:
    """`harbor run` in bureau's environment; the result.json of every trial of the job."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [
        *(str(harbor_bin / "harbor"), "run", "-p", str(path), "-a", agent, "-e", ENVIRONMENT),
        *("-o", str(jobs_dir), "--job-name", agent, "-n", "2", "--yes"),
    ]
    done = subprocess.run(
        command,
        env=env,
        cwd=jobs_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HARBOR_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    # Harbor's layout: <jobs_dir>/<job_name>/result.json, and one <trial_name>/result.json each.
    job = json.loads((jobs_dir / agent / "result.json").read_text())
    assert job["stats"]["n_errored_trials"] == 0, json.dumps(job["stats"], indent=1)
    return [json.loads(p.read_text()) for p in sorted((jobs_dir / agent).glob("*/result.json"))]


def seconds(timing: dict[str, str] | None) -> float:
    assert timing is not None
    started, finished = (datetime.fromisoformat(timing[k]) for k in ("started_at", "finished_at"))
    return (finished - started).total_seconds()


@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_harbor_runs_tasks_in_bureau_sandbox(
    harbor_bin: Path, dataset: Path, tmp_path: Path, agent: str, reward: float
) -> None:
    trials = harbor_run(harbor_bin, dataset, agent, tmp_path)
    tasks = sorted(str(p) for p in dataset.iterdir() if (p / "task.toml").exists())
    assert len(tasks) == 3
    assert sorted(trial["task_id"]["path"] for trial in trials) == tasks
    for trial in trials:
        assert trial["exception_info"] is None, trial["exception_info"]
        assert trial["verifier_result"]["rewards"]["reward"] == reward, trial["trial_name"]
        phases = {
            k: seconds(trial[k]) for k in ("environment_setup", "agent_execution", "verifier")
        }
        total = seconds({"started_at": trial["started_at"], "finished_at": trial["finished_at"]})
        print(f"{agent} {trial['trial_name']}: {total:.2f} s in Harbor; phases {phases}")


def test_harbor_validates_the_harness_atif_export(
    harbor_bin: Path, tmp_path: Path, make_record: Callable[..., TrajectoryRecord]
) -> None:
    """Harbor's own ATIF model accepts bureau's trajectory export."""
    from bureau.harness.export import to_atif

    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(to_atif(make_record())))
    check = (
        "import sys; from harbor.models.trajectories import Trajectory; "
        "t = Trajectory.model_validate_json(open(sys.argv[1]).read()); "
        "print(len(t.steps), t.steps[2].tool_calls[0].function_name)"
    )
    done = subprocess.run(
        [str(harbor_bin / "python"), "-c", check, str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["4", "fs_list"]


def test_environment_features_through_harbor_api(harbor_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [str(harbor_bin / "python"), str(HERE / "harbor_probe.py"), str(FIXTURE), str(out)],
        capture_output=True,
        text=True,
        timeout=HARBOR_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    seen = json.loads(out.read_text())
    print(json.dumps(seen))
    assert seen["exec"] == ["/app\nout\n", "err\n", 3]  # default cwd is the task's workdir
    assert seen["env"] == "hi there\n"
    assert seen["cwd"] == "/tmp\n"
    assert seen["network"] == "refused\n"
    assert seen["upload"] == "uploaded\na\n"
    # Until Harbor uploads /tests, the agent sees neither /tests nor /logs/verifier; then the
    # verifier gets an empty /tmp of its own, only the uploaded tests (read-only, scripts made
    # executable) and no reward the agent wrote; afterwards the agent's /tmp is back.
    assert not seen["agent_sees"]  # Harbor reports empty output as None
    sees = seen["verifier_sees"]
    assert sees.startswith("/logs/verifier:\n\n/tests:\nsub\ntest.sh\n\n/tmp:\n"), sees
    assert "agent-note" not in sees and sees.endswith("verifier ran\n"), sees
    assert seen["after_verification"] == "agent\n"
    assert seen["download"] == ["0.5\n", "uploaded\n"]
    assert seen["filtered"] == [
        ["deep/r.txt", "keep.txt"],  # include *.txt (fnmatch's * matches /)
        ["drop.log", "keep.txt"],  # exclude deep/
    ]
    assert seen["is_dir"] == [True, True]
    assert seen["timeout"] == "Command timed out after 1 seconds"
    assert seen["cancel"] == "timed out"
    assert seen["early_file"] is True
    assert seen["late_file"] is False  # the cancelled command's background child was killed
    assert seen["concurrent"] == [f"{i}\n" for i in range(8)]
    assert "not started" in seen["after_stop"]


def bureau_check(
    task: Path, agent: str, trials_dir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    bureau = Path(sys.executable).parent / "bureau"
    command = [str(bureau), "tasks", "check", str(task), "--agent", agent, *extra]
    return subprocess.run(
        [*command, "--concurrency", "1", "--trials-dir", str(trials_dir)],
        capture_output=True,
        text=True,
        timeout=HARBOR_TIMEOUT_S,
    )


def test_bureau_checks_a_harbor_format_task(tmp_path: Path) -> None:
    """Oracle scores 1 and nop 0 on the hand-written task, so `check` passes with both agents."""
    task = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, task)
    for agent, reward in (("oracle", 1.0), ("nop", 0.0)):
        done = bureau_check(task, agent, tmp_path / agent)
        assert done.returncode == 0, done.stdout + done.stderr
        (result,) = (tmp_path / agent).rglob("result.json")
        assert json.loads(result.read_text())["reward"] == reward


def test_bureau_check_fails_a_broken_harbor_format_task(tmp_path: Path) -> None:
    """A solution that writes the wrong greeting: the oracle scores 0, so `check` exits 1."""
    task = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, task)
    solve = task / "solution" / "solve.sh"
    solve.write_text(solve.read_text().replace("hello, harbor", "goodbye"))
    done = bureau_check(task, "oracle", tmp_path / "oracle")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 broken task" in done.stdout and "reward 0.0" in done.stdout, done.stdout


# -- every `harbor init` variant, both directions ----------------------------------------------

# variant -> (oracle reward, nop reward) when it runs offline; a string is the refusal's words.
HARBOR_INIT_OUTCOMES: dict[str, tuple[float | str, float | str]] = {
    # pytest is installed by tests/Dockerfile (a COPY from the uv image, a pinned pip install):
    # an image build, refused naming the lines.
    "separate": ("tests/Dockerfile: line 3", "tests/Dockerfile: line 3"),
    # test.sh downloads uv from the internet: offline, it can only score 0.
    "shared": (0.0, 0.0),
    "steps": ("steps/step-1/tests/Dockerfile: line 3", "steps/step-1/tests/Dockerfile: line 3"),
    "separate-nopytest": (1.0, 0.0),
    "shared-nopytest": (1.0, 0.0),
    "steps-nopytest": (1.0, 0.0),
}
# bureau's own runner gives the same outcomes (it runs [[steps]] with the oracle and nop).
BUREAU_INIT_OUTCOMES = HARBOR_INIT_OUTCOMES


@pytest.fixture(scope="module")
def init_tasks(harbor_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every `harbor init` variant, scaffolded by Harbor itself and filled in."""
    from harbor_init_tasks import scaffold

    root = tmp_path_factory.mktemp("harbor-init")
    scaffold(harbor_bin, root)
    return root


def harbor_job(
    harbor_bin: Path,
    path: Path,
    agent: str,
    jobs_dir: Path,
    *extra: str,
    env_extra: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """One `harbor run` that must complete even when trials fail; task name -> result."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env_extra or {})}
    command = [
        *(str(harbor_bin / "harbor"), "run", "-p", str(path), "-a", agent, "-e", ENVIRONMENT),
        *("-o", str(jobs_dir), "--job-name", agent, "-n", "2", "--yes", *extra),
    ]
    done = subprocess.run(
        command, env=env, cwd=jobs_dir, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=HARBOR_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    trials = [json.loads(p.read_text()) for p in (jobs_dir / agent).glob("*/result.json")]
    return {trial["task_name"].split("/")[-1]: trial for trial in trials}


def outcome(trial: dict[str, Any]) -> float | str:
    """The reward of a Harbor trial, or its error's message (a step's, for multi-step)."""
    errors = [trial.get("exception_info")]
    errors += [step.get("exception_info") for step in trial.get("step_results") or []]
    for error in errors:
        if error:
            return str(error["exception_message"])
    return float(trial["verifier_result"]["rewards"]["reward"])


@pytest.mark.parametrize("agent", ["oracle", "nop"])
def test_harbor_runs_every_init_variant_in_bureau_sandbox(
    harbor_bin: Path, init_tasks: Path, tmp_path: Path, agent: str
) -> None:
    trials = harbor_job(
        harbor_bin, init_tasks, agent, tmp_path, "--ek", "offline_public_tasks=true"
    )
    assert sorted(trials) == sorted(HARBOR_INIT_OUTCOMES)
    column = 0 if agent == "oracle" else 1
    for variant, expected in HARBOR_INIT_OUTCOMES.items():
        got = outcome(trials[variant])
        print(f"harbor {agent} {variant}: {got}")
        if isinstance(expected[column], str):
            assert isinstance(got, str) and str(expected[column]) in got, (variant, got)
            assert "builds no image" in got and "-e docker" in got, got
        else:
            assert got == expected[column], (variant, got)
    steps = trials["steps-nopytest"]["step_results"]
    assert [s["verifier_result"]["rewards"]["reward"] for s in steps] == [
        1.0 if agent == "oracle" else 0.0
    ] * 2


def test_harbor_refuses_a_public_network_task_per_trial_not_per_job(
    harbor_bin: Path, init_tasks: Path, tmp_path: Path
) -> None:
    """Without offline_public_tasks every variant (all ask for a network, Harbor's default)
    fails on its own, with the advice; the job itself completes."""
    trials = harbor_job(harbor_bin, init_tasks, "oracle", tmp_path)
    assert sorted(trials) == sorted(HARBOR_INIT_OUTCOMES)
    for variant, trial in trials.items():
        got = outcome(trial)
        assert isinstance(got, str), (variant, got)
        if variant not in ("separate", "steps"):  # those name their Dockerfile lines first
            assert "network_mode='public'" in got and "offline_public_tasks" in got, got


@pytest.mark.parametrize("agent", ["oracle", "nop"])
def test_bureau_checks_every_init_variant(
    harbor_bin: Path, init_tasks: Path, tmp_path: Path, agent: str
) -> None:
    column = 0 if agent == "oracle" else 1
    for variant, expected in BUREAU_INIT_OUTCOMES.items():
        trials_dir = tmp_path / variant
        done = bureau_check(init_tasks / variant, agent, trials_dir, "--offline-public-tasks")
        out = " ".join((done.stdout + done.stderr).split())
        print(f"bureau {agent} {variant}: rc {done.returncode}")
        assert "Traceback" not in out
        if isinstance(expected[column], str):
            assert done.returncode == 1 and str(expected[column]) in out, (variant, out)
            assert not trials_dir.exists() or not list(trials_dir.rglob("result.json"))
            continue
        (result,) = trials_dir.rglob("result.json")
        reward = json.loads(result.read_text())["reward"]
        assert reward == expected[column], (variant, out)
        assert done.returncode == (0 if reward == EXPECTED_REWARD[agent] else 1), out
        assert "runs offline although it asks for a network" in out
    refused = bureau_check(init_tasks / "shared-nopytest", agent, tmp_path / "refused")
    out = " ".join(refused.stdout.split())
    assert refused.returncode == 1 and "--offline-public-tasks" in out, out


EXPECTED_REWARD = {"oracle": 1.0, "nop": 0.0}


PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)==([0-9][^\s\\]*)", re.MULTILINE)


def harbor_versions(harbor_bin: Path, names: list[str]) -> dict[str, str]:
    code = "import json, sys\nfrom importlib import metadata\n"
    code += "print(json.dumps({n: metadata.version(n) for n in sys.argv[1:]}))"
    done = subprocess.run(
        [str(harbor_bin / "python"), "-c", code, *names], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_tasks_built_with_bureaus_venv_run_in_harbors(harbor_bin: Path, tmp_path: Path) -> None:
    """The round trip of a pin: tasks built by bureau's own environment (this test's Python)
    pin its versions; Harbor runs them from its own venv, whose versions may differ within a
    major version (`bureau.tasks.image`: the same major stands in). To exercise a difference
    whatever the two venvs resolved to, a second copy pins one package one minor version away
    from Harbor's; with BUREAU_EXACT_PINS=1 that copy is refused, naming the pin. (The empty
    answer's 0.0 through Harbor is `test_harbor_runs_tasks_in_bureau_sandbox[nop]`'s.)"""
    built = tmp_path / "built"
    done = subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", "worlds", "build", "--split", "eval",
         "--worlds", "1", "--tasks", "2", "--files", "20", "--out", str(built)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    tasks = sorted(p for p in built.iterdir() if (p / "task.toml").exists())
    pins = dict(PIN.findall((tasks[0] / "environment" / "Dockerfile").read_text()))
    assert "numpy" in pins and "openpyxl" in pins
    theirs = harbor_versions(harbor_bin, sorted(pins))
    print("pins differing between bureau's venv and Harbor's:",
          {n: (v, theirs[n]) for n, v in pins.items() if theirs[n] != v})  # fmt: skip
    # The same tasks again, one package pinned a minor version away from Harbor's (a copy under
    # other folder names, so one Harbor job runs both).
    shifted = []
    major, minor, *_ = (int(x) for x in theirs["openpyxl"].split("."))
    other = f"{major}.{minor + 1 if minor == 0 else minor - 1}.0"
    for task in tasks:
        copy = built / f"{task.name}-shifted"
        shutil.copytree(task, copy)
        dockerfile = copy / "environment" / "Dockerfile"
        pin = f"openpyxl=={pins['openpyxl']}"
        dockerfile.write_text(dockerfile.read_text().replace(pin, f"openpyxl=={other}"))
        toml = copy / "task.toml"
        name = f'name = "bureau/{task.name}"'
        assert name in toml.read_text()
        toml.write_text(toml.read_text().replace(name, f'name = "bureau/{copy.name}"'))
        shifted.append(copy)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    trials = harbor_job(harbor_bin, built, "oracle", jobs)
    assert sorted(trials) == sorted(t.name for t in [*tasks, *shifted])
    assert {name: outcome(t) for name, t in trials.items()} == dict.fromkeys(trials, 1.0)
    jobs = tmp_path / "jobs-exact"
    jobs.mkdir()
    only_shifted = tmp_path / "only-shifted"
    only_shifted.mkdir()
    for copy in shifted:
        copy.rename(only_shifted / copy.name)
    exact = {"BUREAU_EXACT_PINS": "1"}
    trials = harbor_job(harbor_bin, only_shifted, "oracle", jobs, env_extra=exact)
    assert len(trials) == len(shifted)
    for trial in trials.values():
        got = outcome(trial)
        assert isinstance(got, str) and f"openpyxl=={other}" in got, got
