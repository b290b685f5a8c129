"""The timeline chart as it leaves the report: the crafted run drawn, the inline svg and its
ids, percentages, the group's liveness marks, the price marks' edges (a short stall, heals that
draw nothing), and the same chart whatever the user's matplotlibrc says or how often drawn."""

from __future__ import annotations

import re
from dataclasses import replace
from xml.etree import ElementTree

import matplotlib
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from matplotlib.figure import Figure

from analysis.model.availability import Gap, HealRecovery, PartitionAvailability
from analysis.report import charts
from analysis.report.marks import fault_windows
from tests.unit.report_runs import (
    CP,
    events_with_fault_and_leader_change,
    priced,
    result,
    us,
)
from tests.unit.results_json import typed
from tests.unit.test_report_charts import LEGEND, _availability, _drawn, _hex, _plain


def test_the_crafted_run_draws_its_fault_leader_change_and_price() -> None:
    run = priced(typed(result("c", CP, 0)), 2.0, 40, 1.5)
    top, _ = _drawn(run, events_with_fault_and_leader_change()).axes
    assert [t.get_text() for t in top.texts] == [
        " kill leader (node 1)",
        "leader p0 1→2",
        " p0 stall 2.0 s",
    ]


def test_svg_of_gives_an_inline_svg_with_its_own_ids_and_nothing_external() -> None:
    with matplotlib.rc_context(charts.chart_rc("s")):
        fig = Figure(figsize=(4, 2))
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1], marker="o")
        ax.axvspan(0.2, 0.4, hatch="///")
        text = str(charts.svg_of(fig, 'a "b" <c> & d', "P q/1"))
    assert text.startswith(
        '<svg class="chart" role="img" aria-label="a &quot;b&quot; &lt;c> &amp; d" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 '
    )
    assert text.rstrip().endswith("</svg>")
    for gone in ("<?xml", "<!DOCTYPE", "<metadata", "purl.org", "creativecommons", 'pt"'):
        assert gone not in text
    width, height = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', text).groups())
    assert width < 4 * 72 and height < 2 * 72  # cut to what is drawn (bbox_inches="tight")
    ids = re.findall(r'\bid="([^"]*)"', text)
    assert ids and all(i.startswith("P-q-1-") for i in ids)  # letters kept, in their case
    assert "P-q-1-figure_1" in ids
    refs = re.findall(r'(?:href="#|url\(#)([^")]*)', text)
    assert refs and set(refs) <= set(ids)
    assert text.count("<svg") == 1
    root = ElementTree.fromstring(text)  # well-formed, and no stray text where metadata was
    assert not (root.text or "").strip()
    assert all(not (child.tail or "").strip() for child in root)


def test_chart_rc_salts_the_svg_ids_and_keeps_the_style() -> None:
    rc = charts.chart_rc("salt")
    assert rc == {**charts.CHART_RC, "svg.hashsalt": "salt"}
    assert charts.CHART_RC["svg.fonttype"] == "none"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 %"),
        (0.0, "0 %"),
        (-0.0, "0 %"),  # a zero rate scaled by a negative or negated: no "-0 %"
        (1, "1 %"),
        (12.3456, "12.3 %"),
        (0.001234, "0.00123 %"),
        (100, "100 %"),
    ],
)
def test_a_percentage_has_three_significant_digits(value: float, text: str) -> None:
    assert charts.percent(value) == text


