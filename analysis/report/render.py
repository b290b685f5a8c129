"""Render judged cells as one self-contained HTML page, plus Markdown and JSON.

The HTML works offline: CSS is embedded and every chart is an inline SVG drawn by matplotlib
(Agg), so a report copied out of CI opens anywhere without fetching anything.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")  # no display, and no pyplot state: figures are built as Figure objects

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.anomalies import ANOMALIES as ANOMALY_REGISTRY
from analysis.anomalies import ANOMALY_NAMES, LOSS_CLASSES, loss_of
from analysis.judge.guarantees import SOURCE, Guarantee
from analysis.judge.verdicts import (
    CellStats,
    CellVerdict,
    CountStats,
    RepetitionVerdict,
    Verdict,
    exit_code,
    run_origin_us,
)

__all__ = ["MATRIX_COUNTS", "VERDICT_COLOURS", "ReportPaths", "render_report"]

TEMPLATES: Final = Path(__file__).parent / "templates"
# The matrix: sends, the one loss figure, then every anomaly class of the registry.
MATRIX_COUNTS: Final = ("sent", "acked", "loss", *ANOMALY_NAMES)
COUNT_LABELS: Final = {
    "sent": ("sent", "messages the producer tried to send"),
    "acked": ("acked", "sends that ended in a successful delivery report"),
    "loss": ("loss", "distinct acknowledged messages missing from the final read-back"),
    **{a.name: (a.label, a.meaning) for a in ANOMALY_REGISTRY},
}
ANOMALIES: Final = frozenset(ANOMALY_NAMES) | {"loss"}
SERIOUS: Final = frozenset({"loss", *(a.name for a in ANOMALY_REGISTRY if a.serious)})
EXAMPLE_CLASSES: Final = (*LOSS_CLASSES, "offset_divergent")
EXAMPLE_ROWS: Final = 20

VERDICT_COLOURS: Final = {
    Verdict.PASS: "#1a7f37",
    Verdict.VIOLATION: "#cf222e",
    Verdict.EXPECTED_LOSS: "#b35900",
    Verdict.NOT_PROVOKED: "#57606a",
    Verdict.UNKNOWN: "#8250df",
}
VERDICT_MEANING: Final = {
    Verdict.PASS: "the documented guarantee held",
    Verdict.VIOLATION: "a documented guarantee was broken",
    Verdict.EXPECTED_LOSS: "acknowledged data was lost where the documentation allows it",
    Verdict.NOT_PROVOKED: "loss is allowed but never happened: the faults were too weak",
    Verdict.UNKNOWN: "incomplete or failed run, or the checker could not judge it",
}
OUTCOME_CSS: Final = {0: "v-pass", 1: "v-violation", 2: "v-unknown"}  # by exit code
LEADER_LABEL_HEIGHTS: Final = (0.89, 0.8, 0.71)  # axes fraction, below the fault labels
SERIES_COLOURS: Final = {
    "ok": "#4c9f70",
    "failed": "#d1242f",
    "indeterminate": "#d4a72c",
    "p50": "#0969da",
    "p99": "#8250df",
    "fault": "#fb8f44",
    "missing": "#6e0b13",
    "duplicated": "#bf3989",
    "leader": "#24292f",
}
CHART_RC: Final = {
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


@dataclass(frozen=True)
class ReportPaths:
    """Where render_report wrote the three renderings."""

    html: Path
    markdown: Path
    json: Path


@dataclass(frozen=True)
class FaultWindow:
    """One injected fault, from its fault_start to its fault_end (None: never healed)."""

    fault: str
    target: str
    nodes: tuple[int, ...]
    start_us: int
    end_us: int | None

    @property
    def label(self) -> str:
        """'kill leader (node 2)': what was done to whom."""
        nodes = ", ".join(str(n) for n in self.nodes)
        plural = "s" if len(self.nodes) > 1 else ""
        where = f" (node{plural} {nodes})" if nodes else ""
        return f"{self.fault} {self.target}{where}".strip()


@dataclass(frozen=True)
class LeaderChange:
    """A partition's leader differing between two successive samples."""

    ts_us: int
    partition: int
    old: int | None
    new: int | None

    @property
    def label(self) -> str:
        """'p0 2→3', with 'none' for a partition without leader."""
        return f"p{self.partition} {_node(self.old)}→{_node(self.new)}"


