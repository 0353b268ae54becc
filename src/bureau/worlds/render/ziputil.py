"""Deterministic Office containers.

openpyxl, python-docx and python-pptx stamp the current time into zip entries and into
`docProps/core.xml`. Rewriting the container with fixed timestamps makes a generated world
byte-identical across runs with the same seed, which tests rely on.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
FIXED_DOC_TIME = "2026-01-01T00:00:00Z"

_CORE_TIME = re.compile(r"(<dcterms:(?:created|modified)[^>]*>)[^<]*(<)")


def normalize_ooxml(path: Path, transform: Callable[[str, bytes], bytes] | None = None) -> None:
    """Rewrite an OOXML zip with fixed timestamps; `transform(name, data)` may edit parts."""
    path.write_bytes(normalized_zip_bytes(path.read_bytes(), transform))


def normalized_zip_bytes(
    blob: bytes, transform: Callable[[str, bytes], bytes] | None = None
) -> bytes:
    """The same container with pinned times, nested Office files (chart data) included."""
    with zipfile.ZipFile(io.BytesIO(blob)) as src:
        entries = [(info.filename, src.read(info.filename)) for info in src.infolist()]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for name, data in entries:
            if name.endswith("docProps/core.xml"):
                data = _CORE_TIME.sub(rf"\g<1>{FIXED_DOC_TIME}\g<2>", data.decode()).encode()
            if name.endswith((".xlsx", ".docx", ".pptx")):
                data = normalized_zip_bytes(data)
            if transform is not None:
                data = transform(name, data)
            info = zipfile.ZipInfo(name, date_time=FIXED_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            dst.writestr(info, data)
    return out.getvalue()
