"""The loss charts as inline SVG: the loss figure by cell (bars with the repetitions' spread)
and, across runs, the share of repetitions that lost data with its Wilson interval. Past
MAX_CHART_ROWS rows a chart draws the rows with the most loss and says how many it left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import matplotlib
from markupsafe import Markup
from matplotlib.figure import Figure

from analysis.crossrun.summary import CrossRunSummary
from analysis.judge.outcomes import CellVerdict
from analysis.model.anomalies import LOSS_CLASSES, CountName, loss_of
from analysis.model.results import RunResult
from analysis.report.charts import (
    INK,
    MAX_CHART_ROWS,
    VERDICT_COLOURS,
    chart_rc,
    percent,
    svg_of,
)

__all__ = [
    "ProbabilityPoint",
    "draw_loss_bars",
    "draw_loss_probability",
    "loss_chart_svg",
    "loss_probability_points",
    "loss_probability_svg",
]

R = TypeVar("R")


def loss_chart_svg(cells: Sequence[CellVerdict], results_by_run: Mapping[str, RunResult]) -> Markup:
    """Horizontal bars: the loss figure as % of acked per cell, whiskers over repetitions (at
    most MAX_CHART_ROWS cells, those with the most loss)."""
    shown = _most_lossy(
        cells, lambda c: (c.stats.loss_rate or 0.0, _rep_loss_span(c, results_by_run)[1])
    )
    with matplotlib.rc_context(chart_rc("loss-chart")):
        fig = Figure(figsize=(11, 0.9 + 0.36 * max(len(shown), 1)))
        ax = fig.subplots()
        draw_loss_bars(ax, shown, results_by_run)
        _say_what_is_left_out(ax, len(shown), len(cells), "cells")
        ax.set_xlabel(
            "acknowledged messages missing (loss, % of acked; line: min–max over repetitions)"
        )
        return svg_of(fig, "loss by configuration", "loss-chart")


def draw_loss_bars(
    ax: Any, cells: Sequence[CellVerdict], results_by_run: Mapping[str, RunResult]
) -> None:
    """One bar per cell (its loss rate, %) in its verdict's colour, a min–max whisker over its
    repetitions, and the value as text; top to bottom in the given order."""
    spans = [_rep_loss_span(c, results_by_run) for c in cells]
    rates = [c.stats.loss_rate for c in cells]
    means = [100 * (rate or 0.0) for rate in rates]
    ax.barh(range(len(cells)), means, color=[VERDICT_COLOURS[c.verdict] for c in cells], height=0.6)
    for i, (low, high) in enumerate(spans):
        if high > low:  # drawn end to end, not as an errorbar: its ends are the span's exactly
            ax.plot([low, high], [i, i], color=INK, linewidth=1.2, marker="|", markersize=7,
                    gid=f"spread-{i}")  # fmt: skip
    top = max([*means, *(high for _, high in spans), 0.0])
    ax.set_xlim(0, top * 1.25 if top > 0 else 1.0)  # room for the value labels
    for i, (rate, mean) in enumerate(zip(rates, means, strict=True)):
        text = "no data" if rate is None else percent(mean)
        ax.text(max(mean, spans[i][1]), i, f"  {text}", va="center", fontsize=8)
    ax.set_yticks(range(len(cells)), _cell_labels(cells))
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)


def _cell_labels(cells: Sequence[CellVerdict]) -> list[str]:
    """Cell names, prefixed with the experiment when the report spans several."""
    several = len({c.experiment for c in cells}) > 1
    return [f"{c.experiment}/{c.cell}" if several else c.cell for c in cells]


def _rep_loss_span(
    cell: CellVerdict, results_by_run: Mapping[str, RunResult]
) -> tuple[float, float]:
    """(min, max) over repetitions of loss / acked, in %."""
    rates = []
    for rep in cell.repetitions:
        result = results_by_run.get(rep.run_dir)
        counts = (result.counts if result is not None else None) or {}
        acked = counts.get(CountName.ACKED) or 0
        if acked and all(isinstance(counts.get(name), int) for name in LOSS_CLASSES):
            rates.append(100 * loss_of(dict(counts)) / acked)
    return (min(rates), max(rates)) if rates else (0.0, 0.0)


@dataclass(frozen=True)
class ProbabilityPoint:
    """One row of the loss probability chart, in percent: the dot and its interval's ends."""

    label: str
    percent: float
    low: float
    high: float
    lossy: int
    counted: int


def loss_probability_points(summary: CrossRunSummary) -> list[ProbabilityPoint]:
    """What loss_probability_svg draws: each group with a probability, top to bottom."""
    return [
        ProbabilityPoint(
            label=f"{g.fault} · {g.kafka_version} · {g.label}",
            percent=100 * g.loss_probability,
            low=100 * g.interval.low,
            high=100 * g.interval.high,
            lossy=g.lossy,
            counted=g.counted,
        )
        for g in summary.groups
        if g.loss_probability is not None
    ]


def loss_probability_svg(summary: CrossRunSummary) -> Markup:
    """Per configuration × fault × version: the share of repetitions that lost acknowledged
    data (dot) with its 95 % Wilson interval (line), over every run in the report (at most
    MAX_CHART_ROWS groups, those most likely to lose)."""
    points = loss_probability_points(summary)
    shown = _most_lossy(points, lambda p: (p.percent, p.high))
    with matplotlib.rc_context(chart_rc("loss-probability")):
        fig = Figure(figsize=(11, 0.9 + 0.36 * max(len(shown), 1)))
        ax = fig.subplots()
        draw_loss_probability(ax, shown)
        _say_what_is_left_out(ax, len(shown), len(points), "groups")
        ax.set_xlabel("repetitions that lost acknowledged data (%, line: 95 % Wilson interval)")
        return svg_of(fig, "loss probability by configuration, fault and version", "loss-prob")


def draw_loss_probability(ax: Any, points: Sequence[ProbabilityPoint]) -> None:
    """Each point as a dot at its percent with a line from its low to its high end, and its
    lossy/counted beside it; top to bottom in the given order."""
    for i, point in enumerate(points):
        # A line from end to end and a dot, not an errorbar: matplotlib refuses an errorbar whose
        # interval misses its point by 1e-16, and these ends are the interval's exactly.
        ax.plot([point.low, point.high], [i, i], color=INK, linewidth=1.2, marker="|",
                markersize=7, gid=f"interval-{i}")  # fmt: skip
        ax.plot([point.percent], [i], marker="o", color=INK, linestyle="none", gid=f"point-{i}")
        ax.text(point.high, i, f"  {point.lossy}/{point.counted}", va="center", fontsize=8)
    ax.set_yticks(range(len(points)), [p.label for p in points], fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlim(0, 112)  # room for the n/N labels
    ax.grid(axis="y", visible=False)


def _most_lossy(rows: Sequence[R], key: Callable[[R], Any]) -> list[R]:
    """At most MAX_CHART_ROWS rows, those with the largest key (first ones on ties), in their
    given order."""
    if len(rows) <= MAX_CHART_ROWS:
        return list(rows)
    ranked = sorted(range(len(rows)), key=lambda i: key(rows[i]), reverse=True)  # stable
    return [rows[i] for i in sorted(ranked[:MAX_CHART_ROWS])]


def _say_what_is_left_out(ax: Any, shown: int, total: int, noun: str) -> None:
    """A title naming how many rows the chart left out, when it left out any."""
    if shown < total:
        ax.set_title(
            f"the {shown} {noun} with the most loss of {total:,}; the tables list every one",
            loc="left",
            fontsize=8,
        )
