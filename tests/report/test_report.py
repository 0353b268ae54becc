"""`bureau report RUN`: a run folder read back, and its page.

A hand-made training run (three steps, an evaluation before and after, trials with known
verdicts) checks the numbers the page draws against hand computation; the page is then opened
in headless Chromium, which must render every chart's points with no script error. The real
runs of `bureau train`, `bureau eval`, `bureau preeval` and `tasks check --agent harness` get
their reports in the tests that make them (`report_support.check_report`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bureau.report.page import render, write_report
from bureau.report.run import NotARun, load_run
from bureau.trials.result import TrialResult
from report_support import check_report, chromium_render

T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def _task(root: Path, name: str, domain: str, template: str) -> Path:
    folder = root / "tasks" / name
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(
        f'version = "1.0"\n[metadata]\ndomain = "{domain}"\ntemplate = "{template}"\n'
    )
    return folder


def _trial(
    folder: Path,
    name: str,
    task: Path,
    passed: bool | None,
    *,
    status: str = "completed",
    stop: str = "answered",
    turns: int = 3,
    tokens: int = 100,
) -> None:
    reward = None if passed is None else (1.0 if passed else 0.5)
    result = TrialResult(
        task_name=f"ds/{task.name}",
        trial_name=name,
        trial_uri=f"file://{folder / name}",
        task_id={"path": str(task)},
        task_checksum="0",
        agent_info={"name": "harness", "version": "1"},
        status=status,
        reward=reward,
        verifier_result=None
        if reward is None
        else {"rewards": {"reward": reward, "pass": float(bool(passed))}},
        started_at=T0,
        finished_at=T0 + timedelta(seconds=20),
        agent_metadata={"stop_reason": stop, "num_turns": turns, "num_sampled_tokens": tokens},
    )
    (folder / name).mkdir(parents=True)
    (folder / name / "result.json").write_text(result.model_dump_json())


def _step_file(run: Path, step: int, trials: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (run / "trajectories").mkdir(exist_ok=True)
    pq.write_table(
        pa.table({"trial_name": trials, "task_name": ["x"] * len(trials)}),
        run / "trajectories" / f"step-{step:06d}.parquet",
    )


def _eval_entry(version: int, label: str, rate: float) -> dict[str, object]:
    return {
        "label": label, "version": version, "pass_at_1": rate, "pass_at_1_low": rate - 0.1,
        "pass_at_1_high": rate + 0.1, "reward": rate, "graded": 4, "system_errors": 0,
        "held_out": True, "time_s": 3.0,
    }  # fmt: skip


@pytest.fixture
def train_run(tmp_path: Path) -> Path:
    """Three steps of two tasks (law and banking), two attempts each."""
    run = tmp_path / "run"
    a = _task(tmp_path, "a", "law", "law.register")
    b = _task(tmp_path, "b", "banking", "banking.comps")
    trials = run / "trials" / "train"
    # step 1: a pass+fail, b fail+fail; step 2: a pass+pass, b pass+fail; step 3: all pass.
    verdicts = {1: [True, False, False, False], 2: [True, True, True, False], 3: [True] * 4}
    for step, found in verdicts.items():
        names = []
        for i, passed in enumerate(found):
            name = f"s{step}-{i}"
            _trial(
                trials, name, a if i < 2 else b, passed, stop="max_turns" if i == 3 else "answered"
            )
            names.append(name)
        _step_file(run, step, names)
    # A system error the machinery caused, outside every step (masked, never trained on).
    _trial(trials, "lost", a, None, status="sandbox_start_failed")
    rows = []
    for step in (1, 2, 3):
        rows.append({"step": step, "time": 100.0 + step, "live/buffer_size": 0})
        rows.append(
            {
                "step": step,
                "time": 100.5 + step,
                "data/group_ids": [f"g{step}"],
                "rollout/reward": sum(0.5 + 0.5 * p for p in verdicts[step]) / 4,
                "rollout/pass_at_1": sum(verdicts[step]) / 4,
                "time/step_s": 1.0,
                "staleness/group_max": step - 1,
                "buffer/dropped_stale": 1 if step == 3 else 0,
                "train/staleness_tokens/0": 30,
                f"train/staleness_tokens/{min(step, 2) - 1}": 10,
                "mismatch_kl": 0.001 * step,
                "abs_logprob_diff": 0.01 * step,
                "perf/sampled_tokens_per_s": 50.0,
                "train/tokens_per_s": 200.0,
                "perf/trainer_wait_ratio": 0.2,
                "weights/sync_s": 0.3,
                "weights/export_s": 0.1,
                "weights/engine_update_s": 0.2,
            }
        )
    (run / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)) + '\n{"step": 3, "ti')
    (run / "evals.json").write_text(
        json.dumps([_eval_entry(0, "start", 0.25), _eval_entry(3, "end", 0.75)])
    )
    (run / "config.resolved.toml").write_text(
        'steps = 3\n[model]\npath = "/models/tiny"\n[engines]\nkind = "vllm"\ncount = 2\n'
    )
    return run


def test_a_training_run_reads_back_with_hand_computed_figures(train_run: Path) -> None:
    run = load_run(train_run)
    assert run.kind == "train"
    assert [r["step"] for r in run.steps] == [1, 2, 3]  # the cut last line is skipped
    assert len(run.live) == 3
    assert run.facts["engines"] == "2 × vllm" and run.facts["steps"] == "3 of 3"
    # Per step, the trained trials' verdicts: 1/4, 3/4, 4/4; rewards (0.5 or 1 each).
    rates = [(s.step, s.overall.pass_at_1.rate) for s in run.step_intervals]
    assert rates == [(1, 0.25), (2, 0.75), (3, 1.0)]
    means = [s.overall.mean_reward.mean for s in run.step_intervals]
    assert means == [0.625, 0.875, 1.0]
    first = run.step_intervals[0].overall.pass_at_1
    assert first.low <= 0.25 <= first.high and first.high < 1.0
    (trained,) = run.trial_sets
    assert trained.label == "training rollouts"
    # 12 graded trials (8 pass) and one masked system error.
    assert trained.taxonomy["trials"] == 13 and trained.taxonomy["completed"]["count"] == 12
    assert trained.taxonomy["system_errors"]["sandbox_start_failed"]["count"] == 1
    assert trained.report is not None
    assert trained.report.overall.pass_at_1.successes == 8
    assert trained.report.domains["law"].pass_at_1.rate == 5 / 6
    assert trained.report.domains["banking"].pass_at_1.rate == 3 / 6
    assert set(trained.report.templates) == {"law.register", "banking.comps"}
    assert trained.stop_reasons == {"answered": 10, "max_turns": 3}


def test_the_page_draws_every_figure_with_its_points(train_run: Path) -> None:
    page = render(load_run(train_run))
    found = check_report(page)
    # Reward/Pass@1: 3 + 3 trained points, 2 + 2 evaluation points.
    assert found["Reward and Pass@1 over steps"] == 10
    assert found["Staleness of trained tokens"] == 2  # ages 0 and 1
    assert found["Staleness and groups dropped as stale"] == 6
    assert found["Sampler vs trainer: mismatch KL and |Δ logprob|"] == 6
    assert found["Throughput and trainer wait"] == 9
    assert found["Weight sync"] == 9
    # Domains: the training rollouts, the evaluations at steps 0 and 3 have no report inside.
    assert found["Pass@1 per domain"] == 2 and found["Pass@1 per template"] == 2
    assert found["Error taxonomy"] == 2  # completed, sandbox_start_failed
    assert found["Stop reasons"] == 2
    assert "0.250 [0.150, 0.350]" in page  # the start evaluation with its interval
    assert "path = &quot;/models/tiny&quot;" in page  # the resolved config, escaped


def test_the_page_renders_in_chromium_without_script_errors(
    train_run: Path, tmp_path: Path
) -> None:
    path = write_report(train_run)
    assert path == train_run / "report.html"
    rendered = chromium_render(path, tmp_path / "shot.png")
    assert rendered.script_errors == 0
    assert rendered.ready
    charts = rendered.charts
    assert len(charts) == 12, charts  # the ten above, turns and tokens
    assert all(drawn == expected > 0 for expected, drawn in charts.values()), charts
    assert rendered.distinct_colours > 20  # a page with charts, not a blank one


def test_bureau_report_names_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(NotARun, match="no such run folder"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotARun, match=r"metrics\.jsonl"):
        load_run(tmp_path / "empty")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "eval.json").write_text("{not json")
    with pytest.raises(NotARun, match=r"eval\.json"):
        load_run(tmp_path / "broken")
    done = subprocess.run(
        [sys.executable, "-m", "bureau.cli.main", "report", str(tmp_path / "empty")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "metrics.jsonl" in done.stdout + done.stderr