def _node(node: int | None) -> str:
    """A broker id for display; 'none' when there is no leader (None or -1)."""
    return "none" if node is None or node < 0 else str(node)


# ---------------------------------------------------------------------------------------------
# Events


def fault_windows(events: Sequence[Mapping[str, Any]]) -> list[FaultWindow]:
    """Fault windows in start order, each start paired with the fault_end of its fault_id."""
    ends = {e.get("fault_id"): int(e["ts_us"]) for e in events if e.get("type") == "fault_end"}
    windows = []
    for e in sorted((e for e in events if e.get("type") == "fault_start"), key=_ts):
        windows.append(
            FaultWindow(
                fault=str(e.get("fault", "")),
                target=str(e.get("target", "")),
                nodes=tuple(int(n) for n in e.get("nodes") or []),
                start_us=int(e["ts_us"]),
                end_us=ends.get(e.get("fault_id")),
            )
        )
    return windows


def leader_changes(events: Sequence[Mapping[str, Any]]) -> list[LeaderChange]:
    """Leader changes per partition between successive `sample` events, in time order."""
    last: dict[int, int | None] = {}
    changes = []
    for sample in sorted((e for e in events if e.get("type") == "sample"), key=_ts):
        for state in sample.get("partitions") or []:
            partition = int(state["partition"])
            leader = state.get("leader")
            if partition in last and last[partition] != leader:
                changes.append(
                    LeaderChange(int(sample["ts_us"]), partition, last[partition], leader)
                )
            last[partition] = leader
    return changes


def _ts(event: Mapping[str, Any]) -> int:
    """Sort key: the event's timestamp."""
    return int(event.get("ts_us", 0))


# ---------------------------------------------------------------------------------------------
# Charts


def _svg(fig: Figure, label: str, id_prefix: str) -> Markup:
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


def timeline_svg(
    result: Mapping[str, Any], events: Sequence[Mapping[str, Any]], salt: str
) -> Markup | None:
    """Throughput and ack latency per second with faults and leader changes; None if no data."""
    timeline = [p for p in result.get("timeline") or [] if isinstance(p, Mapping)]
    if not timeline:
        return None
    origin_us = run_origin_us(result, events)
    with matplotlib.rc_context({**CHART_RC, "svg.hashsalt": salt}):
        fig = Figure(figsize=(11, 4.4))
        top, bottom = fig.subplots(
            2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2], "hspace": 0.1}
        )
        _plot_throughput(top, timeline)
        _plot_latency(bottom, timeline)
        _mark_faults(top, bottom, fault_windows(events), origin_us, _t_end(timeline))
        _mark_leader_changes(top, bottom, leader_changes(events), origin_us)
        _timeline_legend(fig)
        return _svg(fig, f"timeline of {salt}", salt)


def _t_end(timeline: Sequence[Mapping[str, Any]]) -> float:
    """The end of the timeline in seconds (its last bucket's end)."""
    return float(timeline[-1]["t_s"]) + 1.0


def _series(timeline: Sequence[Mapping[str, Any]], name: str) -> list[float]:
    """One numeric column of the timeline; missing values become NaN (a gap in a line)."""
    return [float("nan") if p.get(name) is None else float(p[name]) for p in timeline]


