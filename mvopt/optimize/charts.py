"""The iteration-time breakdown chart (stacked horizontal bars), the one plot of a study that
Optuna's visualization module does not draw: SVG with the standard library only (the artifact
stored on a trial while the search runs), PNG with matplotlib (the report)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from mvopt.files import write_atomic

__all__ = ["Series", "Chart", "to_svg", "to_png"]

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Series:
    """One stacked component: its value for each category (bar)."""

    name: str
    y: list[float]


@dataclass
class Chart:
    """Stacked horizontal bars: one bar per category, one segment per series."""

    title: str
    series: list[Series]
    xlabel: str = ""
    categories: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(s.y for s in self.series)


def _ticks(hi: float, n: int = 5) -> list[float]:
    return [hi * i / (n - 1) for i in range(n)]


def to_svg(chart: Chart, width: int = 640, height: int = 360) -> str:
    """The chart as a standalone SVG document."""
    left, right, top, bottom = 150, 20, 30, 50
    pw, ph = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="13">{html.escape(chart.title)}</text>']
    if chart.empty:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>')
        return "".join(parts)
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
    for t in _ticks(xmax):
        x = left + pw * t / xmax
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle">{t:.3g}</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">{html.escape(chart.xlabel)}</text>')
    for j, s in enumerate(chart.series):  # legend
        parts.append(f'<rect x="{left + 8 + 110 * j}" y="{top + 6}" width="10" height="10" fill="{_COLORS[j % len(_COLORS)]}"/>'
                     f'<text x="{left + 22 + 110 * j}" y="{top + 15}">{html.escape(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def to_png(chart: Chart, path: str | Path) -> None:
    """Draw the chart to a PNG with matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 0.8 + 0.45 * max(3, len(chart.categories))), dpi=90)
    try:
        left = [0.0] * len(chart.categories)
        for j, s in enumerate(chart.series):
            ax.barh(chart.categories, s.y, left=left, label=s.name, color=_COLORS[j % len(_COLORS)])
            left = [a + b for a, b in zip(left, s.y)]
        ax.invert_yaxis()
        ax.set_title(chart.title)
        ax.set_xlabel(chart.xlabel)
        if len(chart.series) > 1:
            ax.legend(fontsize=8)
        fig.tight_layout()
        write_atomic(path, lambda f: fig.savefig(f, format="png"), binary=True)
    finally:
        plt.close(fig)
