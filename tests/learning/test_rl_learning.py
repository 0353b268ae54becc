"""The demo's main job in miniature: RL through the whole loop raises the reward of a real task.

`make demo` bootstraps a policy (copy pretraining, the scripted teacher, SFT) and trains it with
asynchronous RL on Ray. This test runs the same commands on one starter register lookup, small
enough for a few minutes: the teacher solves it 8 times through real trials and leaves an answer
key out half the time (`missing_key`, reward 0.5); the tiny model learns both programs by SFT, so
it starts out leaving the key out about half the time. `bureau train` (real sandboxes, the MCP
code tool, the rubric verifier, the built-in engine, the trainer and in-place weight pushes, on
Ray) must then raise the task's Pass@1 (and not lower its mean reward), measured by the loop's
own evaluation of 8 attempts before and after. No copying is needed (one task, memorized), so
the only thing RL has to learn is the decision between the two programs, which the reward alone
tells apart.

This is not a held-out measurement: the evaluation task is the training task, and the run says
so (`held_out` false in evals.json). Learning on prompts never trained on is what `make demo`
measures, on eval worlds whose instructions no training task shares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray  # noqa: F401
import torch  # noqa: F401

from bureau.report.page import write_report
from report_support import check_report, chromium_render

pytestmark = pytest.mark.slow

TEMPLATE = "law.starter_register_value"


def test_rl_raises_the_reward_of_a_bootstrapped_policy(
    tmp_path: Path, tokenizer_cache: Path
) -> None:
    from bureau.bootstrap.config import MistakeRates, RecordConfig, SFTConfig
    from bureau.bootstrap.record import record
    from bureau.bootstrap.sft import train_sft
    from bureau.harness.loop import HarnessConfig
    from bureau.loop.config import RunConfig
    from bureau.loop.run import train
    from bureau.loop.synthetic import run_config
    from bureau.models.checkpoint import init_checkpoint
    from bureau.worlds.builder import BuildConfig, build_split

    # The demo's vocabulary (8,320 rows instead of 151,936), as `make demo` uses: logits 18
    # times cheaper, which took this test from about 270 s to about 100 s.
    tiny_model = init_checkpoint(
        "qwen3-demo",
        2,
        64,
        tmp_path / "model",
        heads=2,
        kv_heads=1,
        tokenizer_cache_dir=tokenizer_cache,
    )
    data = tmp_path / "train"
    build_split(BuildConfig("train", 1, 8, 1, data, "starter", jobs=1))  # seed 1: a law world
    harness = HarnessConfig(
        max_turns=2,
        context_length=2048,
        max_tokens_per_turn=256,
        tool_prefixes=["code_run_python"],
        system_prompt="Solve the task with code, then reply briefly.",
        temperature=0.7,
    )
    summary = record(
        RecordConfig(
            dataset=data,
            model=tiny_model,
            out=tmp_path / "record",
            attempts=8,
            seed=0,
            templates=[TEMPLATE],
            max_tasks=1,
            lookup_by_code=True,
            mistakes=MistakeRates.off().model_copy(update={"missing_key": 0.5}),
            harness=harness,
        )
    )
    rewards = sorted(r.reward for r in summary.records)
    assert 0.5 in rewards and 1.0 in rewards, rewards  # both programs are demonstrated
    train_sft(
        SFTConfig.model_validate(
            {
                "trajectories": tmp_path / "record" / "trajectories.parquet",
                "model": tiny_model,
                "out": tmp_path / "sft",
                "steps": 80,  # the nll is below 0.02 by then: both programs memorized
                "sequences_per_step": 4,
                "seed": 0,
                "trainer": {
                    "optimizer": {"lr": 6e-3, "warmup_steps": 5},
                    "packing": {"token_budget": 2048},
                    "compute_entropy": False,
                },
            }
        )
    )
    filter_ = {"templates": [TEMPLATE], "max_tasks": 1}
    tree = run_config(
        tmp_path / "run",
        tmp_path / "sft" / "weights",
        data,
        data,
        steps=6,
        **{
            "data.train_filter": filter_,
            "data.eval_filter": filter_,
            "rollout.attempts": 6,
            "rollout.harness": harness.model_dump(include=set(harness.model_fields_set)),
            "async.groups_per_step": 1,
            # 1e-3 collapsed into repetition within 5 steps; 3e-4 learned by step 2 but, in one
            # run of the suite, had collapsed by the end (Pass@1 0.42 -> 0.36).
            "trainer.optimizer.lr": 2e-4,
            "eval": {"at_start": True, "at_end": True, "attempts": 8},
            "checkpoint.every": 100,
        },
    )
    steps = train(RunConfig.model_validate(tree), say=lambda _line: None)
    assert steps == 6
    evals = json.loads((tmp_path / "run" / "evals.json").read_text())
    before, after = evals[0], evals[-1]
    print(f"reward {before['reward']:.3f} -> {after['reward']:.3f}")
    print(f"Pass@1 {before['pass_at_1']:.3f} -> {after['pass_at_1']:.3f}")
    assert before["graded"] == after["graded"] == 8
    assert before["held_out"] is False and before["tasks_also_trained_on"] == 1
    # The reward RL maximises must rise on the trained rollouts (the first two steps' 12 against
    # the last two's), and the evaluation's Pass@1 (every criterion) with it. Its mean reward,
    # which also counts the half credit of an answer with a key left out, moves by 1/16 per
    # attempt on 8 attempts, so it is printed, not asserted. Measured alone (80 SFT steps, 6 RL
    # steps of 6 attempts, the demo vocabulary): reward 0.625 -> 1.000, Pass@1 0.250 -> 1.000,
    # trained reward 0.58 0.67 0.83 0.92 0.83 0.92, and the likelihood margin below -0.53 ->
    # 2.25. With 50 SFT steps on this vocabulary the policy still made up programs of its own
    # (reward 0.46 at start) and RL did not raise Pass@1 within 8 steps.
    rewards = [
        m["rollout/reward"]
        for m in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())
        if "rollout/reward" in m
    ]
    print("trained reward per step", [round(r, 3) for r in rewards])
    assert len(rewards) == 6
    assert sum(rewards[-2:]) > sum(rewards[:2])
    assert after["pass_at_1"] > before["pass_at_1"]
    # Without sampling noise: the teacher-forced log-likelihood of the recorded full-credit
    # programs, less that of the ones that leave the key out, must rise from the SFT weights to
    # the trained ones (the choice the reward alone tells apart).
    recorded = tmp_path / "record" / "trajectories.parquet"
    margins = [
        _margin(w, recorded) for w in (tmp_path / "sft" / "weights", tmp_path / "run" / "weights")
    ]
    print(f"full-credit log-likelihood margin {margins[0]:.2f} -> {margins[1]:.2f}")
    assert margins[1] > margins[0] + 0.1

    # `bureau report` of this run, opened in headless Chromium: every chart rendered its
    # points (6 steps of trained reward and Pass@1, two evaluations of each), no script error.
    page = write_report(tmp_path / "run")
    charts = check_report(page.read_text())
    assert charts["Reward and Pass@1 over steps"] == 6 + 6 + 2 + 2, charts
    rendered = chromium_render(page, tmp_path / "report.png")
    assert rendered.script_errors == 0 and rendered.ready
    assert rendered.charts.keys() == charts.keys()
    assert all(drawn == expected > 0 for expected, drawn in rendered.charts.values()), rendered


def _margin(weights: Path, trajectories: Path) -> float:
    """Mean summed logprob of the sampled tokens of the reward-1 records, less the reward-0.5
    ones'."""
    from bureau.models.checkpoint import load_checkpoint
    from bureau.models.logprobs import token_logprobs
    from bureau.records import read_parquet

    model, _ = load_checkpoint(weights, dtype="float32")
    totals: dict[float, list[float]] = {1.0: [], 0.5: []}
    for record in read_parquet(trajectories):
        positions = [i for i, m in enumerate(record.loss_mask) if m]
        total = float(token_logprobs(model, record.token_ids, positions).sum())
        totals[float(record.reward or 0.0)].append(total)
    return sum(totals[1.0]) / len(totals[1.0]) - sum(totals[0.5]) / len(totals[0.5])
