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
    naive_drift: int = 0
    naive_drift_examples: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        n = self.trajectories
        out = [
            f"token mismatches: {len(self.token_mismatches)} of {n} trajectories",
            f"multi-turn trajectories: {self.multi_turn} of {n}; sampled tokens: "
            f"{self.sampled_tokens}",
        ]
        if self.logprob_abs_diff_mean is not None:
            out.append(
                f"logprob |Δ| trainer vs sampler: mean {self.logprob_abs_diff_mean:.3g}, "
                f"max {self.logprob_abs_diff_max:.3g} over {self.sampled_tokens} tokens"
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


def logprob_diffs(model: PreTrainedModel, record: TrajectoryRecord) -> list[float]:
    """(b): |trainer - sampler| logprob for every sampled token of `record`."""
    from bureau.models.logprobs import token_logprobs

    positions = [i for i, m in enumerate(record.loss_mask) if m]
    trainer = token_logprobs(model, record.token_ids, positions).tolist()
    return [abs(t - record.sampler_logprobs[p]) for t, p in zip(trainer, positions, strict=True)]


def audit(
    records: Sequence[TrajectoryRecord],
    renderer: Renderer,
    model: PreTrainedModel | None = None,
) -> Report:
    report = Report(trajectories=len(records))
    diffs: list[float] = []
    versions: set[int] = set()
    for record in records:
        report.multi_turn += len(record.turns) > 1
        report.sampled_tokens += sum(record.loss_mask)
        problem = check_tokens(record, renderer)
        if problem is not None:
            report.token_mismatches.append(f"{record.trajectory_id}: {problem}")
        if naive_drifts(record, renderer):
            report.naive_drift += 1
            report.naive_drift_examples.append(f"{record.trajectory_id} ({record.task_name})")
        if model is not None and problem is None:
            diffs += logprob_diffs(model, record)
            versions.update(
                v for v, m in zip(record.weight_versions, record.loss_mask, strict=True) if m
            )
    if diffs:
        report.logprob_abs_diff_mean = math.fsum(diffs) / len(diffs)
        report.logprob_abs_diff_max = max(diffs)
    report.logprob_versions = sorted(versions)
    return report


def audit_run(run: Path, model_dir: Path | None) -> Report:
    """Audit `run/trajectories.parquet`; the model defaults to the one in `run/run.json`."""
    import json

    from bureau.models.checkpoint import load_checkpoint
    from bureau.records import read_parquet

    path = run / "trajectories.parquet" if run.is_dir() else run
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no trajectory records (`bureau tasks check --agent harness --out RUN` "
            "writes them)"
        )
    records = read_parquet(path)
    info_path = path.parent / "run.json"
    info = json.loads(info_path.read_text()) if info_path.is_file() else {}
    if model_dir is None:
        if "model" not in info:
            raise FileNotFoundError(f"{info_path} names no model: pass --model")
        model_dir = Path(info["model"])
    thinking = bool(info.get("harness", {}).get("enable_thinking", True))
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model, tokenizer = load_checkpoint(model_dir, dtype="float32")
    return audit(records, Renderer(tokenizer, enable_thinking=thinking), model)
