"""Copy pretraining: the one skill of a base model that the CPU demo's tiny policy lacks.

A randomly initialised tiny model can learn the fixed parts of a demonstration in a few dozen
SFT steps (the tool-call format, a program's boilerplate), but not to copy what it has just
read (an id in the instruction, a file name in a tool's output) into its own call: from a few
hundred demonstrations it learns the prior of the values it saw instead. Real base models copy
from their context long before any fine-tuning. This stage gives the tiny model that skill on
synthetic text, before it sees a single task:

    <words> `models/quill-works_cost_model_v3.xlsx` <words> 77 <words>
    <word>('models/quill-works_cost_model_v3.xlsx'
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ loss on these tokens

Each sequence is random words of the tokenizer's own vocabulary with one span written once or
twice among them, up to two bare numbers (distractors), then a newline, one word and an opening
quote; the span follows with its closing quote, and only those tokens are trained. (Cueing the
copy with the span's start, `('models/`, with other spans of its kind in the text that start
otherwise, kept the 3 x 128 model from learning to copy at all in 1,600 steps: ids copied whole
0.03 against 0.97.) A span is
one of four kinds (`SPAN_KINDS`), as the tasks' programs copy them: an id (`K-4821`), a name of
one to three capitalised words (`Quill Works Ltd`), a slug of one to three words joined by
dashes (`quill-works`), or a path (a folder, a slug and words joined by underscores, a version,
an extension). Where the span was written it sits between spaces, backticks, quotes or in a
printed list (`['K-4821_quill-works.pdf']`); where it is copied it follows a plain, JSON-escaped
or single quote (as in a program inside a tool call). The words of names, slugs and paths are
the vocabulary's own words with their leading space dropped, so they split into pieces
(`norwood` is `n`, `or`, `wood`) as unseen company names do. The text is encoded whole, so the
tokens trained are the tokens a policy emits. The number of words grows from 10% of `max_words`
to all of it over the run (copying from a short context is learned first). Nothing here comes
from the worlds: no file, name, id or answer of any task.

The loss is a sampled softmax (`sampled_softmax_nll`): the log-probability of each trained
token among the ids of the batch's sequences plus a few thousand random ones, not among the
whole vocabulary. The copied tokens are always in the batch, so the skill is the same, and the
output layer, which dominates a tiny model's cost, shrinks: this stage takes a few minutes on
two cores. SFT and RL then use the full softmax, as the engines do.
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
SPAN_KINDS = ("id", "name", "slug", "path")
"""What a sequence asks to copy (see the module docstring)."""
_WRITTEN = ((" ", " "), (" `", "`"), (" '", "'"), (' "', '"'), (" ['", "']"), (" (", ")"))
"""How a span is written in the text: (before, after)."""
_COPIED = (
    (" '", "'"), ("('", "'"), ("['", "'"), (' "', '"'), ('("', '"'), (' \\"', '\\"'),
)  # fmt: skip
"""How it is copied: (the opening quote the prompt ends with, the closing quote trained)."""
_EXTENSIONS = ("xlsx", "pdf", "docx", "pptx", "eml", "csv", "json")


class CopyTask:
    """Synthetic copy sequences over a tokenizer's vocabulary (see the module docstring)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_words: int,
        kinds: Sequence[str] = SPAN_KINDS,
    ) -> None:
        if max_words < 2:
            raise ValueError(f"max_words must be at least 2, got {max_words}")
        unknown = sorted(set(kinds) - set(SPAN_KINDS))
        if unknown or not kinds:
            raise ValueError(f"span kinds must be among {SPAN_KINDS}, got {list(kinds)}")
        self.max_words = max_words
        self.kinds = tuple(kinds)
        """Drawn uniformly, so a kind listed twice is drawn twice as often."""
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
    def _texts(self) -> list[str]:
        """The words' lowercase text without the space (`market`)."""
        found = self.tokenizer.convert_ids_to_tokens(self.words)
        return sorted({self.tokenizer.convert_tokens_to_string([t])[1:].lower() for t in found})

    def span(self, rng: random.Random, kind: str) -> str:
        """One span of `kind` to copy."""
        word = lambda: rng.choice(self._texts)  # noqa: E731
        # Half the words of names and slugs are two run together (`copperhill`), as company
        # names often are: pieces a policy knows in an order it has never seen.
        compound = lambda: word() + (word() if rng.random() < 0.5 else "")  # noqa: E731
        if kind == "id":
            letters = "".join(rng.choice(_LETTERS) for _ in range(rng.choice((1, 1, 1, 2))))
            return f"{letters}-{rng.randint(0, 10 ** rng.choice((2, 3, 3, 3, 4)) - 1):03d}"
        if kind == "name":
            return " ".join(compound().capitalize() for _ in range(rng.randint(1, 3)))
        slug = "-".join(compound() for _ in range(rng.randint(1, 3)))
        if kind == "slug":
            return slug
        parts = [slug, *(word() for _ in range(rng.randint(0, 3)))]
        if rng.random() < 0.5:
            parts.append(f"v{rng.randint(1, 9)}")
        folders = "/".join(word() for _ in range(rng.randint(1, 2)))
        return f"{folders}/{'_'.join(parts)}.{rng.choice(_EXTENSIONS)}"

    def sample(self, rng: random.Random, progress: float = 1.0) -> Demo:
        """One sequence and its loss mask; `progress` in [0, 1] scales its length."""
        kind = rng.choice(self.kinds)
        span = self.span(rng, kind)
        longest = max(2, round(self.max_words * min(1.0, max(0.0, progress))))
        pieces = [" " + rng.choice(self._texts) for _ in range(rng.randint(2, longest))]
        before, after = rng.choice(_WRITTEN)
        for _ in range(rng.randint(1, 2)):
            pieces.insert(rng.randint(0, len(pieces)), f"{before}{span}{after}")
        for _ in range(rng.randint(0, 2)):
            pieces.insert(rng.randint(0, len(pieces)), f" {rng.randint(10, 999999)}")
        opening, closing = rng.choice(_COPIED)
        prompt = "".join(pieces).lstrip() + "\n" + rng.choice(self._texts) + opening
        return self._encode(prompt, span + closing)

    def _encode(self, prompt: str, copied: str) -> Demo:
        """The ids of `prompt + copied` encoded whole, and the mask of every token that ends
        inside `copied` (a token spanning the boundary is the model's to write too)."""
        encoded = self.tokenizer(
            prompt + copied, add_special_tokens=False, return_offsets_mapping=True
        )
        ids = list(encoded["input_ids"])
        mask = [int(end > len(prompt)) for _, end in encoded["offset_mapping"]]
        return ids, mask

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
    return copy_scores(model, demos)[0]


