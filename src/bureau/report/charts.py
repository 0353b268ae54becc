"""Charts as inline SVG, drawn by matplotlib (no pyplot state, no network, no script).

Every chart marks its data: each series' points (a line's markers, a bar) sit in an SVG group
whose id holds `pts-`, and the chart says how many points it drew (`Chart.points`). The page's
check (and the headless-browser test) counts what rendered against that.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")


@dataclass
class Chart:
    title: str
    svg: str
    points: int
    note: str = ""


@dataclass
class Series:
    """y over x; `low`/`high` (the same length) draw an interval: a band on a line, whiskers on
    points and bars."""

    name: str
    x: Sequence[float]
    y: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None
    line: bool = True
    marker: str = "o"
    axis: int = 0
    """0: the left axis, 1: the right one."""


def _figure(width: float = 7.0, height: float = 3.2) -> Any:
    import matplotlib

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, selectable
    matplotlib.rcParams["svg.hashsalt"] = "bureau"  # the same run gives the same file
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _svg(figure: Any, name: str) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # Several charts share one page: make their ids (clip paths, markers) their own.
    ids = set(re.findall(r'id="([^"]+)"', text))
    prefix = f"{name}-"
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(
        r"(#)([\w.\-]+)",
        lambda m: f"#{prefix}{m.group(2)}" if m.group(2) in ids else m.group(0),
        text,
    )
    return text


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float("nan") if v is None else float(v) for v in values]


def lines(
    name: str,
    title: str,
    series: Sequence[Series],
    *,
    xlabel: str = "step",
    ylabel: str = "",
    ylabel2: str = "",
    ylim: tuple[float, float] | None = None,
    note: str = "",
) -> Chart | None:
    """Lines (or points) over a shared x; None when no series has a value."""
    drawn = [s for s in series if any(v is not None for v in s.y)]
    if not drawn:
        return None
    figure = _figure()
    left = figure.subplots()
    axes = [left]
    if any(s.axis == 1 for s in drawn):
        axes.append(left.twinx())
    points = 0
    for index, s in enumerate(drawn):
        ax = axes[min(s.axis, len(axes) - 1)]
        color = COLORS[index % len(COLORS)]
        y = _clean(s.y)
        count = sum(1 for v in s.y if v is not None)
        gid = f"pts-{index}"
        if s.low is not None and s.high is not None:
            low, high = _clean(s.low), _clean(s.high)
            if s.line:
                ax.fill_between(s.x, low, high, color=color, alpha=0.15, linewidth=0)
            else:
                err = [
                    [max(0.0, v - lo) for v, lo in zip(y, low, strict=True)],
                    [max(0.0, hi - v) for v, hi in zip(y, high, strict=True)],
                ]
                ax.errorbar(s.x, y, yerr=err, fmt="none", ecolor=color, capsize=3, linewidth=1)
        (line,) = ax.plot(
            s.x,
            y,
            marker=s.marker,
            markersize=3.5 if s.line else 6,
            linestyle="-" if s.line else "none",
            color=color,
            label=s.name,
            linewidth=1.4,
        )
        line.set_gid(gid)
        points += count
    from matplotlib.ticker import MaxNLocator

    left.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps, k: whole numbers
    left.set_xlabel(xlabel)
    left.set_ylabel(ylabel)
    if len(axes) > 1:
        axes[1].set_ylabel(ylabel2)
        right = [v for s in drawn if s.axis == 1 for v in s.y if v is not None]
        if min(right) >= 0:
            axes[1].set_ylim(bottom=0)
    if ylim is not None:
        left.set_ylim(*ylim)
    left.grid(alpha=0.3)
    handles = [h for ax in axes for h in ax.get_legend_handles_labels()[0]]
    labels = [label for ax in axes for label in ax.get_legend_handles_labels()[1]]
    left.legend(handles, labels, fontsize=8, loc="best")
    return Chart(title, _svg(figure, name), points, note)


def bars(
    name: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    ylabel: str = "",
    horizontal: bool = False,
    ylim: tuple[float, float] | None = None,
    note: str = "",
) -> Chart | None:
    """Grouped bars, one group per category, one bar per series (`Series.y` in category
    order, None for no bar), with whiskers where the series has an interval."""
    if not categories or not any(v is not None for s in series for v in s.y):
        return None
    height = max(2.6, 0.32 * len(categories) * max(1, len(series)) + 1.2) if horizontal else 3.2
    figure = _figure(7.0, min(height, 24.0))
    ax = figure.subplots()
    width = 0.8 / max(1, len(series))
    points = 0
    for index, s in enumerate(series):
        color = COLORS[index % len(COLORS)]
        offsets = [i - 0.4 + width * (index + 0.5) for i in range(len(categories))]
        for i, value in enumerate(s.y):
            if value is None:
                continue
            err = None
            if s.low is not None and s.high is not None:
                lo, hi = s.low[i], s.high[i]
                if lo is not None and hi is not None:
                    err = [[max(0.0, value - lo)], [max(0.0, hi - value)]]
            draw = ax.barh if horizontal else ax.bar
            container = draw(
                offsets[i],
                value,
                width * 0.95,
                color=color,
                label=s.name if i == next(j for j, v in enumerate(s.y) if v is not None) else None,
                **({"xerr": err} if horizontal else {"yerr": err}),
                capsize=2 if err else 0,
                error_kw={"elinewidth": 1, "ecolor": "#333333"},
            )
            container.patches[0].set_gid(f"pts-{index}-{i}")
            points += 1
    ticks = list(range(len(categories)))
    if horizontal:
        ax.set_yticks(ticks, list(categories), fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(ylabel)
        if ylim is not None:
            ax.set_xlim(*ylim)
        ax.grid(axis="x", alpha=0.3)
    else:
        rotate = 30 if max(len(c) for c in categories) > 10 else 0
        ax.set_xticks(ticks, list(categories), rotation=rotate, ha="right" if rotate else "center")
        ax.set_ylabel(ylabel)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.grid(axis="y", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8, loc="best")
    return Chart(title, _svg(figure, name), points, note)


def histogram(
    name: str,
    title: str,
    values: Sequence[float],
    *,
    xlabel: str,
    bins: int = 20,
    note: str = "",
) -> Chart | None:
    """The distribution of `values`; each non-empty bin is a point."""
    if not values:
        return None
    figure = _figure()
    ax = figure.subplots()
    counts, _edges, patches = ax.hist(values, bins=bins, color=COLORS[0], alpha=0.85)
    points = 0
    for i, (count, patch) in enumerate(zip(counts, patches, strict=True)):
        if count > 0:
            patch.set_gid(f"pts-0-{i}")
            points += 1
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.grid(axis="y", alpha=0.3)
    return Chart(title, _svg(figure, name), points, note)