def test_the_groups_stuck_seconds_are_a_band_and_each_reset_a_labelled_diamond() -> None:
    rows = [{}, {"stuck": 1}, {"stuck": 2, "reset": 40}, {}, {"reset": 3}]
    fig = _drawn(_plain(rows), [])
    top, _ = fig.axes
    bands = [p for p in top.patches if p.get_zorder() == 4]
    assert [(p.get_x(), p.get_width(), p.get_y(), p.get_height()) for p in bands] == [
        (1, 1, 0.9, pytest.approx(0.04)),
        (2, 1, 0.9, pytest.approx(0.04)),
    ]
    assert {(_hex(p.get_facecolor()), p.get_linewidth()) for p in bands} == {("#cf222e", 0)}
    diamonds = top.lines
    assert [(list(d.get_xdata()), list(d.get_ydata())) for d in diamonds] == [
        ([2.5], [0.9]),
        ([4.5], [0.9]),
    ]
    for d in diamonds:
        assert (d.get_marker(), d.get_markersize(), d.get_zorder()) == ("D", 5, 5)
        assert _hex(d.get_color()) == "#cf222e"
        assert d.get_transform() == top.get_xaxis_transform()
    labels = [(t.get_text(), t.get_position()) for t in top.texts]
    assert labels == [
        (" reset: 40 read again", (2.5, pytest.approx(0.88))),
        (" reset: 3 read again", (4.5, pytest.approx(0.88))),
    ]
    for text in top.texts:
        assert (text.get_va(), text.get_ha(), text.get_fontsize(), text.get_zorder()) == (
            "top",
            "left",
            7.5,
            5,
        )
        assert _hex(text.get_color()) == "#cf222e"
        assert text.get_transform() == top.get_xaxis_transform()
        box = text.get_bbox_patch()
        assert (_hex(box.get_facecolor()), box.get_alpha(), box.get_linewidth()) == (
            "#ffffff",
            0.8,
            0,
        )
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert names == [*LEGEND, "group stuck (a partition)", "group reset below its commit"]
    handles = dict(zip(names, legend.legend_handles, strict=True))
    assert _hex(handles["group stuck (a partition)"].get_facecolor()) == "#cf222e"
    reset = handles["group reset below its commit"]
    assert (reset.get_marker(), reset.get_linestyle(), _hex(reset.get_color())) == (
        "D",
        "None",
        "#cf222e",
    )


def test_a_run_without_liveness_anomalies_has_no_band_or_diamond() -> None:
    fig = _drawn(_plain([{}, {"stuck": 0, "reset": 0}]), [])
    top, _ = fig.axes
    assert len(top.lines) == len(top.texts) == 0
    assert [t.get_text() for t in fig.legends[0].get_texts()] == LEGEND


@pytest.mark.parametrize("seconds", [0.5, 1.0])
def test_a_one_partition_stall_of_a_second_or_less_is_still_marked(seconds: float) -> None:
    stall = Gap(us(6), us(6 + seconds), 6.0, 6.0 + seconds)
    short = _availability(partitions=(PartitionAvailability(0, 5, 0, 0, stall),), heals=())
    top, _ = _drawn(replace(_plain([{}] * 12), availability=short), []).axes
    (bar,) = [p for p in top.patches if p.get_zorder() == 4]
    assert (bar.get_x(), bar.get_x() + bar.get_width()) == (6.0, 6.0 + seconds)
    assert [t.get_text() for t in top.texts] == [f" p0 stall {seconds:.1f} s"]


def test_heals_that_draw_nothing_leave_the_later_heals_drawn_at_their_size() -> None:
    heals = (
        HealRecovery(1, "pause", us(2), 2.0, True, 0.5, {0: 0.5, 1: None}),  # never all back
        HealRecovery(2, "pause", us(3), 3.0, False, 0.1, {0: 0.1}),  # not during the workload
        HealRecovery(3, "pause", us(8), 8.0, True, 0.5, {0: 1.0, 1: 1.5}),
    )
    run = replace(_plain([{}] * 12), availability=_availability(heals=heals))
    # The chart's own sizes, whatever the user's matplotlibrc says.
    with matplotlib.rc_context({"lines.markersize": 11}):
        top, _ = _drawn(run, []).axes
    line, triangle = top.lines
    assert (list(line.get_xdata()), list(line.get_ydata())) == ([8.0, 9.5], [0.6, 0.6])
    assert (list(triangle.get_xdata()), triangle.get_marker()) == ([9.5], "v")
    assert triangle.get_markersize() == 6


def test_a_group_stuck_or_reset_in_different_seconds_is_in_the_legend() -> None:
    fig = _drawn(_plain([{"stuck": 1}, {}, {"reset": 2}]), [])
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert names == [*LEGEND, "group stuck (a partition)", "group reset below its commit"]


