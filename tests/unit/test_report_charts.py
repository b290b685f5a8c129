"""The timeline chart as drawn: each series, mark and label read back from the matplotlib
figure timeline_svg renders (its bars, lines, spans and texts), and the SVG svg_of makes of a
figure. The expected values are computed here from the crafted timeline and events."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from analysis.model.availability import Availability, Gap, HealRecovery, PartitionAvailability
from analysis.model.results import RunResult, TimelineSecond
from analysis.report import charts
from tests.unit.report_runs import (
    CP,
    T0_S,
    result,
    us,
)
from tests.unit.results_json import typed

STATUS_COLOURS = {"ok": "#4c9f70", "failed": "#d1242f", "indeterminate": "#d4a72c"}


def _drawn(result: RunResult, events: Any) -> Figure:
    """The figure timeline_svg draws for `result` (its SVG is still rendered)."""
    captured: list[Figure] = []
    real = charts.svg_of

    def grab(fig: Figure, label: str, prefix: str) -> Any:
        captured.append(fig)
        return real(fig, label, prefix)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(charts, "svg_of", grab)
        svg = charts.timeline_svg(result, events, "cell-a-0")
    assert svg is not None
    assert svg.startswith('<svg class="chart" role="img" aria-label="timeline of cell-a-0"')
    (fig,) = captured
    return fig


def _seconds(rows: list[dict[str, Any]]) -> tuple[TimelineSecond, ...]:
    return tuple(TimelineSecond(t_s=i, epoch_s=int(T0_S) + i, **row) for i, row in enumerate(rows))


def _plain(rows: list[dict[str, Any]]) -> RunResult:
    return replace(typed(result("c", CP, 0)), timeline=_seconds(rows), availability=None)


def _hex(colour: Any) -> str:
    return to_hex(colour, keep_alpha=False)


def _spans(ax: Any) -> list[tuple[float, float, str, float | None, int]]:
    """(start, end, facecolour, alpha, zorder) of each axvspan-like rectangle of `ax` that is
    not a bar (bars are in the containers)."""
    bars = {id(p) for c in ax.containers for p in c.patches}
    spans = [p for p in ax.patches if id(p) not in bars]
    return [
        (
            p.get_x(),
            p.get_x() + p.get_width(),
            _hex(p.get_facecolor()),
            p.get_alpha(),
            p.get_zorder(),
        )
        for p in spans
    ]


def test_no_timeline_draws_no_chart() -> None:
    assert charts.timeline_svg(_plain([]), [], "x") is None


def test_the_figure_has_a_tall_throughput_plot_over_the_latency_plot_sharing_time() -> None:
    fig = _drawn(_plain([{"sent": 1, "ok": 1, "ack_latency_p50_ms": 2.0}] * 3), [])
    assert tuple(fig.get_size_inches()) == (11.0, 4.4)
    top, bottom = fig.axes
    assert top.get_shared_x_axes().joined(top, bottom)
    high, low = top.get_position(), bottom.get_position()
    assert high.height / low.height == pytest.approx(1.5)
    assert (high.y0 - low.y1) / ((high.height + low.height) / 2) == pytest.approx(0.1)
    assert high.y0 > low.y1


def test_sends_are_stacked_by_status_one_bar_a_second() -> None:
    rows = [
        {"sent": 10, "ok": 10},
        {"sent": 9, "ok": 3, "failed": 2, "indeterminate": 4},
        {"sent": 5, "failed": 5},
    ]
    top, _ = _drawn(_plain(rows), []).axes
    assert [c.get_label() for c in top.containers] == ["ok", "failed", "indeterminate"]
    below = [0, 0, 0]
    for container in top.containers:
        status = container.get_label()
        bars = [(p.get_x(), p.get_width(), p.get_y(), p.get_height()) for p in container.patches]
        assert bars == [(t, 1.0, below[t], rows[t].get(status, 0)) for t in range(3)]
        for p in container.patches:
            assert _hex(p.get_facecolor()) == STATUS_COLOURS[status]
            assert p.get_linewidth() == 0
        below = [b + rows[t].get(status, 0) for t, b in enumerate(below)]
    assert top.get_ylim() == (0.0, 15.0)  # 1.5 × the highest stack: room for the labels
    assert top.get_ylabel() == "sends / s"
    assert not top.xaxis.get_gridlines()[0].get_visible()
    assert top.yaxis.get_gridlines()[0].get_visible()


def test_an_empty_second_leaves_the_throughput_scale_at_one() -> None:
    top, _ = _drawn(_plain([{}, {}]), []).axes
    assert top.get_ylim() == (0.0, 1.0)


def test_acked_then_missing_messages_are_narrow_bars_in_front() -> None:
    rows = [{"sent": 4, "ok": 4}, {"sent": 4, "ok": 4, "missing": 3}, {"sent": 2, "ok": 2}]
    top, _ = _drawn(_plain(rows), []).axes
    labels = [c.get_label() for c in top.containers]
    assert labels == ["ok", "failed", "indeterminate", "acked, later missing"]
    missing = top.containers[3].patches
    assert [(p.get_x(), p.get_width(), p.get_y(), p.get_height()) for p in missing] == [
        (0.0, 0.5, 0.0, 0.0),
        (1.0, 0.5, 0.0, 3.0),
        (2.0, 0.5, 0.0, 0.0),
    ]
    assert {(_hex(p.get_facecolor()), p.get_linewidth(), p.get_zorder()) for p in missing} == {
        ("#6e0b13", 0, 3)
    }
    rows[0]["duplicated"] = 2
    top, _ = _drawn(_plain(rows), []).axes
    duplicated = top.containers[4]
    assert duplicated.get_label() == "acked, later duplicated"
    assert [p.get_height() for p in duplicated.patches] == [2.0, 0.0, 0.0]
    assert _hex(duplicated.patches[0].get_facecolor()) == "#bf3989"


def test_what_the_group_processed_is_a_step_line_with_refused_commits_marked() -> None:
    rows = [
        {"sent": 4, "ok": 4, "processed": 2},
        {"sent": 4, "ok": 4, "processed": 9, "commits_failed": 1},
        {"sent": 4, "ok": 4, "processed": 3},
    ]
    top, _ = _drawn(_plain(rows), []).axes
    step, refused = top.lines
    assert list(step.get_xdata()) == [1.0, 2.0, 3.0]  # each second's count at its end
    assert list(step.get_ydata()) == [2.0, 9.0, 3.0]
    assert step.get_drawstyle() == "steps-pre"
    assert step.get_label() == "processed by the group"
    assert (_hex(step.get_color()), step.get_linewidth(), step.get_zorder()) == ("#0550ae", 1.2, 4)
    assert list(refused.get_xdata()) == [1.5]
    assert list(refused.get_ydata()) == [9.0]
    assert (refused.get_linestyle(), refused.get_marker(), refused.get_markersize()) == (
        "None",
        "x",
        5,
    )
    assert (_hex(refused.get_color()), refused.get_zorder()) == ("#24292f", 5)
    assert top.get_ylim() == (0.0, 13.5)  # the processed line is the highest: 9 × 1.5


def test_without_refused_commits_no_marks_are_drawn() -> None:
    top, _ = _drawn(_plain([{"sent": 1, "ok": 1, "processed": 1}] * 2), []).axes
    assert len(top.lines) == 1


def test_latency_is_drawn_at_each_seconds_centre_with_gaps_for_seconds_without_acks() -> None:
    rows = [
        {"ack_latency_p50_ms": 2.0, "ack_latency_p99_ms": 10.0},
        {"ack_latency_p50_ms": None, "ack_latency_p99_ms": None},
        {"ack_latency_p50_ms": 3.0, "ack_latency_p99_ms": 100.0},
    ]
    _, bottom = _drawn(_plain(rows), []).axes
    p50, p99 = bottom.lines
    assert [line.get_label() for line in (p50, p99)] == ["ack latency p50", "ack latency p99"]
    assert list(p50.get_xdata()) == [0.5, 1.5, 2.5]
    assert list(p99.get_xdata()) == [0.5, 1.5, 2.5]
    assert str([float(v) for v in p50.get_ydata()]) == "[2.0, nan, 3.0]"
    assert str([float(v) for v in p99.get_ydata()]) == "[10.0, nan, 100.0]"
    assert [_hex(line.get_color()) for line in (p50, p99)] == ["#0969da", "#8250df"]
    assert [line.get_linewidth() for line in (p50, p99)] == [1.3, 1.3]
    assert bottom.get_yscale() == "linear"  # 100 / 2 = 50: not more than 50
    assert bottom.get_ylabel() == "ack latency (ms)"
    assert bottom.get_xlabel() == "seconds since the workload started"
    assert not bottom.xaxis.get_gridlines()[0].get_visible()
    assert bottom.yaxis.get_gridlines()[0].get_visible()


@pytest.mark.parametrize(
    ("p50", "p99", "scale"),
    [
        (2.0, 100.01, "log"),  # just over 50 × the smallest
        (0.0, 1000.0, "linear"),  # a zero latency is not a magnitude
        (1.0, 51.0, "log"),
        (None, None, "linear"),
    ],
)
def test_latency_spanning_more_than_fifty_fold_is_drawn_on_a_log_scale(
    p50: float | None, p99: float | None, scale: str
) -> None:
    rows = [{"ack_latency_p50_ms": p50, "ack_latency_p99_ms": p99}]
    _, bottom = _drawn(_plain(rows), []).axes
    assert bottom.get_yscale() == scale


def test_the_group_lag_has_a_right_hand_axis_of_its_own() -> None:
    rows = [{"group_lag": None}, {"group_lag": 40}, {"group_lag": 10}]
    fig = _drawn(_plain(rows), [])
    _, bottom, right = fig.axes
    assert right.get_shared_x_axes().joined(right, bottom)
    (lag,) = right.lines
    assert list(lag.get_xdata()) == [1.0, 2.0, 3.0]
    assert str([float(v) for v in lag.get_ydata()]) == "[nan, 40.0, 10.0]"
    assert lag.get_drawstyle() == "steps-pre"
    assert (lag.get_label(), lag.get_linewidth(), _hex(lag.get_color())) == (
        "group lag",
        1.2,
        "#1b7c83",
    )
    assert right.get_ylabel() == "group lag (records)"
    assert _hex(right.yaxis.label.get_color()) == "#1b7c83"
    assert right.get_ylim() == pytest.approx((0.0, 46.0))  # 1.15 × the largest lag
    assert not any(line.get_visible() for line in right.yaxis.get_gridlines())
    assert not any(line.get_visible() for line in right.xaxis.get_gridlines())


def test_a_group_lag_of_zero_keeps_a_scale_of_one() -> None:
    fig = _drawn(_plain([{"group_lag": 0}, {"group_lag": 0}]), [])
    assert fig.axes[2].get_ylim() == (0.0, 1.0)


def test_without_a_group_there_is_no_right_hand_axis() -> None:
    assert len(_drawn(_plain([{"group_lag": None}] * 2), []).axes) == 2


def _fault(fault_id: int, t_s: float, nodes: list[int], target: str = "leader") -> dict[str, Any]:
    return {
        "type": "fault_start",
        "ts_us": us(t_s),
        "fault_id": fault_id,
        "fault": "pause",
        "target": target,
        "nodes": nodes,
        "detail": {},
    }


def _end(fault_id: int, t_s: float) -> dict[str, Any]:
    return {"type": "fault_end", "ts_us": us(t_s), "fault_id": fault_id, "fault": "pause"}


def test_each_fault_is_shaded_on_both_plots_and_labelled_with_its_nodes() -> None:
    events = [
        _fault(2, 6.5, [1, 3], "followers"),
        _end(2, 8),
        _fault(1, 2, [2]),
        _end(1, 4.25),
        _fault(3, 9, []),
    ]
    top, bottom = _drawn(_plain([{}] * 12), events).axes
    shading = "#fb8f44"
    expected = [(2.0, 4.25, shading, 0.16, 0), (6.5, 8.0, shading, 0.16, 0)]
    expected.append((9.0, 12.0, shading, 0.16, 0))  # never healed: to the timeline's end
    assert _spans(top) == expected
    assert _spans(bottom) == expected
    assert {p.get_linewidth() for p in top.patches if p.get_alpha() == 0.16} == {0}
    labels = [(t.get_text(), t.get_position()) for t in top.texts]
    assert labels == [
        (" pause leader (node 2)", (2.0, 0.985)),
        (" pause followers (nodes 1, 3)", (6.5, 0.985)),
        (" pause leader (not healed)", (9.0, 0.985)),
    ]
    for text in top.texts:
        assert text.get_transform() == top.get_xaxis_transform()
        assert (text.get_va(), text.get_ha(), text.get_fontsize(), text.get_color()) == (
            "top",
            "left",
            8.0,
            "#953800",
        )
    assert len(bottom.texts) == 0


def test_leader_changes_are_dashed_lines_labelled_at_staggered_heights() -> None:
    def sample(t_s: float, leaders: tuple[int, int]) -> dict[str, Any]:
        partitions = [{"partition": p, "leader": n, "isr": [n]} for p, n in enumerate(leaders)]
        return {"type": "sample", "ts_us": us(t_s), "partitions": partitions}

    leaders = [(1, 1), (2, 3), (3, 3), (1, 3), (2, 3), (2, 1)]
    events = [sample(t, pair) for t, pair in enumerate(leaders)]
    top, bottom = _drawn(_plain([{}] * 6), events).axes
    labels = [(t.get_text(), t.get_position()) for t in top.texts]
    assert labels == [
        ("leader p0 1→2, p1 1→3", (1.0, 0.89)),  # two changes at one sample: one label
        ("leader p0 2→3", (2.0, 0.8)),
        ("leader p0 3→1", (3.0, 0.71)),
        ("leader p0 1→2", (4.0, 0.89)),
        ("leader p1 3→1", (5.0, 0.8)),
    ]
    for text in top.texts:
        assert text.get_transform() == top.get_xaxis_transform()
        assert (text.get_va(), text.get_ha(), text.get_fontsize()) == ("top", "left", 7.5)
        assert _hex(text.get_color()) == "#24292f"
        box = text.get_bbox_patch()
        assert (_hex(box.get_facecolor()), box.get_alpha(), box.get_linewidth()) == (
            "#ffffff",
            0.8,
            0,
        )
        assert box.get_boxstyle().pad == 0.15
        assert type(box.get_boxstyle()).__name__ == "Square"
    for ax in (top, bottom):
        lines = [line for line in ax.lines if line.get_linestyle() == "--"]
        assert len(lines) == len(ax.lines) - (2 if ax is bottom else 0)  # p50, p99 below
        assert [list(line.get_xdata()) for line in lines] == [[t, t] for t in range(1, 6)]
        for line in lines:
            assert (_hex(line.get_color()), line.get_linewidth(), line.get_alpha()) == (
                "#24292f",
                0.9,
                0.75,
            )
            assert line._unscaled_dash_pattern == (0, (3, 2))


def _availability(**changes: Any) -> Availability:
    base = Availability(
        workload_start_us=us(0),
        workload_end_us=us(20),
        window_from_events=True,
        ok=10,
        failed=0,
        indeterminate=0,
        failed_without_partition=0,
        indeterminate_without_partition=0,
        longest_gap=Gap(us(3), us(5.5), 3.0, 5.5),
        partitions=(
            PartitionAvailability(0, 5, 0, 0, Gap(us(2), us(3), 2.0, 3.0)),
            PartitionAvailability(1, 5, 0, 0, Gap(us(6), us(9.5), 6.0, 9.5)),
        ),
        heals=(
            HealRecovery(1, "pause", us(4), 4.0, True, 0.5, {0: 0.5, 1: 2.5}),
            HealRecovery(2, "pause", us(7), 7.0, True, 0.5, {0: 0.5, 1: None}),
            HealRecovery(3, "pause", us(30), 30.0, False, 0.1, {0: 0.1, 1: 0.2}),
        ),
    )
    return replace(base, **changes)


def test_the_price_of_safety_is_marked_on_the_throughput_plot() -> None:
    priced_run = replace(_plain([{}] * 12), availability=_availability())
    fig = _drawn(priced_run, [])
    top, bottom = fig.axes
    stall = "#57606a"
    for ax in (top, bottom):
        (hatched,) = [p for p in ax.patches if p.get_hatch()]
        assert hatched.get_hatch() == "///"
        assert (hatched.get_x(), hatched.get_x() + hatched.get_width()) == (3.0, 5.5)
        assert hatched.get_facecolor()[3] == 0  # see-through
        assert (_hex(hatched.get_edgecolor()), hatched.get_alpha()) == (stall, 0.45)
        assert (hatched.get_linewidth(), hatched.get_zorder()) == (0, 1)
    (bar,) = [p for p in top.patches if p.get_zorder() == 4]
    assert (bar.get_x(), bar.get_x() + bar.get_width()) == (6.0, 9.5)
    assert (bar.get_y(), bar.get_height()) == (0, 0.04)
    assert (_hex(bar.get_facecolor()), bar.get_linewidth()) == (stall, 0)
    assert [p for p in bottom.patches if p.get_zorder() == 4] == []
    (label,) = top.texts
    assert (label.get_text(), label.get_position()) == (" p1 stall 3.5 s", (6.0, 0.05))
    assert (label.get_va(), label.get_ha(), label.get_fontsize()) == ("bottom", "left", 7.5)
    assert (_hex(label.get_color()), label.get_zorder()) == (stall, 5)
    assert label.get_transform() == top.get_xaxis_transform()
    box = label.get_bbox_patch()
    assert (_hex(box.get_facecolor()), box.get_alpha(), box.get_linewidth()) == ("#ffffff", 0.8, 0)
    assert box.get_boxstyle().pad == 0.15
    line, triangle = top.lines  # the heal at t=4 only: t=7 never recovered, t=30 after the end
    assert (list(line.get_xdata()), list(line.get_ydata())) == ([4.0, 6.5], [0.6, 0.6])
    assert (list(triangle.get_xdata()), list(triangle.get_ydata())) == ([6.5], [0.6])
    assert (_hex(line.get_color()), line.get_linewidth(), line.get_zorder()) == (
        "#1a7f37",
        1.6,
        5,
    )
    assert (line.get_marker(), triangle.get_marker(), triangle.get_markersize()) == (
        "None",
        "v",
        6,
    )
    assert (_hex(triangle.get_color()), triangle.get_zorder()) == ("#1a7f37", 5)
    assert line.get_transform() == top.get_xaxis_transform()
    assert triangle.get_transform() == top.get_xaxis_transform()
    assert len(bottom.lines) == 2  # p50 and p99 only


def test_a_stall_of_no_length_is_not_marked() -> None:
    none_long = _availability(
        longest_gap=Gap(us(3), us(3), 3.0, 3.0),
        partitions=(PartitionAvailability(0, 5, 0, 0, Gap(us(2), us(2), 2.0, 2.0)),),
        heals=(),
    )
    top, bottom = _drawn(replace(_plain([{}] * 5), availability=none_long), []).axes
    assert top.patches[-1].get_hatch() is None
    assert len(top.texts) == len(top.lines) == 0
    assert [p for p in bottom.patches if p.get_hatch()] == []
    unmeasured = _availability(longest_gap=None, partitions=(), heals=())
    top, _ = _drawn(replace(_plain([{}] * 5), availability=unmeasured), []).axes
    assert len(top.texts) == 0
    assert [p for p in top.patches if p.get_hatch()] == []


LEGEND = [
    "ok",
    "failed",
    "indeterminate",
    "acked, later missing",
    "acked, duplicated",
    "ack latency p50",
    "ack latency p99",
    "fault window",
    "leader change",
]
GROUP_LEGEND = [
    "processed by the group / s",
    "group lag (right axis)",
    "a group commit refused",
]
PRICE_LEGEND = [
    "longest stall, no partition acking",
    "longest stall of one partition",
    "heal → every partition acking again",
]


@pytest.mark.parametrize(
    ("processed", "availability", "labels"),
    [
        (0, None, LEGEND),
        (1, None, LEGEND + GROUP_LEGEND),
        (0, _availability(), LEGEND + PRICE_LEGEND),
        (2, _availability(), LEGEND + GROUP_LEGEND + PRICE_LEGEND),
    ],
)
def test_one_legend_above_both_plots_names_every_series_drawn(
    processed: int, availability: Availability | None, labels: list[str]
) -> None:
    run = replace(_plain([{"processed": processed}] * 3), availability=availability)
    fig = _drawn(run, [])
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == labels
    assert (legend._ncols, legend._loc, legend.get_frame_on()) == (5, 8, False)
    assert legend.get_texts()[0].get_fontsize() == 8.5
    anchor = legend.get_bbox_to_anchor().transformed(fig.transFigure.inverted())
    assert (anchor.x0, anchor.y0) == pytest.approx((0.5, 0.9))
    handles = dict(zip(labels, legend.legend_handles, strict=True))
    colours = {
        **STATUS_COLOURS,
        "acked, later missing": "#6e0b13",
        "acked, duplicated": "#bf3989",
        "fault window": "#fb8f44",
        "longest stall of one partition": "#57606a",
    }
    for label, colour in colours.items():
        if label in handles:
            assert _hex(handles[label].get_facecolor()) == colour
    lines = {
        "ack latency p50": "#0969da",
        "ack latency p99": "#8250df",
        "leader change": "#24292f",
        "processed by the group / s": "#0550ae",
        "group lag (right axis)": "#1b7c83",
        "a group commit refused": "#24292f",
        "heal → every partition acking again": "#1a7f37",
    }
    for label, colour in lines.items():
        if label in handles:
            assert _hex(handles[label].get_color()) == colour
    assert handles["fault window"].get_alpha() == 0.3
    assert handles["leader change"]._unscaled_dash_pattern == (0, (3, 2))
    if processed:
        refused = handles["a group commit refused"]
        assert (refused.get_marker(), refused.get_linestyle()) == ("x", "None")
    if availability is not None:
        hatched = handles["longest stall, no partition acking"]
        assert (hatched.get_hatch(), hatched.get_facecolor()[3]) == ("///", 0)
        assert _hex(hatched.get_edgecolor()) == "#57606a"
        assert handles["heal → every partition acking again"].get_marker() == "v"
