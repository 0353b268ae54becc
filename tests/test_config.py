"""The config layer: TOML + `--set` overrides, errors naming file and key, the resolved dump,
strict component configs, CLI choices read from the configs, and the shipped `configs/` files."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from bureau.config import (
    RESOLVED_CONFIG,
    ConfigError,
    StrictModel,
    apply_overrides,
    dump_resolved_config,
    load_config,
    parse_override,
)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


class Inner(StrictModel):
    lr: float = 1e-5
    """Learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """Moment decay rates."""
    kind: Literal["a", "b"] = "a"
    """Which one."""


class Outer(StrictModel):
    name: str
    """A name."""
    steps: int = Field(default=1, ge=1)
    """Steps."""
    note: str | None = None
    """Optional note."""
    inner: Inner = Field(default_factory=Inner)
    """A nested table."""
    tags: list[str] = Field(default_factory=list)
    """Tags."""


@pytest.mark.parametrize(
    ("item", "path", "value"),
    [
        ("steps=3", ["steps"], 3),
        ("inner.lr=3e-6", ["inner", "lr"], 3e-6),
        ("a.b.c=true", ["a", "b", "c"], True),
        ('name="x y"', ["name"], "x y"),
        ("name=plain words", ["name"], "plain words"),
        ("tags=[1, 2]", ["tags"], [1, 2]),
        ("path=/tmp/run", ["path"], "/tmp/run"),
    ],
)
def test_overrides_are_toml_literals_or_plain_strings(
    item: str, path: list[str], value: object
) -> None:
    assert parse_override(item) == (path, value)


@pytest.mark.parametrize("item", ["steps", "=3", "a..b=1", ".a=1"])
def test_malformed_overrides_are_refused(item: str) -> None:
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override(item)


def test_overrides_create_tables_and_leave_the_input_alone() -> None:
    tree = {"inner": {"lr": 1.0}}
    result = apply_overrides(tree, ["inner.kind=b", "new.deep.key=2"])
    assert result == {"inner": {"lr": 1.0, "kind": "b"}, "new": {"deep": {"key": 2}}}
    assert tree == {"inner": {"lr": 1.0}}
    with pytest.raises(ConfigError, match=r"inner\.lr is a value, not a table"):
        apply_overrides(tree, ["inner.lr.x=1"])


def test_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('name = "run"\nsteps = 2\n[inner]\nlr = 1e-3\n')
    config = load_config(Outer, path, ["inner.kind=b", "steps=5"])
    assert (config.name, config.steps, config.inner.lr, config.inner.kind) == ("run", 5, 1e-3, "b")