def test_the_same_run_draws_the_same_svg() -> None:
    run = replace(_plain([{"sent": 2, "ok": 2, "group_lag": 1}] * 3), availability=_availability())
    assert charts.timeline_svg(run, [], "c-0") == charts.timeline_svg(run, [], "c-0")


def test_no_time_grid_whatever_the_users_matplotlibrc_grids() -> None:
    # A matplotlibrc gridding the y axis only: the time axis stays without grid lines.
    rows = [{"sent": 2, "ok": 2, "group_lag": 1, "ack_latency_p50_ms": 3.0}] * 3
    with matplotlib.rc_context({"axes.grid.axis": "y"}):
        fig = _drawn(_plain(rows), [])
    top, bottom, right = fig.axes
    for ax in (top, bottom, right):
        assert not any(line.get_visible() for line in ax.xaxis.get_gridlines()), ax
    assert all(line.get_visible() for ax in (top, bottom) for line in ax.yaxis.get_gridlines())
    assert not any(line.get_visible() for line in right.yaxis.get_gridlines())


def test_svg_of_unsizes_only_the_svg_element_not_text_that_looks_like_a_size() -> None:
    """Only the root element's width and height go (CSS sizes the chart): a label reading like
    a size attribute stays as written, however many there are."""
    label = 'a box width="5pt" height="2.5pt" width="1pt"'
    with matplotlib.rc_context(charts.chart_rc("s")):
        fig = Figure(figsize=(4, 2))
        fig.subplots().set_title(label)
        text = str(charts.svg_of(fig, "sized", "p"))
    root = ElementTree.fromstring(text)
    assert "width" not in root.attrib and "height" not in root.attrib
    assert label in ["".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text")]


def _fault_events(starts: list[tuple[int | None, bool]]) -> list[dict[str, object]]:
    """Fault i starts at its ts_us (None: a hand-written line without one) and, when ended,
    heals at 100 + i."""
    events: list[dict[str, object]] = []
    for i, (ts_us, ended) in enumerate(starts):
        start = {"type": "fault_start", "fault_id": i, "fault": f"f{i}", "target": "leader"}
        events.append(start if ts_us is None else {**start, "ts_us": ts_us})
        if ended:
            events.append({"type": "fault_end", "ts_us": 100 + i, "fault_id": i})
    return events


@pytest.mark.property
@given(st.lists(st.tuples(st.none() | st.integers(0, 3), st.booleans()), max_size=6))
@example([(1, False), (None, False)])
def test_fault_windows_are_in_start_order_an_untimed_start_at_zero(
    starts: list[tuple[int | None, bool]],
) -> None:
    """Each fault start is one window at its time (0 without one), ends paired by fault_id;
    the windows are in the order of their starts, in file order on ties."""
    windows = fault_windows(_fault_events(starts))
    start_us = [ts_us or 0 for ts_us, _ in starts]
    order = sorted(range(len(starts)), key=lambda i: start_us[i])  # stable: file order on ties
    assert [(w.fault, w.start_us, w.end_us) for w in windows] == [
        (f"f{i}", start_us[i], 100 + i if starts[i][1] else None) for i in order
    ]


def test_the_legend_by_default_names_the_sends_latency_faults_and_leaders_only() -> None:
    """Without `priced`, `consumed` or `liveness` the legend has no group, liveness or price
    entries."""
    fig = Figure()
    charts._timeline_legend(fig)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == LEGEND


def test_a_throughput_plot_of_no_seconds_keeps_a_scale_of_one() -> None:
    """No second at all: empty bars of each status and the least scale, as for empty seconds."""
    ax = Figure().subplots()
    charts._plot_throughput(ax, [])
    assert [(c.get_label(), len(c.patches)) for c in ax.containers] == [
        ("ok", 0),
        ("failed", 0),
        ("indeterminate", 0),
    ]
    assert ax.get_ylim() == (0.0, 1.0)
