"""PNG figures of the report, drawn with matplotlib's object API (no pyplot, no GUI backend,
no global state): the only module that imports matplotlib."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from cuqa_builder.cutoff_estimate import CutoffProbeResult


@dataclass
class Line:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]


@dataclass
class Panel:
    title: str
    ylabel: str
    lines: list[Line]
    percent: bool = True  # a 0-100 axis from 0; else counts from 0


def line_panels(xlabel: str, panels: Sequence[Panel], path: Path) -> Path:
    return _save(line_figure(xlabel, panels), path)


def line_figure(xlabel: str, panels: Sequence[Panel]) -> Figure:
    """Panels side by side, one line per series, every y axis from 0 (Figures 4-7)."""
    fig = Figure(figsize=(4.4 * len(panels), 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for axis, panel in zip(axes, panels, strict=True):
        for line in panel.lines:
            axis.plot(line.xs, line.ys, marker="o", label=line.label)
        axis.set_title(panel.title, fontsize="medium")
        axis.set_xlabel(xlabel)
        values = sorted({x for line in panel.lines for x in line.xs})
        if len(values) <= 12:  # the swept values themselves, not a continuous scale
            axis.set_xticks(values, [f"{x:g}" for x in values])
        axis.set_ylabel(panel.ylabel)
        top = max((y for line in panel.lines for y in line.ys), default=0.0)
        axis.set_ylim(0, max(100.0, top * 1.05) if panel.percent else max(1.0, top * 1.15))
        axis.grid(alpha=0.3)
        if panel.lines:
            axis.legend(fontsize="x-small")
    return fig


def bar_panels(groups: Sequence[str], series: Sequence[tuple[str, Sequence[float]]],
               ylabel: str, path: Path, *, title: str = "") -> Path:
    """Grouped bars: one group per label of `groups`, one bar per series (a run)."""
    fig = Figure(figsize=(max(5.0, 0.55 * len(groups) * max(1, len(series)) + 2), 3.6))
    axis = fig.subplots()
    width = 0.8 / max(1, len(series))
    for n, (label, values) in enumerate(series):
        offsets = [i + (n - (len(series) - 1) / 2) * width for i in range(len(groups))]
        axis.bar(offsets, values, width=width, label=label)
    axis.set_xticks(range(len(groups)), groups, fontsize="small")
    axis.set_ylabel(ylabel)
    axis.set_ylim(0, 100)
    axis.set_title(title, fontsize="medium")
    axis.grid(axis="y", alpha=0.3)
    if series:
        axis.legend(fontsize="x-small")
    return _save(fig, path)


# --- the cutoff probe's plot (`cuqa-eval cutoff`) --------------------------------------------


def plot_cutoff_probe(result: CutoffProbeResult, path: Path) -> Path:
    """Closed-book accuracy per event month with its 95% interval, the fitted levels and the
    estimated cutoff."""
    months = [m for m in result.months if m.asked]
    fig = Figure(figsize=(max(5.0, 0.45 * len(months) + 2), 3.6))
    axis = fig.subplots()
    xs = list(range(len(months)))
    ys = [100 * m.accuracy for m in months]
    below = [100 * (m.accuracy - m.low) for m in months]
    above = [100 * (m.high - m.accuracy) for m in months]
    axis.errorbar(xs, ys, yerr=[below, above], fmt="o", capsize=3, label="accuracy (95% CI)")
    estimate = result.estimate
    position = {m.month: x for x, m in zip(xs, months, strict=True)}
    for level, name in ((estimate.known, "known"), (estimate.unseen, "unseen")):
        if level is not None:
            span = [position[level.first] - 0.4, position[level.last] + 0.4]
            axis.plot(span, [100 * level.accuracy] * 2, linestyle="--", label=f"{name} level")
    if estimate.cutoff in position:
        axis.axvline(position[estimate.cutoff] + 0.5, color="black", linewidth=1,
                     label=f"estimated cutoff {estimate.cutoff}")
    axis.set_xticks(xs, [m.month for m in months], rotation=60, fontsize="small")
    axis.set_ylim(0, 100)
    axis.set_ylabel("closed-book accuracy (%)")
    axis.set_title(f"{result.model}: accuracy by event month", fontsize="medium")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    return _save(fig, path)


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
