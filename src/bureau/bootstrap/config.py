"""Settings of the bootstrap: the teacher's mistakes, the recording run and the SFT run."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from bureau.config import StrictModel
from bureau.harness.loop import HarnessConfig
from bureau.trainer.config import OptimizerConfig, TrainerConfig
from bureau.trials.faults import FaultConfig

SpanKind = Literal["id", "name", "slug", "path"]
"""What copy pretraining copies (`bureau.bootstrap.pretrain`)."""
Mistake = Literal["wrong_file", "wrong_value", "missing_key", "malformed_call", "give_up"]
MISTAKES: tuple[Mistake, ...] = (
    "wrong_file",
    "wrong_value",
    "missing_key",
    "malformed_call",
    "give_up",
)

TEACHER_TOOLS = (
    "fs_write_text",
    "code_run_python",
    "sheet_list",
    "sheet_read",
    "pdf_read_pages",
    "docx_read",
    "slides_read",
    "mail_read",
)
"""Every tool the teacher calls; runs of a bootstrapped model must expose the same ones."""


class MistakeRates(StrictModel):
    """Probability of each deliberate mistake in one trajectory (at most one per trajectory)."""

    wrong_file: float = Field(default=0.08, ge=0, le=1)
    """Read another file of the workspace than the one named, and answer from it."""
    wrong_value: float = Field(default=0.08, ge=0, le=1)
    """Read the right file, but answer one key with another value seen in it."""
    missing_key: float = Field(default=0.06, ge=0, le=1)
    """Leave the last answer key (in the instruction's order) out of output/answer.json."""
    malformed_call: float = Field(default=0.05, ge=0, le=1)
    """Write the first tool call as invalid JSON, then recover after the harness's correction."""
    give_up: float = Field(default=0.05, ge=0, le=1)
    """Stop after reading, with a final message and no answer file."""

    @model_validator(mode="after")
    def _at_most_one(self) -> MistakeRates:
        if self.total > 1.0 + 1e-9:
            raise ValueError(f"the mistake rates add up to {self.total:.3f}, more than 1")
        return self

    @property
    def total(self) -> float:
        return sum(getattr(self, name) for name in MISTAKES)

    def draw(self, rng: random.Random) -> Mistake | None:
        """One trajectory's mistake (None: a clean demonstration)."""
        u = rng.random()
        for name in MISTAKES:
            u -= getattr(self, name)
            if u < 0:
                return name
        return None

    @classmethod
    def off(cls) -> MistakeRates:
        return cls(wrong_file=0, wrong_value=0, missing_key=0, malformed_call=0, give_up=0)


def teacher_harness() -> HarnessConfig:
    """The harness settings of recordings (and of runs of the bootstrapped model)."""
    return HarnessConfig(max_turns=6, context_length=4096, tool_prefixes=list(TEACHER_TOOLS))


class RecordConfig(StrictModel):
    """`bureau bootstrap record`: the scripted teacher over a dataset, through real trials."""

    dataset: Path
    """Dataset folder (starter difficulty) whose tasks the teacher solves."""
    model: Path
    """Checkpoint folder whose tokenizer and chat template render the trajectories: the model
    that will be trained on them."""
    out: Path
    """Run folder: trials/, trajectories.parquet, run.json."""
    attempts: int = Field(default=1, ge=1)
    """Trajectories per task (each draws its own mistake)."""
    seed: int = 0
    """Seeds the mistakes: the same seed gives the same trajectories."""
    templates: list[str] | None = None
    """Only tasks of these templates (the manifest field, e.g. `law.starter_register_value`)."""
    max_tasks: int | None = Field(default=None, ge=1)
    """Only the first N tasks (after the template filter)."""
    mistakes: MistakeRates = Field(default_factory=MistakeRates)
    """How often each deliberate mistake happens."""
    answer_in_message: bool = False
    """End with the answer as a JSON object in the final message (the harness writes it to
    output/answer.json) instead of an `fs_write_text` call: no write tool in the prompt and no
    escaped JSON to imitate."""
    lookup_by_code: bool = False
    """Solve row lookups with one program: when the instruction names one spreadsheet and a
    row id (`C-103`), a `code_run_python` call finds that row, writes the answer keys from the
    columns that hold them to output/answer.json and prints them; when it asks for named ranges
    of one spreadsheet, a program reads each name's value (times 100 for percent) or sheet. A
    tiny model then needs to copy the id, names and file name, not to find a row in a table
    (which it learns far later)."""
    harness: HarnessConfig = Field(default_factory=teacher_harness)
    """The harness settings; the bootstrapped model must be run with the same tools."""
    concurrency: int = Field(default=4, ge=1)
    """Trials in flight at once."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """bwrap sandboxes, or none (unsafe: no isolation)."""
    agent_timeout_s: float | None = Field(default=None, gt=0)
    """Cap on each agent's time, on top of the task's own limit (as in `bureau eval`)."""
    retries: int = Field(default=0, ge=0)
    """Attempts after the first of a trial the machinery failed (`bureau.trials.retry`)."""
    faults: FaultConfig = Field(default_factory=FaultConfig)
    """Faults to inject, for drills (`bureau.trials.faults`); none by default."""


class SFTConfig(StrictModel):
    """`bureau train-sft`: supervised fine-tuning on recorded trajectories through the trainer."""

    trajectories: Path
    """Parquet file of trajectory records (`bureau bootstrap record` writes one)."""
    model: Path
    """Checkpoint folder to start from."""
    out: Path
    """Run folder: metrics.jsonl, config.json and weights/ (a Hugging Face folder)."""
    steps: int = Field(default=60, ge=1)
    """Optimizer steps."""
    sequences_per_step: int = Field(default=8, ge=1)
    """Trajectories per batch (drawn in a seeded, shuffled order, epoch after epoch)."""
    min_reward: float | None = None
    """Train only on trajectories with at least this reward (None: all, mistakes included)."""
    augment: int = Field(default=0, ge=0)
    """Fresh copies of each trajectory to train on beside it, its row ids and company names
    replaced by others of `augment_split` (`bureau.bootstrap.augment`), so the policy copies
    them instead of recalling the recorded ones."""
    augment_split: str = "train"
    """The split whose part of the pools the fresh values come from: the one recorded."""
    copy_replay: int = Field(default=0, ge=0)
    """Copy-pretraining sequences (`bureau.bootstrap.pretrain.CopyTask`, synthetic, no task
    data) added to each step's batch, so that fine-tuning keeps the copying it starts from."""
    seed: int = 0
    """Seeds the data order and the trainer."""
    attn_implementation: Literal["sdpa", "eager"] | None = None
    """Attention kernel of the model while training (None: the checkpoint's default). On CPU,
    eager is faster than sdpa's backward for short sequences of a tiny model."""
    trainer: TrainerConfig = Field(
        default_factory=lambda: TrainerConfig(
            optimizer=OptimizerConfig(lr=3e-3, warmup_steps=5), compute_entropy=False
        )
    )
    """Optimisation, packing and precision (the SFT default lr is high: tiny models)."""


class PretrainConfig(StrictModel):
    """`bureau bootstrap pretrain`: copy pretraining on synthetic text (see its module)."""

    model: Path
    """Checkpoint folder to start from (a random tiny model)."""
    out: Path
    """Run folder: metrics.jsonl, config.json and weights/ (a Hugging Face folder)."""
    steps: int = Field(default=600, ge=1)
    """Optimizer steps."""
    sequences_per_step: int = Field(default=32, ge=1)
    """Synthetic sequences per step."""
    token_budget: int = Field(default=1024, ge=1)
    """Padded tokens per forward pass: a step's sequences go through in passes of similar
    length, so that little is padding; the gradient is the step's whatever the budget."""
    max_words: int = Field(default=80, ge=2)
    """Most words around the span at the end of the curriculum."""
    spans: list[SpanKind] = Field(
        default_factory=lambda: list[SpanKind](("id", "id", "path", "slug")), min_length=1
    )
    """The kinds of span copied (`bureau.bootstrap.pretrain.SPAN_KINDS`), each sequence's drawn
    from this list uniformly (a kind listed twice is drawn twice as often)."""
    eval_every: int = Field(default=100, ge=1)
    """Measure the greedy copy accuracy on 64 held-out sequences every this many steps."""
    lr: float = Field(default=3e-3, gt=0)
    """AdamW's learning rate (constant; a tiny model from scratch takes a high one)."""
    negatives: int = Field(default=2048, ge=0)
    """Random vocabulary ids added to each step's candidates of the sampled softmax."""
    seed: int = 0
    """Seeds the sequences, the negatives and torch."""