def test_errors_name_the_file_and_the_dotted_key(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('name = "run"\n[inner]\nlearning_rate = 1e-3\n')
    with pytest.raises(ConfigError) as caught:
        load_config(Outer, path)
    assert f"{path}: inner.learning_rate: Extra inputs are not permitted" in str(caught.value)
    with pytest.raises(ConfigError, match=r"\+ overrides: inner\.kind: Input should be 'a' or 'b'"):
        load_config(Outer, path, ["inner.learning_rate=1", "inner.kind=c"])
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(Outer, tmp_path / "missing.toml")
    path.write_text("name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(Outer, path)


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    config = Outer(name="r", steps=4, inner=Inner(lr=2e-6, betas=(0.8, 0.9), kind="b"), tags=["x"])
    written = dump_resolved_config(config, tmp_path / "run")
    assert written == tmp_path / "run" / RESOLVED_CONFIG
    assert "note" not in written.read_text()  # None has no TOML form; the default restores it
    assert load_config(Outer, written) == config


def test_component_configs_refuse_unknown_keys(tmp_path: Path) -> None:
    from bureau.harness.loop import HarnessConfig
    from bureau.inference.launch import BuiltinServerConfig

    path = tmp_path / "harness.toml"
    path.write_text("max_turns = 4\nmax_turn = 5\n")
    with pytest.raises(ConfigError, match=r"harness\.toml: max_turn: Extra inputs"):
        load_config(HarnessConfig, path)
    with pytest.raises(ConfigError, match="port_number"):
        load_config(BuiltinServerConfig, None, ["model=/m", "port_number=1"])


def test_cli_choices_are_read_from_the_config() -> None:
    import typing

    import torch  # noqa: F401

    from bureau.algo.advantages import Estimator
    from bureau.algo.losses import PolicyLossConfig
    from bureau.algo.reductions import Reduction
    from bureau.cli.options import field_choices
    from bureau.loop.offline import OfflineConfig
    from bureau.trainer.config import TrainerConfig

    union = typing.get_args(typing.get_args(PolicyLossConfig)[0])
    kinds = tuple(typing.get_args(m.model_fields["kind"].annotation)[0] for m in union)
    assert field_choices(OfflineConfig, "loss.kind") == kinds
    assert field_choices(OfflineConfig, "advantages.estimator") == typing.get_args(Estimator)
    assert field_choices(OfflineConfig, "reduction.reduction") == typing.get_args(Reduction)
    dtypes = typing.get_args(TrainerConfig.model_fields["dtype"].annotation)
    assert field_choices(OfflineConfig, "trainer.dtype") == dtypes
    with pytest.raises(KeyError):
        field_choices(OfflineConfig, "trainer.seed")


def _toml_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


def test_configs_folder_has_run_configs() -> None:
    assert _toml_files(CONFIGS), f"no run config in {CONFIGS}"


@pytest.mark.parametrize("path", _toml_files(CONFIGS), ids=lambda p: p.name)
def test_every_run_config_in_configs_loads(path: Path) -> None:
    from bureau.loop.config import RunConfig

    load_config(RunConfig, path)


def test_the_trainer_scores_at_the_sampling_temperature(tmp_path: Path) -> None:
    from bureau.loop.config import RunConfig

    base = ["out=/r", "steps=1", "model.path=/m", "data.train=/d"]
    config = load_config(RunConfig, None, [*base, "rollout.harness.temperature=0.7"])
    assert config.trainer.temperature == 0.7
    written = dump_resolved_config(config, tmp_path)
    assert load_config(RunConfig, written).trainer.temperature == 0.7
    assert load_config(RunConfig, None, base).trainer.temperature == 1.0
    clash = [*base, "rollout.harness.temperature=0.7", "trainer.temperature=1.0"]
    with pytest.raises(ConfigError, match=r"trainer\.temperature \(1\.0\) differs"):
        load_config(RunConfig, None, clash)


def test_a_run_s_paths_are_made_absolute_where_the_config_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray workers (on other nodes above all) do not run in the driver's folder."""
    from bureau.loop.config import RunConfig

    monkeypatch.chdir(tmp_path)
    base = ["out=runs/x", "steps=1", "model.path=models/m", "data.train=d/train", "data.eval=/e"]
    config = load_config(RunConfig, None, base)
    assert config.out == tmp_path / "runs" / "x"
    assert config.model.path == tmp_path / "models" / "m"
    assert config.data.train == tmp_path / "d" / "train"
    assert config.data.eval == Path("/e")


def test_a_run_s_judge_and_faults_are_settings_with_checked_limits() -> None:
    from bureau.loop.config import RunConfig

    base = ["out=/r", "steps=1", "model.path=/m", "data.train=/d", "rollout.workers=4"]
    judge = ['judge.url="http://127.0.0.1:9/v1"', 'judge.model="m"']
    config = load_config(
        RunConfig, None, [*base, *judge, "judge.rpm_per_key=40", "rollout.faults.tool_hang=0.05"]
    )
    assert config.judge is not None and config.judge.share(4).rpm_per_key == 10
    assert config.rollout.faults.tool_hang == 0.05 and config.rollout.missing_judge == "fail"
    with pytest.raises(ConfigError, match="rpm_per_key = 3 cannot be split among 4 workers"):
        load_config(RunConfig, None, [*base, *judge, "judge.rpm_per_key=3"])
