"""SFT's fresh copies of a demonstration: the same trajectory about other ids and companies."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from bureau.bootstrap.augment import FreshValues, augment, pieces, rerender
from bureau.worlds.fabric import PREFIX, in_split, split_part

PROMPT = (
    "<|im_start|>user\nWho is the counterparty to contract C-152, and what do the named ranges of "
    "`models/norwood-systems_three_statement_model_v4.xlsx` hold for Norwood Systems?"
    "<|im_end|>\n<|im_start|>assistant\n"
)
PROGRAM = (
    '<tool_call>\n{"name": "code_run_python", "arguments": {"code": "b=load(\'models/'
    "norwood-systems_three_statement_model_v4.xlsx')\\nr=[x for x in rows if 'C-152' in x]\"}}"
    "\n</tool_call><|im_end|>"
)
OBSERVATION = (
    "\n<|im_start|>user\n<tool_response>\n['C-152_weber-supply-co_supply.pdf']\n"
    "</tool_response><|im_end|>\n<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_cache: Path):  # type: ignore[no-untyped-def]
    from bureau.models.tokenizer import build_tokenizer

    return build_tokenizer("qwen3-demo", tokenizer_cache)


def _demo(tokenizer) -> tuple[list[int], list[int]]:  # type: ignore[no-untyped-def]
    ids: list[int] = []
    mask: list[int] = []
    for text, m in ((PROMPT, 0), (PROGRAM, 1), (OBSERVATION, 0), ("Done.<|im_end|>", 1)):
        encoded = tokenizer.encode(text, add_special_tokens=False)
        ids += encoded
        mask += [m] * len(encoded)
    return ids, mask


def test_pieces_cut_at_mask_changes_and_added_tokens() -> None:
    found = pieces([1, 2, 9, 3, 4, 5], [0, 0, 0, 1, 1, 0], boundaries={9})
    assert found == [([1, 2], 0), ([9], 0), ([3, 4], 1), ([5], 0)]


def test_a_variant_replaces_each_id_and_company_word_consistently(tokenizer) -> None:  # type: ignore[no-untyped-def]
    demo = _demo(tokenizer)
    assert rerender(demo, tokenizer, lambda text: text) == demo  # nothing replaced: the same ids
    ids, mask = rerender(demo, tokenizer, FreshValues(random.Random(3), "train")) or ([], [])
    text = tokenizer.decode(ids)
    sampled = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert "C-152" not in text and "norwood" not in text.lower()
    (new_id,) = set(re.findall(r"C-\d{3}", text))
    assert text.count(new_id) == 3 and f"'{new_id}'" in sampled and in_split(new_id, "train")
    slug = re.search(r"models/([a-z]+)-systems_three", sampled)
    assert slug is not None
    word = slug.group(1)
    assert f"{word.capitalize()} Systems?" in text  # the name and its slug moved together
    assert word.capitalize() in split_part(PREFIX, "train")
    assert "weber-supply-co" in text  # a counterparty's slug is not a company name of the pool
    assert sampled.endswith("Done.<|im_end|>") and len(ids) == len(mask)
    # The prompt and the observation stay untrained, the teacher's turns trained.
    assert tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m]).startswith(
        "<|im_start|>user\nWho is"
    )


def test_augment_draws_from_the_split_and_leaves_out_what_does_not_round_trip(tokenizer) -> None:  # type: ignore[no-untyped-def]
    demo = _demo(tokenizer)
    fresh, skipped = augment([demo], tokenizer, copies=3, split="validation", seed=0)
    assert skipped == 0 and len(fresh) == 3 and len({tuple(ids) for ids, _ in fresh}) == 3
    for ids, _ in fresh:
        (new_id,) = set(re.findall(r"C-\d{3}", tokenizer.decode(ids)))
        assert in_split(new_id, "validation") and not in_split(new_id, "train")
    assert (
        augment([demo], tokenizer, copies=2, split="train", seed=0)[0]
        == augment([demo], tokenizer, copies=2, split="train", seed=0)[0]
    )  # seeded
    # Ids no tokenizer would write for their text (" hel" + "lo" for " hello") do not survive
    # decoding and encoding: that demonstration gets no copy.
    odd = tokenizer.encode(" hel", add_special_tokens=False)
    odd += tokenizer.encode("lo", add_special_tokens=False)
    assert tokenizer.encode(" hello", add_special_tokens=False) != odd
    broken = (demo[0] + odd, demo[1] + [0] * len(odd))
    assert augment([broken, demo], tokenizer, copies=1, split="train", seed=0)[1] == 1