def copy_scores(model: Any, demos: Sequence[Demo]) -> tuple[float, float]:
    """(greedy accuracy on the trained tokens, share of `demos` whose every trained token is
    the greedy one), teacher-forced, in one right-padded forward pass (causal attention: the
    padding after a sequence changes nothing before it)."""
    import torch

    if not demos:
        return 0.0, 0.0
    ids, where, targets = batch_tensors(demos)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[where[0], where[1]]
    hits = (logits.argmax(-1) == targets).tolist()
    rows = where[0].tolist()
    whole = sum(all(h for h, r in zip(hits, rows, strict=True) if r == row) for row in set(rows))
    return (sum(hits) / len(hits) if hits else 0.0), whole / len(demos)


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


def by_length(demos: Sequence[Demo], token_budget: int) -> list[list[Demo]]:
    """`demos` sorted by length and cut into micro-batches whose padded size (sequences times
    the longest) stays within `token_budget` (one sequence at least): each is padded to its
    own longest sequence, not the step's (a step's paths are twice as long as its ids, and
    padding them all to one width spent about half a step on padding), and short sequences
    still go through in one pass (every pass has a fixed cost)."""
    parts: list[list[Demo]] = []
    for demo in sorted(demos, key=lambda d: len(d[0])):
        if parts and (len(parts[-1]) + 1) * len(demo[0]) <= token_budget:
            parts[-1].append(demo)
        else:
            parts.append([demo])
    return parts