def _plot_throughput(ax: Any, timeline: Sequence[Mapping[str, Any]]) -> None:
    """Stacked bars of ok / failed / indeterminate sends per second."""
    t = _series(timeline, "t_s")
    bottom = [0.0] * len(t)
    for name in ("ok", "failed", "indeterminate"):
        values = [0.0 if v != v else v for v in _series(timeline, name)]  # NaN → 0
        ax.bar(
            t,
            values,
            width=1.0,
            bottom=bottom,
            align="edge",
            color=SERIES_COLOURS[name],
            linewidth=0,
            label=name,
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for name in ("missing", "duplicated"):
        values = [0.0 if v != v else v for v in _series(timeline, name)]
        if any(values):
            ax.bar(t, values, width=0.5, align="edge", color=SERIES_COLOURS[name], linewidth=0,
                   label=f"acked, later {name}", zorder=3)  # fmt: skip
    ax.set_ylabel("sends / s")
    ax.set_ylim(0, max(max(bottom, default=0) * 1.5, 1))  # headroom for fault and leader labels
    ax.grid(axis="x", visible=False)


def _plot_latency(ax: Any, timeline: Sequence[Mapping[str, Any]]) -> None:
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
        top.text(
            start,
            0.985,
            " " + window.label + suffix,
            transform=top.get_xaxis_transform(),
            va="top",
            ha="left",
            fontsize=8,
            color="#953800",
        )


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
        top.text(
            x,
            height,
            "leader " + ", ".join(c.label for c in group),
            transform=top.get_xaxis_transform(),
            va="top",
            ha="left",
            fontsize=7.5,
            color=SERIES_COLOURS["leader"],
            bbox={
                "boxstyle": "square,pad=0.15",
                "facecolor": "white",
                "alpha": 0.8,
                "linewidth": 0,
            },
        )


def _timeline_legend(fig: Figure) -> None:
    """One legend above both plots, so it never hides data."""
    handles = [
        Patch(color=SERIES_COLOURS["ok"], label="ok"),
        Patch(color=SERIES_COLOURS["failed"], label="failed"),
        Patch(color=SERIES_COLOURS["indeterminate"], label="indeterminate"),
        Patch(color=SERIES_COLOURS["missing"], label="acked, later missing"),
        Patch(color=SERIES_COLOURS["duplicated"], label="acked, duplicated"),
        Line2D([], [], color=SERIES_COLOURS["p50"], label="ack latency p50"),
        Line2D([], [], color=SERIES_COLOURS["p99"], label="ack latency p99"),
        Patch(color=SERIES_COLOURS["fault"], alpha=0.3, label="fault window"),
        Line2D(
            [], [], color=SERIES_COLOURS["leader"], linestyle=(0, (3, 2)), label="leader change"
        ),
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.9),
        ncol=5,
        frameon=False,
        fontsize=8.5,
    )


def loss_chart_svg(cells: Sequence[CellVerdict], results_by_run: Mapping[str, Any]) -> Markup:
    """Horizontal bars: the loss figure as % of acked per cell, whiskers over repetitions."""
    with matplotlib.rc_context({**CHART_RC, "svg.hashsalt": "loss-chart"}):
        fig = Figure(figsize=(11, 0.9 + 0.36 * len(cells)))
        ax = fig.subplots()
        _draw_loss_bars(ax, cells, [_rep_loss_span(c, results_by_run) for c in cells])
        ax.set_yticks(range(len(cells)), _cell_labels(cells))
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(
            "acknowledged messages missing (loss, % of acked; line: min–max over repetitions)"
        )
        return _svg(fig, "loss by configuration", "loss-chart")


def _draw_loss_bars(
    ax: Any, cells: Sequence[CellVerdict], spans: Sequence[tuple[float, float]]
) -> None:
    """One bar per cell in its verdict's colour, a min–max whisker, and the value as text."""
    rates = [c.stats.loss_rate for c in cells]
    means = [100 * (rate or 0.0) for rate in rates]
    ax.barh(range(len(cells)), means, color=[VERDICT_COLOURS[c.verdict] for c in cells], height=0.6)
    for i, (low, high) in enumerate(spans):
        if high > low:
            ax.errorbar((low + high) / 2, i, xerr=(high - low) / 2, color="#24292f", capsize=3)
    top = max([*means, *(high for _, high in spans), 0.0])
    ax.set_xlim(0, top * 1.25 if top > 0 else 1.0)  # room for the value labels
    for i, (rate, mean) in enumerate(zip(rates, means, strict=True)):
        text = "no data" if rate is None else _pct(mean)
        ax.text(max(mean, spans[i][1]), i, f"  {text}", va="center", fontsize=8)


