"""The report's figures as inline SVG: their shared style and rendering, and each repetition's
timeline (the loss charts are in loss_charts.py).

Drawn by matplotlib (Agg, no pyplot state) with real text in the SVG, so a report copied out
of CI opens anywhere without fetching anything.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")  # no display, and no pyplot state: figures are built as Figure objects

from markupsafe import Markup
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.judge.findings import run_origin_us
from analysis.judge.outcomes import Events, Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.availability import Availability
from analysis.model.results import MISSING, TIMELINE_ANOMALIES, RunResult, TimelineSecond
from analysis.report.marks import FaultWindow, LeaderChange, fault_windows, leader_changes
from harness.rundir.records import Status

__all__ = [
    "CHART_RC",
    "INK",
    "MAX_CHART_ROWS",
    "VERDICT_COLOURS",
    "chart_rc",
    "percent",
    "svg_of",
    "timeline_svg",
]


VERDICT_COLOURS: Final = {
    Verdict.PASS: "#1a7f37",
    Verdict.VIOLATION: "#cf222e",
    Verdict.EXPECTED_LOSS: "#b35900",
    Verdict.KNOWN_BUG: "#7d4e00",
    Verdict.NOT_PROVOKED: "#57606a",
    Verdict.UNKNOWN: "#8250df",
}
INK: Final = "#24292f"  # lines and dots that are data, not a verdict
LEADER_LABEL_HEIGHTS: Final = (0.89, 0.8, 0.71)  # axes fraction, below the fault labels
# Each series of the timeline by its TimelineSecond field: sends by Status, the anomaly
# series, the latency lines, and the marks.
SERIES_COLOURS: Final[Mapping[str, str]] = {
    Status.OK: "#4c9f70",
    Status.FAILED: "#d1242f",
    Status.INDETERMINATE: "#d4a72c",
    "p50": "#0969da",
    "p99": "#8250df",
    "fault": "#fb8f44",
    MISSING: "#6e0b13",
    AnomalyName.DUPLICATED: "#bf3989",
    "leader": "#24292f",
    "stall": "#57606a",
    "recovery": "#1a7f37",
    "processed": "#0550ae",
    "commits_failed": "#24292f",
    "group_lag": "#1b7c83",
    "stuck": "#cf222e",
    "reset": "#cf222e",
}
STALL_BAR_HEIGHT: Final = 0.04  # axes fraction: the longest one-partition stall, at the bottom
STUCK_BAND: Final = (0.9, 0.94)  # axes fraction: seconds the group was stuck, under the labels
RECOVERY_HEIGHT: Final = 0.6  # axes fraction: heal → every partition acking again
LABEL_BOX: Final = {
    "boxstyle": "square,pad=0.15",
    "facecolor": "white",
    "alpha": 0.8,
    "linewidth": 0,
}
# A chart of thousands of rows is unreadable and takes seconds per thousand to draw: past this
# many, the loss charts draw the rows with the most loss and say how many they left out.
MAX_CHART_ROWS: Final = 100
CHART_RC: Final[dict[str, Any]] = {
    "svg.fonttype": "none",  # real text in the SVG: smaller, selectable, uses the page's fonts
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#8c959f",
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#eaeef2",
    "grid.linewidth": 0.8,
    "xtick.color": "#57606a",
    "ytick.color": "#57606a",
    "axes.labelcolor": "#24292f",
}


def chart_rc(salt: str) -> Any:
    """CHART_RC with the SVG ids' salt (Any: matplotlib types its keys as a Literal union)."""
    return {**CHART_RC, "svg.hashsalt": salt}


