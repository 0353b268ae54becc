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

The loss is a sampled softmax (`sampled_softmax_nll`): the log-probability of each trained
token among the ids of the batch's sequences plus a few thousand random ones, not among all
151,936. The copied ids are always in the batch, so the skill is the same, and the output layer,
which dominates a tiny model's cost, shrinks about 30-fold: this stage takes a few minutes on
two cores, where full-vocabulary steps through `Trainer` took ten times longer. SFT and RL then
use the full softmax, as the engines do.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from bureau.bootstrap.config import PretrainConfig
from bureau.bootstrap.sft import Demo

if TYPE_CHECKING:
    import torch
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


def sampled_softmax_nll(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, candidates: torch.Tensor
) -> torch.Tensor:
    """Mean of -log softmax(hidden @ weight[candidates].T)[target] over the rows.

    `hidden` [N, H], `weight` [V, H] (the output embedding), `targets` [N] vocabulary ids that
    must all be in `candidates` [C] (unique vocabulary ids). With two candidates whose logits are
    0 and ln 3 and the second as target: -log(3 / (1 + 3)) = 0.2877.
    """
    import torch

    position = torch.full((weight.shape[0],), -1, dtype=torch.long, device=targets.device)
    position[candidates] = torch.arange(len(candidates), device=targets.device)
    index = position[targets]
    if bool((index < 0).any()):
        raise ValueError("every target must be among the candidates")
    logits = hidden.float() @ weight[candidates].float().T
    return torch.nn.functional.cross_entropy(logits, index)


def batch_tensors(demos: Sequence[Demo]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids [B, L] right-padded with 0, (row, column) [2, N] of the positions that predict a
    trained token, those tokens [N])."""
    import torch

    width = max(len(ids) for ids, _ in demos)
    ids = torch.zeros((len(demos), width), dtype=torch.long)
    rows, columns, targets = [], [], []
    for row, (tokens, mask) in enumerate(demos):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        for position in range(1, len(tokens)):
            if mask[position]:
                rows.append(row)
                columns.append(position - 1)
                targets.append(tokens[position])
    return ids, torch.tensor([rows, columns]), torch.tensor(targets)


def pretrain_copy(
    config: PretrainConfig, *, log: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Copy-pretrain `config.model` into `config.out/weights`; see the module docstring."""
    import torch
    from transformers import AutoTokenizer

    from bureau.models.checkpoint import load_checkpoint
    from bureau.trainer.config import adamw

    say = log or (lambda _: None)
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(config.model), local_files_only=True)
    model, _ = load_checkpoint(config.model, dtype=torch.float32)
    model.train()
    task = CopyTask(tokenizer, config.max_words)
    take = task.batches(config.seed, config.steps, config.sequences_per_step)
    held_out = [task.sample(random.Random(f"held-out/{config.seed}/{i}")) for i in range(64)]
    weight = model.get_output_embeddings().weight
    body = model.get_decoder()
    optimizer = adamw(list(model.parameters()), lr=config.lr, weight_decay=0.0)
    vocab = len(tokenizer)
    negatives = torch.Generator().manual_seed(config.seed)
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    history: list[dict[str, Any]] = []
    with (config.out / "metrics.jsonl").open("w") as metrics_file:
        for step in range(config.steps):
            started = time.perf_counter()
            ids, where, targets = batch_tensors(take(step))
            hidden = body(input_ids=ids).last_hidden_state[where[0], where[1]]
            drawn = torch.randint(0, vocab, (config.negatives,), generator=negatives)
            candidates = torch.unique(torch.cat([ids.flatten(), targets, drawn]))
            loss = sampled_softmax_nll(hidden, weight, targets, candidates)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            metrics: dict[str, Any] = {
                "step": step + 1,
                "nll": float(loss.detach()),
                "step_s": time.perf_counter() - started,
            }
            if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
                model.eval()
                metrics["copy_accuracy"] = copy_accuracy(model, held_out)
                model.train()
                say(
                    f"step {step + 1}: nll {metrics['nll']:.3f}, copy accuracy "
                    f"{metrics['copy_accuracy']:.2f} (held-out, up to {config.max_words} words)"
                )
            metrics_file.write(json.dumps(metrics) + "\n")
            history.append(metrics)
    out = config.out / "weights"
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    say(f"weights in {out}")
    return history
