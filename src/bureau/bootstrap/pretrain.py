"""Copy pretraining: the one skill of a base model that the CPU demo's tiny policy lacks.

A randomly initialised tiny model can learn the fixed parts of a demonstration in a few dozen
SFT steps (the tool-call format, a program's boilerplate), but not to copy an id it has just
read in the instruction into its own call: from about a hundred demonstrations it learns the
ids' prior instead. Real base models copy from their context long before any fine-tuning. This
stage gives the tiny model that skill on synthetic text, before it sees a single task:

    <words> K-4821 <words> 77 <words> K-4821 <words> \\n<word> "K-4821"
                                                          ^^^^^^^^ loss on these tokens

Each sequence is random words from the tokenizer's own vocabulary with an id (a capital letter,
a dash and 2-5 digits) written once or twice among them, up to two other numbers (distractors),
then a newline, one word and a quote; the id follows with its closing quote, and only those
tokens are trained. The number of words grows from 2 to `max_words` over the run (copying from
a short context is learned first, then from longer ones). Nothing here comes from the worlds:
no file, name, id or answer of any task.

Training goes through `Trainer` with the `sft` loss, as `train-sft` does (`bureau.bootstrap.sft`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from bureau.bootstrap.config import PretrainConfig
from bureau.bootstrap.sft import Demo, export, fit_stream

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_LETTERS = "ABCDEFGHJKLMNPRSTUVWXYZ"


class CopyTask:
    """Synthetic copy sequences over a tokenizer's vocabulary (see the module docstring)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_words: int) -> None:
        if max_words < 2:
            raise ValueError(f"max_words must be at least 2, got {max_words}")
        self.max_words = max_words
        self.tokenizer = tokenizer

    @cached_property
    def words(self) -> list[int]:
        """Ids of whole lowercase or capitalised words with a leading space (' market')."""
        vocab = self.tokenizer.get_vocab()
        chosen = []
        for piece, index in vocab.items():
            text = self.tokenizer.convert_tokens_to_string([piece])
            if text.startswith(" ") and len(text) > 4 and text[1:].isalpha() and text.isascii():
                chosen.append(index)
        return sorted(chosen)

    @cached_property
    def _pieces(self) -> dict[str, int]:
        def one(text: str) -> int:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) != 1:
                raise ValueError(f"{text!r} is not one token in this vocabulary")
            return ids[0]

        texts = [*"0123456789-\n", " ", ' "', '"', ' \\"', '\\"']
        texts += [*_LETTERS, *(f" {c}" for c in _LETTERS)]
        return {t: one(t) for t in texts}

    def sample(self, rng: random.Random, progress: float = 1.0) -> Demo:
        """One sequence and its loss mask; `progress` in [0, 1] scales its length.

        In the text the id's letter is the spaced token (` K`, as in "contract K-4821"); where
        it is copied it follows a quote, plain or JSON-escaped (`"K-4821"`, `\\"K-4821\\"`,
        as in a program inside a tool call), so the model learns that they are one id."""
        p = self._pieces
        digits = [p[d] for d in "0123456789"]
        longest = max(2, round(self.max_words * min(1.0, max(0.0, progress))))
        letter = rng.choice(_LETTERS)
        number = [rng.choice(digits) for _ in range(rng.randint(2, 5))]
        chunks: list[list[int]] = [[rng.choice(self.words)] for _ in range(rng.randint(2, longest))]
        for _ in range(rng.randint(1, 2)):
            chunks.insert(rng.randint(0, len(chunks)), [p[f" {letter}"], p["-"], *number])
        for _ in range(rng.randint(0, 2)):
            other = [rng.choice(digits) for _ in range(rng.randint(2, 6))]
            chunks.insert(rng.randint(0, len(chunks)), [p[" "], *other])
        opening, closing = rng.choice(((' "', '"'), (' \\"', '\\"')))
        prompt = [t for chunk in chunks for t in chunk]
        prompt += [p["\n"], rng.choice(self.words), p[opening]]
        answer = [p[letter], p["-"], *number, p[closing]]
        return prompt + answer, [0] * len(prompt) + [1] * len(answer)

    def batches(self, seed: int, steps: int, per_step: int) -> Callable[[int], list[Demo]]:
        """`take(step)`: the `per_step` sequences of 0-based `step`, the same for a seed
        whatever ran before; lengths follow the curriculum (10% of `max_words`, rising to all
        of it at the last step)."""

        def take(step: int) -> list[Demo]:
            rng = random.Random(f"{seed}/{step}")
            progress = 0.1 + 0.9 * step / max(1, steps - 1)
            return [self.sample(rng, progress) for _ in range(per_step)]

        return take


def copy_accuracy(model: Any, demos: Sequence[Demo]) -> float:
    """Greedy accuracy on the trained tokens of `demos`, teacher-forced (logits only where a
    trained token is predicted)."""
    import torch

    right = total = 0
    with torch.no_grad():
        for ids, mask in demos:
            keep = [i for i in range(len(ids) - 1) if mask[i + 1]]
            if not keep:
                continue
            logits = model(input_ids=torch.tensor([ids]), logits_to_keep=torch.tensor(keep)).logits
            predicted = logits[0].argmax(-1).tolist()
            right += sum(p == ids[i + 1] for p, i in zip(predicted, keep, strict=True))
            total += len(keep)
    return right / total if total else 0.0


def pretrain_copy(
    config: PretrainConfig, *, log: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Copy-pretrain `config.model` into `config.out/weights`; see the module docstring."""
    from transformers import AutoTokenizer

    from bureau.algo.losses import SFTLossConfig, make_loss_fn
    from bureau.trainer.trainer import Trainer

    say = log or (lambda _: None)
    tokenizer = AutoTokenizer.from_pretrained(str(config.model), local_files_only=True)
    task = CopyTask(tokenizer, config.max_words)
    trainer_config = config.trainer.model_copy(update={"seed": config.seed})
    trainer = Trainer.from_pretrained(config.model, make_loss_fn(SFTLossConfig()), trainer_config)
    held_out = [task.sample(random.Random(f"held-out/{config.seed}/{i}")) for i in range(64)]
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    metrics_file = (config.out / "metrics.jsonl").open("w")

    def on_step(metrics: dict[str, Any]) -> None:
        step = int(metrics["train/step"])
        if step % config.eval_every == 0 or step == config.steps:
            trainer.model.eval()
            metrics["copy_accuracy"] = copy_accuracy(trainer.model, held_out)
            trainer.model.train()
            say(
                f"step {step}: nll {metrics.get('nll', float('nan')):.3f}, copy accuracy "
                f"{metrics['copy_accuracy']:.2f} (held-out sequences of up to "
                f"{config.max_words} words), {metrics['train/step_s']:.2f} s"
            )
        metrics_file.write(json.dumps(metrics) + "\n")
        metrics_file.flush()

    try:
        history = fit_stream(
            trainer,
            task.batches(config.seed, config.steps, config.sequences_per_step),
            steps=config.steps,
            on_step=on_step,
        )
        export(trainer, config.model, config.out / "weights")
    finally:
        metrics_file.close()
        trainer.close()
    say(f"weights in {config.out / 'weights'}")
    return history
