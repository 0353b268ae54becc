"""The reward contract: reward.json before reward.txt, and every malformed file is an error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bureau.tasks import Reward, RewardFileError, TaskFormatError, read_reward, write_reward_json


def write(verifier_dir: Path, name: str, text: str) -> Path:
    verifier_dir.mkdir(parents=True, exist_ok=True)
    path = verifier_dir / name
    path.write_text(text)
    return path


def test_json_is_preferred_over_txt(tmp_path: Path) -> None:
    path = write(tmp_path, "reward.json", '{"reward": 0.75}')
    write(tmp_path, "reward.txt", "0.1")
    assert read_reward(tmp_path) == Reward(reward=0.75, values={"reward": 0.75}, source=path)


def test_flat_object_keeps_every_value_as_float(tmp_path: Path) -> None:
    write(tmp_path, "reward.json", '{"reward": 0.75, "pass": 0, "c1": 1, "c2": -2.5e-1}')
    reward = read_reward(tmp_path)
    assert reward.reward == 0.75
    assert reward.values == {"reward": 0.75, "pass": 0.0, "c1": 1.0, "c2": -0.25}
    assert all(type(value) is float for value in reward.values.values())


def test_single_key_without_reward_is_the_reward(tmp_path: Path) -> None:
    write(tmp_path, "reward.json", '{"score": 3}')
    assert read_reward(tmp_path).reward == 3.0


def test_several_keys_without_reward_score_their_mean(tmp_path: Path) -> None:
    # Harbor takes any named rewards; (1 + 0.5 + 0) / 3 = 0.5, and every key is kept.
    write(tmp_path, "reward.json", '{"correctness": 1, "style": 0.5, "speed": 0}')
    reward = read_reward(tmp_path)
    assert reward.reward == 0.5
    assert reward.values == {"correctness": 1.0, "style": 0.5, "speed": 0.0}


@pytest.mark.parametrize(("text", "value"), [("1", 1.0), (" 0.25\n", 0.25), ("-1e-2", -0.01)])
def test_txt_holds_one_number(tmp_path: Path, text: str, value: float) -> None:
    path = write(tmp_path, "reward.txt", text)
    assert read_reward(tmp_path) == Reward(reward=value, values={"reward": value}, source=path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a reward, got an empty file"),
        ("  \n", "expected a reward, got an empty file"),
        ("{", "line 1, column 2: expected a JSON object, got invalid JSON"),
        ("[1]", "expected a flat JSON object of numbers, got an array"),
        ("0.5", "expected a flat JSON object of numbers, got 0.5"),
        ('{"reward": NaN}', "expected a finite number, got NaN"),
        ('{"reward": Infinity}', "expected a finite number, got Infinity"),
        ('{"reward": 1e999}', "reward: expected a finite number, got inf"),
        ('{"reward": {"a": 1}}', "reward: expected a finite number, got a table"),
        ('{"reward": [1]}', "reward: expected a finite number, got an array"),
        ('{"reward": true}', "reward: expected a finite number, got true"),
        ('{"reward": "1"}', 'reward: expected a finite number, got "1"'),
        ('{"reward": null}', "reward: expected a finite number, got null"),
        ('{"reward": 1, "c1": false}', "c1: expected a finite number, got false"),
        ("{}", "expected at least one named reward, got no keys"),
        ('{"reward": 1, "reward": 0}', "reward: expected each key once, got the key twice"),
    ],
)
def test_malformed_json_raises_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "reward.json", text)
    write(tmp_path, "reward.txt", "1.0")  # a valid fallback must not mask a broken reward.json
    with pytest.raises(RewardFileError) as caught:
        read_reward(tmp_path)
    assert str(caught.value).startswith(f"{path}: {message}")
    assert isinstance(caught.value, TaskFormatError)


@pytest.mark.parametrize("text", ["", "nan", "inf", "-Infinity", "abc", "1 2", "1_0", "1e999"])
def test_malformed_txt_raises_naming_the_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "reward.txt", text)
    with pytest.raises(RewardFileError) as caught:
        read_reward(tmp_path)
    assert caught.value.path == path


def test_no_reward_file_is_an_error_not_a_zero(tmp_path: Path) -> None:
    with pytest.raises(RewardFileError) as caught:
        read_reward(tmp_path / "verifier")
    assert caught.value.path == tmp_path / "verifier" / "reward.json"
    assert "reward.txt" in str(caught.value)


def test_write_then_read_gives_the_same_values(tmp_path: Path) -> None:
    verifier_dir = tmp_path / "logs" / "verifier"
    values = {"reward": 0.5, "pass": 0, "c1": 1}
    path = write_reward_json(verifier_dir, values)
    assert path == verifier_dir / "reward.json"
    assert read_reward(verifier_dir).values == {"reward": 0.5, "pass": 0.0, "c1": 1.0}
    assert [p.name for p in verifier_dir.iterdir()] == ["reward.json"]


@pytest.mark.parametrize(
    "values",
    [
        {"reward": math.nan},
        {"reward": math.inf},
        {"reward": 1.0, "c1": -math.inf},
        {"reward": True},
        {"reward": "1"},
        {},
    ],
)
def test_write_refuses_what_read_would_refuse(tmp_path: Path, values: dict[str, object]) -> None:
    with pytest.raises(RewardFileError):
        write_reward_json(tmp_path, values)  # type: ignore[arg-type]
    assert not (tmp_path / "reward.json").exists()
