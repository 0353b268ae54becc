"""`bureau train-sft`: SFT through the trainer lowers the loss and writes a loadable folder."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import torch  # noqa: F401
from bootstrap_fakes import RegisterTools, register_task
from typer.testing import CliRunner

from bureau.bootstrap.scripted import ScriptedSampler
from bureau.bootstrap.teacher import Teacher
from bureau.cli.main import app
from bureau.harness.loop import Episode, HarnessConfig
from bureau.harness.render import Renderer
from bureau.records import TrajectoryRecord, write_parquet


def _records(tiny_model: Path, count: int) -> list[TrajectoryRecord]:
    from transformers import AutoTokenizer

    renderer = Renderer(AutoTokenizer.from_pretrained(str(tiny_model)))
    # No system prompt and two short tool schemas keep the sequences short (about 400 tokens).
    config = HarnessConfig(max_turns=6, system_prompt="Use the tools.")
    records = []
    for i in range(count):
        sampler = ScriptedSampler(renderer, Teacher(register_task(), None, random.Random(i)))
        episode = Episode(
            sampler, renderer, RegisterTools(), config, task_name=f"t{i}", model="teacher"
        )
        record = asyncio.run(episode.run(register_task().instruction))
        record.reward = 1.0
        records.append(record)
    return records


def test_train_sft_lowers_the_loss_and_writes_a_checkpoint(
    tiny_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parquet = tmp_path / "demos.parquet"
    write_parquet(_records(tiny_model, 3), parquet)
    out = tmp_path / "sft"
    result = CliRunner().invoke(
        app,
        [
            "train-sft", "--trajectories", str(parquet), "--model", str(tiny_model),
            "--out", str(out), "--steps", "12", "--sequences-per-step", "2", "--lr", "1e-2",
            "--set", "trainer.optimizer.warmup_steps=0",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == 12
    nll = [s["nll"] for s in steps]
    assert nll[-1] < 0.5 * nll[0], nll
    assert (out / "config.resolved.toml").is_file()
    weights = out / "weights"
    AutoModelForCausalLM.from_pretrained(str(weights))
    assert AutoTokenizer.from_pretrained(str(weights)).chat_template
