"""Measures what naive PDF text extraction gets wrong.

Some answers sit in ruled PDF tables or on two-column pages. The naive reader takes
`pypdf.PdfReader(...).pages[i].extract_text()` (content-stream order), finds the answer's label
and reads the first number after it, which is what an agent that dumps PDF text and greps it
would do. The world generator reports the fraction of such tasks where that number is wrong;
the oracle reads the same files layout-aware and is always right.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path

from pypdf import PdfReader

from .spec import PdfProbe

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@lru_cache(maxsize=64)
def naive_text(path: Path) -> str:
    return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)


def naive_number_after(text: str, label: str) -> float | None:
    i = text.lower().find(label.lower())
    if i < 0:
        return None
    m = _NUMBER.search(text, i + len(label))
    return float(m.group(0).replace(",", "")) if m else None


def naive_probe_ok(path: Path, probe: PdfProbe) -> bool:
    value = naive_number_after(naive_text(path), probe.label)
    return value is not None and math.isclose(value, probe.expected, rel_tol=1e-6, abs_tol=1e-9)