def svg_of(fig: Figure, label: str, id_prefix: str) -> Markup:
    """The figure as an inline <svg> element, sized by CSS, without metadata or XML prolog."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # The RDF metadata names external vocabularies by URL; the page must reference nothing.
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'\s(width|height)="[\d.]+pt"', "", text, count=2)
    # Every figure numbers its elements alike ("axes_1"); ids must be unique in one page.
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "-", id_prefix)
    text = re.sub(r'\bid="', f'id="{prefix}-', text)
    text = re.sub(r'(href="#|url\(#)', rf"\g<1>{prefix}-", text)
    safe_label = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    text = text.replace("<svg", f'<svg class="chart" role="img" aria-label="{safe_label}"', 1)
    return Markup(text)


def timeline_svg(result: RunResult, events: Events, salt: str) -> Markup | None:
    """Throughput and ack latency per second with faults and leader changes; None if no data."""
    timeline = result.timeline
    if not timeline:
        return None
    origin_us = run_origin_us(result, events)
    with matplotlib.rc_context(chart_rc(salt)):
        fig = Figure(figsize=(11, 4.4))
        top, bottom = fig.subplots(
            2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2], "hspace": 0.1}
        )
        _plot_throughput(top, timeline)
        _plot_latency(bottom, timeline)
        _plot_group_lag(bottom, timeline)
        _mark_liveness(top, timeline)
        _mark_faults(top, bottom, fault_windows(events), origin_us, _t_end(timeline))
        _mark_leader_changes(top, bottom, leader_changes(events), origin_us)
        if result.availability is not None:
            _mark_availability(top, bottom, result.availability, origin_us)
        consumed = any(second.processed for second in timeline)
        live = any(second.stuck or second.reset for second in timeline)
        _timeline_legend(
            fig, priced=result.availability is not None, consumed=consumed, liveness=live
        )
        return svg_of(fig, f"timeline of {salt}", salt)


def _t_end(timeline: Sequence[TimelineSecond]) -> float:
    """The end of the timeline in seconds (its last bucket's end)."""
    return float(timeline[-1].t_s) + 1.0


def _series(timeline: Sequence[TimelineSecond], name: str) -> list[float]:
    """One numeric column of the timeline; missing values become NaN (a gap in a line)."""
    values = (getattr(second, name) for second in timeline)
    return [float("nan") if value is None else float(value) for value in values]


def _plot_throughput(ax: Any, timeline: Sequence[TimelineSecond]) -> None:
    """Stacked bars of ok / failed / indeterminate sends per second."""
    t = _series(timeline, "t_s")
    bottom = [0.0] * len(t)
    for status in Status:
        values = _series(timeline, status)
        ax.bar(
            t,
            values,
            width=1.0,
            bottom=bottom,
            align="edge",
            color=SERIES_COLOURS[status],
            linewidth=0,
            label=str(status),
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for name in TIMELINE_ANOMALIES:
        values = _series(timeline, name)
        if any(values):
            ax.bar(t, values, width=0.5, align="edge", color=SERIES_COLOURS[name], linewidth=0,
                   label=f"acked, later {name}", zorder=3)  # fmt: skip
    processed = _series(timeline, "processed")
    if any(processed):  # a consumer group read while the faults ran
        ax.step([v + 1 for v in t], processed, where="pre", color=SERIES_COLOURS["processed"],
                linewidth=1.2, zorder=4, label="processed by the group")  # fmt: skip
        failed = _series(timeline, "commits_failed")
        refused = [(v + 0.5, p) for v, p, f in zip(t, processed, failed, strict=True) if f > 0]
        if refused:
            ax.plot(*zip(*refused, strict=True), linestyle="none", marker="x", markersize=5,
                    color=SERIES_COLOURS["commits_failed"], zorder=5)  # fmt: skip
        bottom = [max(b, p) for b, p in zip(bottom, processed, strict=True)]
    ax.set_ylabel("sends / s")
    ax.set_ylim(0, max(max(bottom, default=0) * 1.5, 1))  # headroom for fault and leader labels
    ax.grid(axis="x", visible=False)


def _plot_latency(ax: Any, timeline: Sequence[TimelineSecond]) -> None:
    """Ack latency p50 and p99 per second; log scale when they span orders of magnitude."""
    t = [v + 0.5 for v in _series(timeline, "t_s")]  # centre of the second's bar
    p50 = _series(timeline, "ack_latency_p50_ms")
    p99 = _series(timeline, "ack_latency_p99_ms")
    ax.plot(t, p50, color=SERIES_COLOURS["p50"], linewidth=1.3, label="ack latency p50")
    ax.plot(t, p99, color=SERIES_COLOURS["p99"], linewidth=1.3, label="ack latency p99")
    positive = [v for v in (*p50, *p99) if v == v and v > 0]
    if positive and max(positive) / min(positive) > 50:
        ax.set_yscale("log")
    ax.set_ylabel("ack latency (ms)")
    ax.set_xlabel("seconds since the workload started")
    ax.grid(axis="x", visible=False)


def _plot_group_lag(ax: Any, timeline: Sequence[TimelineSecond]) -> None:
    """The consumer group's lag (records acked, not yet committed) on a right-hand axis of the
    latency plot; nothing for a run without a group."""
    lag = _series(timeline, "group_lag")
    if all(v != v for v in lag):  # all NaN: no group, or no acknowledgement
        return
    right = ax.twinx()
    right.step([second.t_s + 1 for second in timeline], lag, where="pre", linewidth=1.2,
               color=SERIES_COLOURS["group_lag"], label="group lag")  # fmt: skip
    right.set_ylabel("group lag (records)", color=SERIES_COLOURS["group_lag"])
    right.set_ylim(0, max(max((v for v in lag if v == v), default=0) * 1.15, 1))
    right.grid(visible=False)


def _mark_liveness(ax: Any, timeline: Sequence[TimelineSecond]) -> None:
    """The group's liveness anomalies: a band over each second some partition was stuck, and a
    diamond at each second a reset began, labelled with the offsets read again."""
    for second in timeline:
        if second.stuck:
            ax.axvspan(second.t_s, second.t_s + 1, ymin=STUCK_BAND[0], ymax=STUCK_BAND[1],
                       color=SERIES_COLOURS["stuck"], linewidth=0, zorder=4)  # fmt: skip
        if second.reset:
            ax.plot([second.t_s + 0.5], [STUCK_BAND[0]], marker="D", markersize=5, zorder=5,
                    color=SERIES_COLOURS["reset"], transform=ax.get_xaxis_transform())  # fmt: skip
            text = f" reset: {second.reset} read again"
            _label(ax, second.t_s + 0.5, STUCK_BAND[0] - 0.02, text, "reset", zorder=5)


def _label(ax: Any, x: float, y: float, text: str, series: str = "", **style: Any) -> None:
    """A left-aligned label at time `x` and axes fraction `y`, in a series' colour, 7.5 pt,
    hanging from `y` on a white box, unless `style` says otherwise."""
    colour = SERIES_COLOURS.get(series)
    style = {"va": "top", "fontsize": 7.5, "color": colour, "bbox": LABEL_BOX, **style}
    ax.text(x, y, text, transform=ax.get_xaxis_transform(), ha="left", **style)


def _mark_faults(
    top: Any, bottom: Any, windows: Sequence[FaultWindow], origin_us: float, t_end: float
) -> None:
    """Shade each fault window on both axes and label it at the top of the throughput plot."""
    for window in windows:
        start = (window.start_us - origin_us) / 1e6
        end = t_end if window.end_us is None else (window.end_us - origin_us) / 1e6
        for ax in (top, bottom):
            ax.axvspan(start, end, color=SERIES_COLOURS["fault"], alpha=0.16, linewidth=0, zorder=0)
        suffix = "" if window.end_us is not None else " (not healed)"
        text = " " + window.label + suffix
        _label(top, start, 0.985, text, color="#953800", fontsize=8, bbox=None)


def _mark_leader_changes(
    top: Any, bottom: Any, changes: Sequence[LeaderChange], origin_us: float
) -> None:
    """A dashed line per sample time with leader changes, labelled with what changed."""
    by_time: dict[int, list[LeaderChange]] = {}
    for change in changes:
        by_time.setdefault(change.ts_us, []).append(change)
    for index, (ts_us, group) in enumerate(by_time.items()):
        x = (ts_us - origin_us) / 1e6
        for ax in (top, bottom):
            ax.axvline(
                x, color=SERIES_COLOURS["leader"], linestyle=(0, (3, 2)), linewidth=0.9, alpha=0.75
            )
        # Staggered heights keep labels of changes a second apart from covering each other.
        height = LEADER_LABEL_HEIGHTS[index % len(LEADER_LABEL_HEIGHTS)]
        _label(top, x, height, "leader " + ", ".join(c.label for c in group), "leader")


def _mark_availability(top: Any, bottom: Any, availability: Availability, origin_us: float) -> None:
    """The price of safety on the timeline: the longest stall with no partition acking
    (hatched), the longest one-partition stall (a bar along the bottom), and for each heal
    during the workload a line to when every partition had acknowledged again (a triangle)."""
    gap = availability.longest_gap
    if gap is not None and gap.end_us > gap.start_us:
        start, end = (gap.start_us - origin_us) / 1e6, (gap.end_us - origin_us) / 1e6
        for ax in (top, bottom):
            ax.axvspan(start, end, facecolor="none", hatch="///", edgecolor=SERIES_COLOURS["stall"],
                       alpha=0.45, linewidth=0, zorder=1)  # fmt: skip
    _mark_partition_stall(top, availability, origin_us)
    _mark_recoveries(top, availability, origin_us)


def _mark_partition_stall(ax: Any, availability: Availability, origin_us: float) -> None:
    """The longest stall of one partition as a labelled bar along the bottom of `ax`."""
    worst = availability.longest_partition_gap
    if worst is None or worst.longest_gap.seconds <= 0:
        return
    gap = worst.longest_gap
    start, end = (gap.start_us - origin_us) / 1e6, (gap.end_us - origin_us) / 1e6
    ax.axvspan(start, end, ymin=0, ymax=STALL_BAR_HEIGHT, color=SERIES_COLOURS["stall"],
               linewidth=0, zorder=4)  # fmt: skip
    text = f" p{worst.partition} stall {gap.seconds:.1f} s"
    _label(ax, start, STALL_BAR_HEIGHT + 0.01, text, "stall", va="bottom", zorder=5)


def _mark_recoveries(ax: Any, availability: Availability, origin_us: float) -> None:
    """For each heal during the workload, a line from it to when every partition acked again."""
    for heal in availability.heals:
        every = heal.every_partition_s
        if not heal.during_workload or every is None:
            continue
        start = (heal.heal_us - origin_us) / 1e6
        ax.plot([start, start + every], [RECOVERY_HEIGHT] * 2, color=SERIES_COLOURS["recovery"],
                linewidth=1.6, zorder=5, transform=ax.get_xaxis_transform())  # fmt: skip
        ax.plot([start + every], [RECOVERY_HEIGHT], marker="v", markersize=6, zorder=5,
                color=SERIES_COLOURS["recovery"], transform=ax.get_xaxis_transform())  # fmt: skip


def _timeline_legend(
    fig: Figure, priced: bool = False, consumed: bool = False, liveness: bool = False
) -> None:
    """One legend above both plots, so it never hides data; `priced` adds the price marks,
    `consumed` the consumer group's, `liveness` its stuck seconds and resets."""
    handles = [
        *(_patch(status, str(status)) for status in Status),
        _patch(MISSING, "acked, later missing"),
        _patch(AnomalyName.DUPLICATED, "acked, duplicated"),
        _line("p50", "ack latency p50"),
        _line("p99", "ack latency p99"),
        _patch("fault", "fault window", alpha=0.3),
        _line("leader", "leader change", linestyle=(0, (3, 2))),
    ]
    if consumed:
        handles += [
            _line("processed", "processed by the group / s"),
            _line("group_lag", "group lag (right axis)"),
            _line("commits_failed", "a group commit refused", marker="x", linestyle="none"),
        ]
    if liveness:
        handles += [
            _patch("stuck", "group stuck (a partition)"),
            _line("reset", "group reset below its commit", marker="D", linestyle="none"),
        ]
    if priced:
        handles += [
            Patch(
                facecolor="none",
                hatch="///",
                edgecolor=SERIES_COLOURS["stall"],
                label="longest stall, no partition acking",
            ),
            _patch("stall", "longest stall of one partition"),
            _line("recovery", "heal → every partition acking again", marker="v"),
        ]
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.9),
        ncol=5,
        frameon=False,
        fontsize=8.5,
    )


def _patch(series: str, label: str, **style: Any) -> Patch:
    """A legend patch in the colour of a timeline series."""
    return Patch(color=SERIES_COLOURS[series], label=label, **style)


def _line(series: str, label: str, **style: Any) -> Line2D:
    """A legend line (or marker, with `marker` and no linestyle) in a series' colour."""
    return Line2D([], [], color=SERIES_COLOURS[series], label=label, **style)


def percent(value: float) -> str:
    """A percentage with three significant digits, '0 %' for zero."""
    return "0 %" if value == 0 else f"{value:.3g} %"
