"""The token-in/token-out audit of a run's trajectory records.

Three checks, per trajectory:

(a) Tokens. The stored token list must be the first prompt, then for every turn the ids the
    engine sampled (loss mask 1, with the engine's logprobs and versions) followed by the
    observation's ids (mask 0). The prompt and every observation are re-derived here from the
    recorded messages with the renderer (fixed-base method), so a renderer that changed, or
    state that was rewritten instead of appended to, shows up as a mismatch.
(b) Logprobs. A teacher-forced forward pass of the model (the trainer's side) over the stored
    ids gives the logprob of every sampled token; the report gives mean and max |Δ| against the
    sampler's logprobs.
(c) Drift. A naive pipeline decodes the messages, renders the whole conversation with the chat
    template and encodes it. The report counts the trajectories where that gives different
    ids from the ones sampled: the drift bureau avoids by never re-tokenizing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bureau.harness.render import Renderer
from bureau.records import TrajectoryRecord

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass
class Report:
    trajectories: int = 0
    multi_turn: int = 0
    token_mismatches: list[str] = field(default_factory=list)
    """`trajectory_id: what differs`, one per mismatching trajectory."""
    sampled_tokens: int = 0
    logprob_abs_diff_mean: float | None = None
    logprob_abs_diff_max: float | None = None
    logprob_versions: list[int] = field(default_factory=list)
    logprob_checked: int = 0
    """Trajectories whose logprobs were checked: all of them, or those sampled entirely by the
    weights the audit loaded (version 0 of a training run)."""
    dropped: int = 0
    """Trajectories the RL loop kept but did not train on (marked in the records)."""
    naive_drift: int = 0
    naive_drift_examples: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        n = self.trajectories
        out = [
            f"token mismatches: {len(self.token_mismatches)} of {n} trajectories",
            f"multi-turn trajectories: {self.multi_turn} of {n}; sampled tokens: "
            f"{self.sampled_tokens}",
        ]
        if self.dropped:
            out.append(f"dropped by the loop as stale (audited too): {self.dropped} of {n}")
        if self.logprob_abs_diff_mean is not None:
            out.append(
                f"logprob |Δ| trainer vs sampler: mean {self.logprob_abs_diff_mean:.3g}, "
                f"max {self.logprob_abs_diff_max:.3g} over the {self.logprob_checked} "
                f"trajectories sampled by weight version(s) {self.logprob_versions}"
            )
        share = self.naive_drift / n if n else 0.0
        out.append(
            f"naive re-tokenization drift: {self.naive_drift} of {n} trajectories ({share:.1%})"
        )
        out += [f"  mismatch {m}" for m in self.token_mismatches[:20]]
        out += [f"  drift {d}" for d in self.naive_drift_examples[:5]]
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_difference(a: Sequence[int], b: Sequence[int]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"at {i}: {x} != {y}"
    return f"lengths {len(a)} != {len(b)}"


def check_tokens(record: TrajectoryRecord, renderer: Renderer) -> str | None:
    """(a): None when the record is aligned, else what differs first."""
    n = len(record.token_ids)
    if not (len(record.loss_mask) == len(record.sampler_logprobs) == n):
        return "token_ids, loss_mask and sampler_logprobs differ in length"
    prompt = renderer.prompt_ids(record.messages[:2], record.tools)
    if prompt != record.prompt_ids:
        where = _first_difference(prompt, record.prompt_ids)
        return f"prompt ids are not the rendered prompt ({where})"
    ids, mask, logprobs = list(prompt), [0] * len(prompt), [0.0] * len(prompt)
    for i, turn in enumerate(record.turns, start=1):
        ids += turn.completion_ids
        mask += [1] * len(turn.completion_ids)
        logprobs += turn.completion_logprobs
        if turn.observation_messages:
            expected = renderer.observation_ids(
                turn.observation_messages, after_ids=turn.completion_ids
            )
            if expected != turn.observation_ids:
                return f"turn {i}: observation ids are not the fixed-base ids"
        elif turn.observation_ids:
            return f"turn {i}: observation ids without observation messages"
        ids += turn.observation_ids
        mask += [0] * len(turn.observation_ids)
        logprobs += [0.0] * len(turn.observation_ids)
    if ids != record.token_ids:
        return f"token ids differ {_first_difference(ids, record.token_ids)}"
    if mask != record.loss_mask:
        return f"loss mask differs {_first_difference(mask, record.loss_mask)}"
    if logprobs != record.sampler_logprobs:
        return "sampler logprobs are not the engine's"
    return None


def naive_drifts(record: TrajectoryRecord, renderer: Renderer) -> bool:
    """(c): whether re-rendering the messages gives different ids from the stored ones."""
    naive = renderer.naive_ids(record.messages, record.tools)
    stored = list(record.token_ids)
    last = record.turns[-1].completion_ids if record.turns else []
    # The template closes the last turn, which the engine did not sample.
    closing = [*([] if last and last[-1] == renderer.im_end_id else [renderer.im_end_id])]
    return naive != [*stored, *closing, *renderer.separator_ids]


def logprob_diffs(
    model: PreTrainedModel, record: TrajectoryRecord, temperature: float = 1.0
) -> list[float]:
    """(b): |trainer - sampler| logprob for every sampled token of `record`, the trainer's at
    the temperature the tokens were sampled at."""
    from bureau.models.logprobs import token_logprobs

    positions = [i for i, m in enumerate(record.loss_mask) if m]
    trainer = token_logprobs(model, record.token_ids, positions, temperature).tolist()
    return [abs(t - record.sampler_logprobs[p]) for t, p in zip(trainer, positions, strict=True)]


def audit(
    records: Sequence[TrajectoryRecord],
    renderer: Renderer,
    model: PreTrainedModel | None = None,
    *,
    model_version: int | None = None,
    temperature: float = 1.0,
) -> Report:
    """Checks (a) and (c) on every record, (b) with `model` on every record, or, with
    `model_version`, on those whose every sampled token came from that weight version (the
    others were sampled by weights the audit does not have)."""
    report = Report(trajectories=len(records))
    diffs: list[float] = []
    versions: set[int] = set()
    for record in records:
        report.dropped += record.dropped is not None
        report.multi_turn += len(record.turns) > 1
        report.sampled_tokens += sum(record.loss_mask)
        problem = check_tokens(record, renderer)
        if problem is not None:
            report.token_mismatches.append(f"{record.trajectory_id}: {problem}")
        if naive_drifts(record, renderer):
            report.naive_drift += 1
            report.naive_drift_examples.append(f"{record.trajectory_id} ({record.task_name})")
        sampled_by = {v for v, m in zip(record.weight_versions, record.loss_mask, strict=True) if m}
        if model_version is not None and sampled_by - {model_version}:
            continue
        if model is not None and problem is None:
            diffs += logprob_diffs(model, record, temperature)
            versions.update(sampled_by)
            report.logprob_checked += 1
    if diffs:
        report.logprob_abs_diff_mean = math.fsum(diffs) / len(diffs)
        report.logprob_abs_diff_max = max(diffs)
    report.logprob_versions = sorted(versions)
    return report


TRAIN_RUN_TRAJECTORIES = "trajectories"
"""A `bureau train` run's folder of per-step records (`bureau.loop.run.TRAJECTORIES`)."""


