"""Plots of a study, described once as data and drawn as SVG (always) or PNG (with matplotlib).

A :class:`Chart` is either an x-y chart (``line``/``scatter`` series) or a horizontal bar chart
(``bars``: one stacked bar per category). :func:`to_svg` needs nothing but the standard library;
:func:`to_png` uses matplotlib when it is installed and returns False otherwise.
"""

from __future__ import annotations

import html
import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Series", "Chart", "to_svg", "to_png", "have_matplotlib"]

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Series:
    """One named series: points (x, y) for x-y charts, or one value per category for bars."""

    name: str
    y: list[float]
    x: list[float] = field(default_factory=list)
    style: str = "scatter"  # scatter | line


@dataclass
class Chart:
    """A plot: ``kind`` "xy" (series of points) or "bars" (stacked horizontal bars per category)."""

    title: str
    kind: str
    series: list[Series]
    xlabel: str = ""
    ylabel: str = ""
    categories: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(s.y for s in self.series)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    step = (hi - lo) / (n - 1)
    return [lo + i * step for i in range(n)]


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def to_svg(chart: Chart, width: int = 640, height: int = 360) -> str:
    """The chart as a standalone SVG document."""
    left, right, top, bottom = (150 if chart.kind == "bars" else 70), 20, 30, 50
    pw, ph = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="13">{html.escape(chart.title)}</text>']
    if chart.empty:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>')
        return "".join(parts)
    if chart.kind == "bars":
        totals = [sum(s.y[i] for s in chart.series) for i in range(len(chart.categories))]
        xmax = max(totals) or 1.0
        bh = ph / max(1, len(chart.categories))
        for i, cat in enumerate(chart.categories):
            y0, x0 = top + i * bh, float(left)
            parts.append(f'<text x="{left - 6}" y="{y0 + bh / 2 + 4}" text-anchor="end">{html.escape(cat)}</text>')
            for j, s in enumerate(chart.series):
                w = pw * s.y[i] / xmax
                parts.append(f'<rect x="{x0:.1f}" y="{y0 + bh * 0.15:.1f}" width="{max(w, 0):.1f}" '
                             f'height="{bh * 0.7:.1f}" fill="{_COLORS[j % len(_COLORS)]}"/>')
                x0 += w
        for t in _ticks(0.0, xmax):
            x = left + pw * t / xmax
            parts.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle">{_fmt(t)}</text>')
    else:
        xs = [x for s in chart.series for x in s.x]
        ys = [y for s in chart.series for y in s.y if math.isfinite(y)]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        pad = (y1 - y0) * 0.05 or abs(y0) * 0.05 or 1.0
        y0, y1 = y0 - pad, y1 + pad
        x1 = x1 if x1 > x0 else x0 + 1

        def px(x: float) -> float:
            return left + pw * (x - x0) / (x1 - x0)

        def py(y: float) -> float:
            return top + ph - ph * (y - y0) / (y1 - y0)
        for j, s in enumerate(chart.series):
            color = _COLORS[j % len(_COLORS)]
            pts = [(px(x), py(y)) for x, y in zip(s.x, s.y) if math.isfinite(y)]
            if s.style == "line":
                d = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
                parts.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
            else:
                parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}" fill-opacity="0.6"/>' for a, b in pts]
        for t in _ticks(y0, y1):
            parts.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
        for t in _ticks(x0, x1):
            parts.append(f'<text x="{px(t):.1f}" y="{top + ph + 15}" text-anchor="middle">{_fmt(t)}</text>')
        parts.append(f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 {top + ph / 2})" '
                     f'text-anchor="middle">{html.escape(chart.ylabel)}</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">{html.escape(chart.xlabel)}</text>')
    for j, s in enumerate(chart.series):  # legend
        parts.append(f'<rect x="{left + 8 + 110 * j}" y="{top + 6}" width="10" height="10" fill="{_COLORS[j % len(_COLORS)]}"/>'
                     f'<text x="{left + 22 + 110 * j}" y="{top + 15}">{html.escape(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def have_matplotlib() -> bool:
    """Whether PNGs can be drawn."""
    return importlib.util.find_spec("matplotlib") is not None


def to_png(chart: Chart, path: str | Path) -> bool:
    """Draw the chart to a PNG with matplotlib; False (nothing written) when it is not installed."""
    if not have_matplotlib() or chart.empty:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    try:
        if chart.kind == "bars":
            left = [0.0] * len(chart.categories)
            for j, s in enumerate(chart.series):
                ax.barh(chart.categories, s.y, left=left, label=s.name, color=_COLORS[j % len(_COLORS)])
                left = [a + b for a, b in zip(left, s.y)]
            ax.invert_yaxis()
        else:
            for j, s in enumerate(chart.series):
                pts = [(x, y) for x, y in zip(s.x, s.y) if math.isfinite(y)]
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                if s.style == "line":
                    ax.plot(xs, ys, label=s.name, color=_COLORS[j % len(_COLORS)])
                else:
                    ax.scatter(xs, ys, s=12, alpha=0.6, label=s.name, color=_COLORS[j % len(_COLORS)])
        ax.set_title(chart.title)
        ax.set_xlabel(chart.xlabel)
        ax.set_ylabel(chart.ylabel)
        if len(chart.series) > 1:
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return True