def _cell_labels(cells: Sequence[CellVerdict]) -> list[str]:
    """Cell names, prefixed with the experiment when the report spans several."""
    several = len({c.experiment for c in cells}) > 1
    return [f"{c.experiment}/{c.cell}" if several else c.cell for c in cells]


def _rep_loss_span(cell: CellVerdict, results_by_run: Mapping[str, Any]) -> tuple[float, float]:
    """(min, max) over repetitions of loss / acked, in %."""
    rates = []
    for rep in cell.repetitions:
        counts = (results_by_run.get(rep.run_dir) or {}).get("counts") or {}
        acked = counts.get("acked") or 0
        if acked and all(isinstance(counts.get(name), int) for name in LOSS_CLASSES):
            rates.append(100 * loss_of(counts) / acked)
    return (min(rates), max(rates)) if rates else (0.0, 0.0)


def _pct(percent: float) -> str:
    """A percentage with three significant digits, '0 %' for zero."""
    return "0 %" if percent == 0 else f"{percent:.3g} %"


# ---------------------------------------------------------------------------------------------
# Views shared by the renderings


def _fmt_int(value: float) -> str:
    """Integers with thousands separators, other numbers with one decimal."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"


def stat_parts(stat: CountStats | None, counted: int) -> tuple[str, str]:
    """(value, 'min–max') of a count; the range is '' for one repetition or agreeing ones."""
    if stat is None:
        return "—", ""
    if counted <= 1 or stat.min == stat.max:
        return _fmt_int(stat.mean), ""
    return _fmt_int(stat.mean), f"{_fmt_int(stat.min)}–{_fmt_int(stat.max)}"


def format_stat(stat: CountStats | None, counted: int) -> str:
    """'12' for one repetition or agreeing ones, 'mean (min–max)' otherwise, '—' if none."""
    value, spread = stat_parts(stat, counted)
    return f"{value} ({spread})" if spread else value


def format_rate(rate: float | None) -> str:
    """A loss rate as a percentage, '—' when nothing was acknowledged."""
    return "—" if rate is None else _pct(100 * rate)


def config_parts(config: Mapping[str, Any]) -> list[str]:
    """The settings that decide the guarantee, as 'name=value' strings."""
    parts = [
        ("acks", config.get("acks")),
        ("min.insync", config.get("min_insync_replicas")),
        ("unclean", _flag(config.get("unclean_leader_election"))),
        ("idempotence", _flag(config.get("enable_idempotence"))),
        ("in-flight", config.get("max_in_flight")),
        ("RF", config.get("replication_factor")),
        ("partitions", config.get("partitions")),
        ("fault", config.get("fault_class")),
        ("Kafka", config.get("kafka_version")),
    ]
    return [f"{k}={v}" for k, v in parts if v is not None]


def config_summary(config: Mapping[str, Any]) -> str:
    """The settings that decide the guarantee, in one line."""
    return " · ".join(config_parts(config))


def _flag(value: Any) -> str | None:
    """'on'/'off' for booleans, the value itself otherwise."""
    return value if not isinstance(value, bool) else ("on" if value else "off")


def outcome_summary(cells: Sequence[CellVerdict]) -> str:
    """One sentence for the whole report, following exit_code."""
    code = exit_code(cells)
    violations = sum(c.verdict == Verdict.VIOLATION for c in cells)
    unknown = sum(c.verdict == Verdict.UNKNOWN for c in cells)
    if code == 1:
        return f"{violations} of {len(cells)} cells violate the documented guarantees"
    if code == 2:
        return (
            f"Inconclusive: {unknown} of {len(cells)} cells could not be judged"
            if cells
            else "Inconclusive: no results to judge"
        )
    return f"All {len(cells)} cells are consistent with the documented guarantees"


def verdict_counts(cells: Sequence[CellVerdict]) -> dict[str, int]:
    """How many cells got each verdict, every verdict listed."""
    return {v.value: sum(c.verdict == v for c in cells) for v in Verdict}


def _slug(cell: CellVerdict) -> str:
    """An HTML id for a cell's section."""
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{cell.experiment}-{cell.cell}").strip("-")