def audit_run(run: Path, model_dir: Path | None) -> Report:
    """Audit a run's records: `RUN/trajectories.parquet` (`bureau tasks check --agent
    harness`, `bureau eval`; the model from `RUN/run.json`), a `bureau train` run folder
    (every `RUN/trajectories/*.parquet`, trained and dropped; the starting model of its
    `config.resolved.toml` checks the logprobs of what version 0 sampled), or one file."""
    import json

    from bureau.config import read_toml
    from bureau.models.checkpoint import load_checkpoint
    from bureau.records import read_parquet

    model_version: int | None = None
    thinking, temperature = True, 1.0
    if run.is_dir() and (run / TRAIN_RUN_TRAJECTORIES).is_dir():
        files = sorted((run / TRAIN_RUN_TRAJECTORIES).glob("*.parquet"))
        resolved = run / "config.resolved.toml"
        config = read_toml(resolved) if resolved.is_file() else {}
        harness = config.get("rollout", {}).get("harness", {})
        thinking = bool(harness.get("enable_thinking", True))
        temperature = float(config.get("trainer", {}).get("temperature", 1.0))
        if model_dir is None:
            if "path" not in config.get("model", {}):
                raise FileNotFoundError(f"{resolved} names no model: pass --model")
            model_dir = Path(config["model"]["path"])
            model_version = 0
        if not files:
            raise FileNotFoundError(f"{run / TRAIN_RUN_TRAJECTORIES}: no step has finished yet")
    else:
        path = run / "trajectories.parquet" if run.is_dir() else run
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: no trajectory records (`bureau tasks check --agent harness --out RUN` "
                "and `bureau train` write them)"
            )
        files = [path]
        info_path = path.parent / "run.json"
        info = json.loads(info_path.read_text()) if info_path.is_file() else {}
        if model_dir is None:
            if "model" not in info:
                raise FileNotFoundError(f"{info_path} names no model: pass --model")
            model_dir = Path(info["model"])
        thinking = bool(info.get("harness", {}).get("enable_thinking", True))
        temperature = float(info.get("harness", {}).get("temperature", 1.0))
    records = [record for file in files for record in read_parquet(file)]  # dropped ones too
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model, tokenizer = load_checkpoint(model_dir, dtype="float32")
    renderer = Renderer(tokenizer, enable_thinking=thinking)
    tempered = temperature if temperature > 0 else 1.0  # greedy: the untempered logprobs
    return audit(records, renderer, model, model_version=model_version, temperature=tempered)
