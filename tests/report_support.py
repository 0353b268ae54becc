"""Checks of `bureau report` pages, shared by the tests that make real runs of each kind.

`check_report` reads the page as written: self-contained (nothing fetched), and each chart with
the points it says it drew. `chromium_render` opens it in headless Chromium (the Debian package)
and reads back what rendered: script errors, and per chart the data points with a size on the
page (`data-rendered`, set by the page's own script once loaded), with a screenshot.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

FIGURE = re.compile(
    r'<figure class="chart" data-points="(\d+)"(?: data-rendered="(\d+)")?><figcaption>'
    r"(.*?)</figcaption>"
)


def check_report(page: str) -> dict[str, int]:
    """Per chart title, the points it drew; fails on anything the page would fetch."""
    assert page.startswith("<!DOCTYPE html>")
    for fetched in ('src="http', "src='http", 'href="http', "<link", "@import", "url(http"):
        assert fetched not in page, fetched
    found = {html.unescape(m.group(3)): int(m.group(1)) for m in FIGURE.finditer(page)}
    assert found, "no chart on the page"
    return found


@dataclass
class Rendered:
    script_errors: int
    ready: bool
    charts: dict[str, tuple[int, int]]
    """Per title: (points drawn, points rendered with a size)."""
    distinct_colours: int


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    reason = "no headless Chromium: apt-get install chromium (make test does)"
    if os.environ.get("BUREAU_REQUIRE_CHROMIUM"):
        pytest.fail(reason)
    pytest.skip(reason)


def chromium_render(page: Path, screenshot: Path) -> Rendered:
    """Open `page` in headless Chromium: its DOM once loaded, and a screenshot."""
    binary = chromium()
    profile = screenshot.parent / "chromium-profile"
    common = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--disable-extensions", "--hide-scrollbars",
        f"--user-data-dir={profile}", "--window-size=1400,2400", "--virtual-time-budget=10000",
    ]  # fmt: skip
    url = page.resolve().as_uri()
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-3000:]
    shot = subprocess.run(
        [*common, f"--screenshot={screenshot}", url], capture_output=True, text=True, timeout=120
    )
    assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-3000:]
    text = dom.stdout
    errors = re.search(r'<html[^>]*data-script-errors="(\d+)"', text)
    assert errors is not None, "the page's script never ran: " + text[:500]
    charts = {}
    for match in FIGURE.finditer(text):
        assert match.group(2) is not None, f"{match.group(3)}: not counted"
        charts[html.unescape(match.group(3))] = (int(match.group(1)), int(match.group(2)))
    from PIL import Image

    with Image.open(screenshot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 22) or []
    return Rendered(
        int(errors.group(1)),
        re.search(r'<body[^>]*data-ready="1"', text) is not None,
        charts,
        len(colours),
    )
