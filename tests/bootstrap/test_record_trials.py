"""The teacher through real trials: bubblewrap sandboxes, the MCP tool servers, the verifier.

With mistakes off it must score 1 on every starter task (every starter template of the three
domains that a small build yields), and each record must hold exactly the ids it emitted.
"""

from __future__ import annotations

import json
from pathlib import Path

import mcp  # noqa: F401
import pytest
import transformers  # noqa: F401

from bureau.bootstrap.config import MistakeRates, RecordConfig, teacher_harness
from bureau.bootstrap.record import PARQUET, TEACHER_LOG, record
from bureau.records import read_parquet


@pytest.fixture(scope="module")
def starter_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bureau.worlds.builder import BuildConfig, build_split

    out = tmp_path_factory.mktemp("starter") / "train"
    build_split(BuildConfig("train", 3, 15, 5, out, difficulty="starter", jobs=1))
    return out


def test_the_teacher_solves_every_starter_task_through_the_real_tools(
    starter_dataset: Path, tiny_model: Path, tmp_path: Path
) -> None:
    config = RecordConfig(
        dataset=starter_dataset,
        model=tiny_model,
        out=tmp_path / "run",
        mistakes=MistakeRates.off(),
        harness=teacher_harness(),
        concurrency=4,
    )
    summary = record(config)
    assert summary.system_errors == 0
    assert len(summary.records) == 15
    rewards = {r.task_name: r.reward for r in summary.records}
    assert set(rewards.values()) == {1.0}, rewards
    for r in summary.records:
        assert r.stop_reason == "answered"
        sampled = [t for t, m in zip(r.token_ids, r.loss_mask, strict=True) if m]
        assert sampled == [t for turn in r.turns for t in turn.completion_ids]
    stored = read_parquet(config.out / PARQUET)
    assert [r.token_ids for r in stored] == [r.token_ids for r in summary.records]
    log = [json.loads(line) for line in (config.out / TEACHER_LOG).read_text().splitlines()]
    assert {line["mistake"] for line in log} == {"none"}


def test_one_seed_records_the_same_trajectories_in_the_same_order(
    starter_dataset: Path, tiny_model: Path, tmp_path: Path
) -> None:
    """Concurrent trials finish in any order and programs take varying time to run; neither
    may change what SFT trains on."""
    runs = []
    for name in ("a", "b"):
        config = RecordConfig(
            dataset=starter_dataset,
            model=tiny_model,
            out=tmp_path / name,
            attempts=3,
            seed=4,
            templates=["law.starter_register_value"],
            lookup_by_code=True,
            mistakes=MistakeRates.model_validate({"missing_key": 0.5, "wrong_value": 0.3}),
            harness=teacher_harness().model_copy(update={"tool_prefixes": ["code_run_python"]}),
            concurrency=4,
        )
        record(config)
        runs.append(read_parquet(config.out / PARQUET))
    first, second = runs
    assert len(first) >= 3
    assert [r.token_ids for r in first] == [r.token_ids for r in second]
    assert len({tuple(r.token_ids) for r in first}) > 1
