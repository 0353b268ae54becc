"""`bureau train-offline` (`bureau.loop.offline`): train from Parquet, resume, refuse bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow  # noqa: F401
import torch  # noqa: F401
import transformers  # noqa: F401
from typer.testing import CliRunner

from bureau.cli.main import app
from bureau.config import RESOLVED_CONFIG, load_config
from bureau.loop.offline import OfflineConfig
from bureau.records import write_parquet
from bureau.trainer.synthetic import synthetic_records
from fixture_support import group_record as _record


def test_train_offline_on_a_parquet_file_then_resume(tiny_model: Path, tmp_path: Path) -> None:
    parquet = tmp_path / "records.parquet"
    write_parquet(synthetic_records(num_groups=6, group_size=4, seed=1), parquet)
    out = tmp_path / "run"
    common = [
        "train-offline",
        "--trajectories",
        str(parquet),
        "--model",
        str(tiny_model),
        "--out",
        str(out),
        "--groups-per-step",
        "2",
        "--lr",
        "1e-3",
        "--token-budget",
        "128",
    ]
    runner = CliRunner()
    result = runner.invoke(app, [*common, "--steps", "2"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["train/step"] for m in lines] == [1.0, 2.0]
    assert all(m["train/num_tokens"] > 0 and m["train/padding_waste"] == 0.0 for m in lines)
    assert {"clipped_fraction", "mismatch_kl", "data/mean_reward"} <= set(lines[0])
    weights = out / "weights"
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= {
        p.name for p in weights.iterdir()
    }
    resolved = load_config(OfflineConfig, out / RESOLVED_CONFIG)
    assert resolved.trainer.optimizer.lr == 1e-3
    assert resolved.loss.kind == "ppo" and resolved.out == out

    result = runner.invoke(app, [*common, "--steps", "3"])
    assert result.exit_code == 0, result.output
    assert "resumed from" in result.output and "at step 2" in result.output
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["train/step"] for m in lines] == [1.0, 2.0, 3.0]
    assert [m["data/groups_consumed"] for m in lines] == [2, 4, 6]


def test_train_offline_refuses_bad_inputs(tiny_model: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["train-offline", "--model", str(tiny_model), "--steps", "1"]
    missing = runner.invoke(app, [*base, "--trajectories", str(tmp_path / "none.parquet")])
    assert missing.exit_code == 2 and "not found" in missing.output
    flat = tmp_path / "flat.parquet"
    records = [_record(str(k), "g", 1.0, 2) for k in range(4)]  # one group, all rewards equal
    write_parquet(records, flat)
    result = runner.invoke(app, [*base, "--trajectories", str(flat), "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and "no usable trajectory" in result.output
    with_flat = [*base, "--trajectories", str(flat), "--out", str(tmp_path / "r")]
    bad_choice = runner.invoke(app, [*with_flat, "--loss", "nope"])
    assert bad_choice.exit_code == 2 and "'nope' is not one of ppo" in bad_choice.output
    typo = runner.invoke(app, [*with_flat, "--set", "trainer.optimizer.lrr=1e-3"])
    assert typo.exit_code == 2 and "trainer.optimizer.lrr: Extra inputs" in typo.output


def test_help_is_instant_without_torch() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from bureau.cli.main import app\n"
        "result = CliRunner().invoke(app, ['train-offline', '--help'])\n"
        "assert result.exit_code == 0 and '--trajectories' in result.output\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
