"""Demonstrations re-rendered with fresh values, so that SFT teaches copying them.

A tiny policy fine-tuned on a few hundred demonstrations learns whatever fits them most easily.
When the same few dozen contract ids and company names recur in them, recalling one of those is
as good as copying the one in the prompt, and the policy learns the prior: on a held-out prompt
it writes a training company's file name (`ironwood-systems_...` for `yarrow-systems_...`).
Each variant here is a recorded trajectory about other values of the same split: every row id
(`C-582`) becomes a fresh id, and every company's first word (`Norwood Systems`, also as it
sits in a slug: `norwood-systems`) a fresh word, both drawn from the split's own part of the
shared pools (`fabric.in_split`, `fabric.split_part`), so the held-out splits' values stay
unseen. Nothing else needs to change: the teacher's programs read their answers from the files,
and the answers are not in the trajectory.

The trajectory's ids are split where the loss mask changes and at the tokenizer's added tokens
(`<|im_start|>`, `<tool_call>`...); each piece is decoded, its values replaced, and encoded
again, keeping its mask. Decoding and encoding a piece must give back its ids when nothing is
replaced; a trajectory with a piece that does not (none of the teacher's) is left as recorded.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from bureau.worlds.fabric import PREFIX, in_split, split_part

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Demo = tuple[list[int], list[int]]
"""(token ids, loss mask) of one demonstration."""

ROW_ID = re.compile(r"(?<![A-Za-z0-9])([A-Z]{1,4})-(\d{2,6})(?![0-9])")
"""A row id as worlds write them (`C-582`), alone or at the start of a file name."""


def pieces(ids: list[int], mask: list[int], boundaries: set[int]) -> list[tuple[list[int], int]]:
    """`ids` cut where the mask changes and around every id in `boundaries` (each such id a
    piece of its own), each piece with its mask value."""
    out: list[tuple[list[int], int]] = []
    for token, m in zip(ids, mask, strict=True):
        alone = token in boundaries
        if out and out[-1][1] == m and not alone and out[-1][0][-1] not in boundaries:
            out[-1][0].append(token)
        else:
            out.append(([token], m))
    return out


def rerender(
    demo: Demo, tokenizer: PreTrainedTokenizerBase, replace: Callable[[str], str]
) -> Demo | None:
    """`demo` with `replace` applied to the text of each piece (see the module docstring);
    None when a piece does not survive decoding and encoding as it is."""
    boundaries = set(tokenizer.added_tokens_decoder)
    ids: list[int] = []
    mask: list[int] = []
    for piece, m in pieces(*demo, boundaries):
        if len(piece) == 1 and piece[0] in boundaries:
            ids += piece
            mask.append(m)
            continue
        text = str(tokenizer.decode(piece))
        if tokenizer.encode(text, add_special_tokens=False) != piece:
            return None
        again = tokenizer.encode(replace(text), add_special_tokens=False)
        ids += again
        mask += [m] * len(again)
    return ids, mask


class FreshValues:
    """The replacement of one variant: a fresh id for each row id met, and a fresh company word
    for each company word met (a word of the prefix pool that names start with, capitalised
    before another capitalised word as in `Yarrow Systems`, or in lower case before a dash as
    in `yarrow-systems`); the same replacement each time one recurs."""

    _WORDS = "|".join(sorted(map(re.escape, PREFIX), key=len, reverse=True))
    NAME = re.compile(rf"(?<![A-Za-z])({_WORDS})(?= [A-Z][a-z])")
    SLUG = re.compile(rf"(?<![A-Za-z])({_WORDS.lower()})(?=-[a-z])")

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng = rng
        self.split = split
        self.ids: dict[str, str] = {}
        self.words: dict[str, str] = {}
        self.pool = split_part(PREFIX, split)

    def _id(self, found: re.Match[str]) -> str:
        old = found.group(0)
        if old not in self.ids:
            letters, digits = found.group(1), len(found.group(2))
            low = 10 ** (digits - 1) if digits > 1 else 0
            while True:
                new = f"{letters}-{self.rng.randint(low, 10**digits - 1)}"
                if new != old and new not in self.ids.values() and in_split(new, self.split):
                    break
            self.ids[old] = new
        return self.ids[old]

    def _word(self, found: re.Match[str]) -> str:
        old = found.group(1)
        key = old.lower()
        if key not in self.words:
            taken = set(self.words.values())
            fresh = [w for w in self.pool if w.lower() != key and w not in taken]
            self.words[key] = self.rng.choice(fresh)
        return self.words[key] if old[0].isupper() else self.words[key].lower()

    def __call__(self, text: str) -> str:
        text = ROW_ID.sub(self._id, text)
        text = self.NAME.sub(self._word, text)
        return self.SLUG.sub(self._word, text)


def augment(
    demos: Iterable[Demo],
    tokenizer: PreTrainedTokenizerBase,
    *,
    copies: int,
    split: str,
    seed: int,
) -> tuple[list[Demo], int]:
    """`copies` fresh variants of each demonstration, values drawn from `split`'s part of the
    pools; returns them and how many demonstrations could not be re-rendered (and got none)."""
    out: list[Demo] = []
    skipped = 0
    for n, demo in enumerate(demos):
        for k in range(copies):
            rng = random.Random(f"{seed}/{n}/{k}")
            variant = rerender(demo, tokenizer, FreshValues(rng, split))
            if variant is None:
                skipped += 1
                break
            out.append(variant)
    return out, skipped