def _css_class(verdict: Verdict) -> str:
    """The CSS class of a verdict badge."""
    return "v-" + verdict.value.lower()


# ---------------------------------------------------------------------------------------------
# HTML


def _matrix_row(cell: CellVerdict) -> dict[str, Any]:
    """The matrix row of one cell for the HTML template."""
    values = []
    for name in MATRIX_COUNTS:
        stat = cell.stats.counts.get(name)
        level = ""
        if name in ANOMALIES and stat is not None and stat.max > 0:
            level = "serious" if name in SERIOUS else "notable"
        value, spread = stat_parts(stat, cell.stats.counted)
        values.append({"text": value, "range": spread, "level": level})
    return {
        "slug": _slug(cell),
        "cell": cell.cell,
        "experiment": cell.experiment,
        "config": config_parts(cell.config),
        "values": values,
        "loss_rate": format_rate(cell.stats.loss_rate),
        "repetitions": len(cell.repetitions),
        "verdict": cell.verdict.value,
        "css": _css_class(cell.verdict),
    }


def _examples(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Example lost / divergent / unseen messages with where they were acked and read back."""
    examples = result.get("examples") or {}
    rows = []
    for name in EXAMPLE_CLASSES:
        for ex in (examples.get(name) or [])[:EXAMPLE_ROWS]:
            if isinstance(ex, Mapping):
                rows.append(
                    {
                        "cls": name.replace("_", "-"),
                        "msg_id": ex.get("msg_id"),
                        "partition": _dash(ex.get("partition")),
                        "offset": _dash(ex.get("offset")),
                        "readback": _dash(ex.get("readback_msg_id_at_offset")),
                    }
                )
    return rows


def _dash(value: Any) -> Any:
    """The value, or an em dash for None."""
    return "—" if value is None else value


def _repetition_view(
    cell: CellVerdict,
    rep: RepetitionVerdict,
    results_by_run: Mapping[str, Mapping[str, Any]],
    events_by_run: Mapping[str, Sequence[Mapping[str, Any]]],
) -> dict[str, Any]:
    """A repetition's verdict, reasons, timeline chart and example table."""
    result = results_by_run.get(rep.run_dir) or {}
    events = events_by_run.get(rep.run_dir) or []
    salt = f"{cell.experiment}/{cell.cell}/rep-{rep.repetition}"
    return {
        "repetition": rep.repetition,
        "run_dir": rep.run_dir,
        "verdict": rep.verdict.value,
        "css": _css_class(rep.verdict),
        "reasons": rep.reasons,
        "timeline": _timeline_or_none(result, events, salt),
        "faults": [w.label for w in fault_windows(events)],
        "sensitivity": _sensitivity_text(result.get("sensitivity")),
        "attribution": _attribution_view(result.get("attribution")),
        "examples": _examples(result),
    }


# How each place of analysis.attribution reads in a sentence.
ATTRIBUTION_PHRASES: Final = {
    "on_no_disk": "on no broker's disk (Kafka lost them)",
    "on_disk_not_served": "on a broker's disk, yet not read back",
    "segments_unavailable": "cannot say (segments not kept or not readable)",
    "not_examined": "not examined (beyond the bound)",
}


def _attribution_view(attribution: Any) -> dict[str, str] | None:
    """{"text": where the missing messages are, "note": its limits}, or None without any."""
    if not isinstance(attribution, Mapping):
        return None
    counts = attribution.get("counts") or {}
    total = sum(int(n) for n in counts.values())
    if total == 0:
        return None
    parts = [
        f"{counts[p]:,} {phrase}" for p, phrase in ATTRIBUTION_PHRASES.items() if counts.get(p)
    ]
    beyond = attribution.get("beyond_served") or 0
    if beyond:
        parts.append(f"{beyond:,} of those on disk only at or past the high watermark")
    text = f"where the {total:,} missing acknowledged messages are: {'; '.join(parts)}"
    return {"text": text, "note": str(attribution.get("note") or "")}


def _sensitivity_text(check: Any) -> str | None:
    """'passed: 12 of 12 hidden records reported missing', or None without a check."""
    if not isinstance(check, Mapping):
        return None
    word = "passed" if check.get("passed") else "FAILED"
    return (
        f"sensitivity check {word}: {check.get('found')} of {check.get('removed')} acknowledged "
        "records hidden from a copy of the read-back were reported missing"
    )


def _timeline_or_none(
    result: Mapping[str, Any], events: Sequence[Mapping[str, Any]], salt: str
) -> Markup | None:
    """The timeline chart, or None when the data cannot be drawn: a report must not crash."""
    try:
        return timeline_svg(result, events, salt)
    except (KeyError, TypeError, ValueError):
        return None


def _guarantee_view(guarantee: Guarantee | None) -> dict[str, Any] | None:
    """The guarantee as chips and citations for the template."""
    if guarantee is None:
        return None
    return {
        "chips": [
            ("loss", guarantee.loss, guarantee.loss != "allowed"),
            ("duplicates", guarantee.duplicates, guarantee.duplicates == "forbidden"),
            ("order", guarantee.order, guarantee.order == "guaranteed"),
        ],
        "citations": [guarantee.citation, guarantee.duplicates_citation, guarantee.order_citation],
    }


def _cell_view(
    cell: CellVerdict,
    results_by_run: Mapping[str, Mapping[str, Any]],
    events_by_run: Mapping[str, Sequence[Mapping[str, Any]]],
) -> dict[str, Any]:
    """Everything the per-cell section of the page shows."""
    return {
        "slug": _slug(cell),
        "cell": cell.cell,
        "experiment": cell.experiment,
        "config": config_summary(cell.config),
        "verdict": cell.verdict.value,
        "css": _css_class(cell.verdict),
        "meaning": VERDICT_MEANING[cell.verdict],
        "reasons": cell.reasons,
        "guarantee": _guarantee_view(cell.guarantee),
        "repetitions": [
            _repetition_view(cell, rep, results_by_run, events_by_run) for rep in cell.repetitions
        ],
    }


def render_html(
    cells: Sequence[CellVerdict],
    results_by_run: Mapping[str, Mapping[str, Any]],
    events_by_run: Mapping[str, Sequence[Mapping[str, Any]]],
    title: str,
) -> str:
    """The self-contained HTML page."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    return env.get_template("report.html.j2").render(
        title=title,
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        outcome=outcome_summary(cells),
        outcome_css=OUTCOME_CSS[exit_code(cells)],
        counts=verdict_counts(cells),
        legend=[(v.value, _css_class(v), VERDICT_MEANING[v]) for v in Verdict],
        colours={_css_class(v): colour for v, colour in VERDICT_COLOURS.items()},
        source=SOURCE,
        headers=[(name, *COUNT_LABELS[name]) for name in MATRIX_COUNTS],
        rows=[_matrix_row(c) for c in cells],
        loss_chart=loss_chart_svg(cells, results_by_run) if cells else None,
        cells=[_cell_view(c, results_by_run, events_by_run) for c in cells],
        experiments=sorted({c.experiment for c in cells}),
        repetitions=sum(len(c.repetitions) for c in cells),
    )


# ---------------------------------------------------------------------------------------------
# Markdown and JSON


def _md(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(cells: Sequence[CellVerdict], title: str) -> str:
    """The matrix as a Markdown table, then each cell's guarantee and reasons."""
    counts = " · ".join(f"{v} {n}" for v, n in verdict_counts(cells).items())
    head = [
        "cell",
        "configuration",
        *(COUNT_LABELS[n][0] for n in MATRIX_COUNTS),
        "loss rate",
        "verdict",
    ]
    lines = [
        f"# {title}",
        "",
        f"**{outcome_summary(cells)}** (exit code {exit_code(cells)}). Verdicts: {counts}.",
        "",
        "Counts are per repetition: mean (min–max) when repetitions disagree.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head) - 1)) + "|---|",
    ]
    for cell in cells:
        values = [format_stat(cell.stats.counts.get(n), cell.stats.counted) for n in MATRIX_COUNTS]
        row = [
            f"`{cell.cell}`",
            config_summary(cell.config),
            *values,
            format_rate(cell.stats.loss_rate),
            f"**{cell.verdict.value}**",
        ]
        lines.append("| " + " | ".join(_md(v) for v in row) + " |")
    lines += ["", "## Reasons", ""]
    for cell in cells:
        lines += _markdown_cell(cell)
    return "\n".join(lines) + "\n"


def _markdown_cell(cell: CellVerdict) -> list[str]:
    """One cell's heading, guarantee and reasons in Markdown."""
    lines = [f"### {cell.cell}: {cell.verdict.value}", "", f"_{config_summary(cell.config)}_", ""]
    if cell.guarantee is not None:
        g = cell.guarantee
        lines += [
            f"Guarantee: loss {g.loss}, duplicates {g.duplicates}, order {g.order}. "
            f"{g.citation} ({SOURCE})",
            "",
        ]
    lines += [f"- {reason}" for reason in cell.reasons]
    return [*lines, ""]


def _stats_json(stats: CellStats) -> dict[str, Any]:
    """Cell stats as plain JSON values."""
    return {
        "repetitions": stats.repetitions,
        "counted": stats.counted,
        "counts": {k: dataclasses.asdict(v) for k, v in stats.counts.items()},
        "loss_rate": stats.loss_rate,
        "divergence_rate": stats.divergence_rate,
    }


def report_json(cells: Sequence[CellVerdict], title: str) -> dict[str, Any]:
    """The machine-readable report: outcome, verdict counts and every cell."""
    return {
        "title": title,
        "exit_code": exit_code(cells),
        "outcome": outcome_summary(cells),
        "verdict_counts": verdict_counts(cells),
        "source": SOURCE,
        "cells": [_cell_json(c) for c in cells],
    }


def _cell_json(cell: CellVerdict) -> dict[str, Any]:
    """One cell with its verdict, reasons, stats, guarantee and repetitions."""
    return {
        "experiment": cell.experiment,
        "cell": cell.cell,
        "config": dict(cell.config),
        "verdict": cell.verdict.value,
        "reasons": list(cell.reasons),
        "guarantee": dataclasses.asdict(cell.guarantee) if cell.guarantee else None,
        "stats": _stats_json(cell.stats),
        "repetitions": [
            {
                "repetition": r.repetition,
                "run_dir": r.run_dir,
                "verdict": r.verdict.value,
                "reasons": list(r.reasons),
                "loss": r.loss,
                "acked": r.acked,
                "loss_rate": r.loss / r.acked if r.loss is not None and r.acked else None,
            }
            for r in cell.repetitions
        ],
    }


# ---------------------------------------------------------------------------------------------
# Entry point


def render_report(
    cells: list[CellVerdict],
    results: list[dict[str, Any]],
    events_by_run: dict[str, list[dict[str, Any]]],
    out_dir: Path,
    title: str,
) -> ReportPaths:
    """Write report.html, report.md and report.json into out_dir (created) and return paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_by_run = {str(r.get("run_dir", "")): r for r in results}
    paths = ReportPaths(out_dir / "report.html", out_dir / "report.md", out_dir / "report.json")
    paths.html.write_text(render_html(cells, results_by_run, events_by_run, title), "utf-8")
    paths.markdown.write_text(render_markdown(cells, title), "utf-8")
    paths.json.write_text(json.dumps(report_json(cells, title), indent=2) + "\n", "utf-8")
    return paths