def copy_backward(
    body: Any, weight: torch.Tensor, demos: Sequence[Demo], candidates: torch.Tensor, budget: int
) -> float:
    """Accumulate the gradient of the mean sampled-softmax nll over every trained token of
    `demos` (`body` the model without its output layer, `weight` the output embedding), in
    passes of at most `budget` padded tokens; returns that mean."""
    trained = sum(sum(mask) for _, mask in demos)
    nll = 0.0
    for part in by_length(demos, budget):
        ids, where, targets = batch_tensors(part)
        hidden = body(input_ids=ids).last_hidden_state[where[0], where[1]]
        loss = sampled_softmax_nll(hidden, weight, targets, candidates)
        # Each pass weighs by its share of the tokens: the sum is the mean over all of them.
        (loss * (len(targets) / trained)).backward()
        nll += float(loss.detach()) * len(targets) / trained
    return nll


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
    from bureau.trainer.threads import CoreShare

    say = log or (lambda _: None)
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(config.model), local_files_only=True)
    model, _ = load_checkpoint(config.model, dtype=torch.float32)
    model.train()
    task = CopyTask(tokenizer, config.max_words, config.spans)
    take = task.batches(config.seed, config.steps, config.sequences_per_step)
    held_out = {
        kind: [
            CopyTask(tokenizer, config.max_words, (kind,)).sample(
                random.Random(f"held-out/{config.seed}/{kind}/{i}")
            )
            for i in range(32)
        ]
        for kind in dict.fromkeys(task.kinds)
    }
    weight = model.get_output_embeddings().weight
    body = model.get_decoder()
    optimizer = adamw(list(model.parameters()), lr=config.lr, weight_decay=0.0)
    vocab = len(tokenizer)
    negatives = torch.Generator().manual_seed(config.seed)
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    history: list[dict[str, Any]] = []
    cores = CoreShare(log=say)
    cores.start()
    with (config.out / "metrics.jsonl").open("w") as metrics_file:
        for step in range(config.steps):
            cores.update()
            started = time.perf_counter()
            demos = take(step)
            drawn = torch.randint(0, vocab, (config.negatives,), generator=negatives)
            every = [t for ids, _ in demos for t in ids]
            candidates = torch.unique(torch.cat([torch.tensor(every), drawn]))
            optimizer.zero_grad(set_to_none=True)
            nll = copy_backward(body, weight, demos, candidates, config.token_budget)
            optimizer.step()
            metrics: dict[str, Any] = {
                "step": step + 1,
                "nll": nll,
                "step_s": time.perf_counter() - started,
                "threads": cores.threads,
            }
            if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
                model.eval()
                scores = {kind: copy_scores(model, demos) for kind, demos in held_out.items()}
                model.train()
                metrics["copy_accuracy"] = sum(a for a, _ in scores.values()) / len(scores)
                metrics["copy_exact"] = {kind: exact for kind, (_, exact) in scores.items()}
                exact = ", ".join(f"{k} {e:.2f}" for k, e in metrics["copy_exact"].items())
                say(
                    f"step {step + 1}: nll {metrics['nll']:.3f}, copy accuracy "
                    f"{metrics['copy_accuracy']:.2f}, spans copied whole: {exact} (held-out, "
                    f"up to {config.max_words} words)"
                )
            metrics_file.write(json.dumps(metrics) + "\n")
            history.append(metrics)
    out = config.out / "weights"
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    say(f"weights in {out}")
    return history
