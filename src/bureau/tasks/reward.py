"""The reward contract between a task's verifier and whoever runs it.

tests/test.sh writes its result into `<logs>/verifier/`, as either

- `reward.json` (preferred): one flat JSON object of finite numbers, such as
  `{"reward": 0.75, "pass": 0, "c1": 1}`. The "reward" key is the scalar reward; an object with
  a single key of another name uses that key, and one with several keys and no "reward" (Harbor
  accepts any named rewards, such as `{"correctness": 1, "style": 0.5}`) is scored by their
  mean. Every key is kept as a named value, for analysis and for Harbor's metrics.
- `reward.txt`: a single number, the reward.

When both exist, reward.json wins. Anything else (no file, an empty file, invalid JSON, a nested
or boolean or string value, NaN or infinity) raises `RewardFileError`: a broken verifier is an
error to attribute to the verifier, never a reward of zero that would be trained on.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bureau.tasks.errors import RewardFileError, show_value

REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
REWARD_KEY = "reward"

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Reward:
    """A verifier's result: the scalar reward and every named value it reported."""

    reward: float
    values: dict[str, float]
    source: Path


def read_reward(verifier_dir: Path | str) -> Reward:
    """Read `reward.json` (preferred) or `reward.txt` from a verifier log directory.

    Raises RewardFileError naming the file when neither exists or the one read is malformed.
    """
    verifier_dir = Path(verifier_dir)
    json_path, txt_path = verifier_dir / REWARD_JSON, verifier_dir / REWARD_TXT
    if json_path.exists():
        return _read_json(json_path)
    if txt_path.exists():
        return _read_txt(txt_path)
    raise RewardFileError(
        json_path,
        f"the verifier to write {REWARD_JSON} or {REWARD_TXT} in {verifier_dir}",
        got="neither file",
    )


def write_reward_json(verifier_dir: Path | str, values: Mapping[str, float]) -> Path:
    """Write `values` as `<verifier_dir>/reward.json`, atomically, and return the file's path.

    Refuses (with RewardFileError) anything `read_reward` would refuse: non-finite, boolean or
    non-numeric values, and an empty mapping.
    """
    verifier_dir = Path(verifier_dir)
    path = verifier_dir / REWARD_JSON
    if not isinstance(values, Mapping) or any(not isinstance(key, str) for key in values):
        raise RewardFileError(path, "a mapping from string keys to numbers", got=repr(values))
    checked = {key: _finite(path, key, value) for key, value in values.items()}
    _pick_reward(path, checked)
    verifier_dir.mkdir(parents=True, exist_ok=True)
    # A reader may look at the directory while the verifier is still running (or after it was
    # killed); writing to a temporary file and renaming it means it never sees half a file.
    with tempfile.NamedTemporaryFile(
        "w", dir=verifier_dir, prefix=".reward-", suffix=".json", delete=False, encoding="utf-8"
    ) as handle:
        json.dump(checked, handle, indent=2, allow_nan=False)
        handle.write("\n")
    os.replace(handle.name, path)
    return path


def _read_json(path: Path) -> Reward:
    text = _read(path)
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise RewardFileError(
            path,
            "a JSON object",
            got=f"invalid JSON ({exc.msg})",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except ValueError as exc:
        # e.g. an integer literal longer than Python's int parsing limit.
        raise RewardFileError(path, "a JSON object", got=f"invalid JSON ({exc})") from None
    except _DuplicateKey as exc:
        raise RewardFileError(path, "each key once", field=str(exc), got="the key twice") from None
    except _NonFinite as exc:
        raise RewardFileError(path, "a finite number", got=str(exc)) from None
    if not isinstance(data, dict):
        raise RewardFileError(path, "a flat JSON object of numbers", got=show_value(data))
    values = {key: _finite(path, key, value) for key, value in data.items()}
    return Reward(reward=_pick_reward(path, values), values=values, source=path)


def _read_txt(path: Path) -> Reward:
    text = _read(path).strip()
    # float() would also take "nan", "1_000" and " inf"; the contract is a plain decimal number.
    if not _NUMBER.fullmatch(text):
        raise RewardFileError(path, "a single finite number", got=show_value(text))
    value = _finite(path, None, float(text))
    return Reward(reward=value, values={REWARD_KEY: value}, source=path)


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise RewardFileError(path, "a reward file", got="a directory") from None
    except UnicodeDecodeError as exc:
        raise RewardFileError(
            path, "UTF-8 text", got=f"invalid byte at offset {exc.start}"
        ) from None
    if not text.strip():
        raise RewardFileError(path, "a reward", got="an empty file")
    return text


def _finite(path: Path, key: str | None, value: Any) -> float:
    # bool is a numbers.Real subclass, but `true` as a reward is a verifier bug, not 1.0.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise RewardFileError(path, "a finite number", field=key, got=show_value(value))
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise RewardFileError(path, "a finite number", field=key, got=show_value(value))
    return number


def _pick_reward(path: Path, values: dict[str, float]) -> float:
    if REWARD_KEY in values:
        return values[REWARD_KEY]
    if not values:
        raise RewardFileError(path, "at least one named reward", got="no keys")
    return math.fsum(values.values()) / len(values)


class _DuplicateKey(Exception):
    pass


class _NonFinite(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


def _reject_constant(name: str) -> float:
    # Python's json module accepts NaN and Infinity, which are not JSON.
    raise _NonFinite(name)
