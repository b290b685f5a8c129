"""The loss charts as drawn: bar colours by verdict, whiskers, value labels, limits and axis
labels read back from the matplotlib figure; which rows a chart past MAX_CHART_ROWS keeps;
what the probability chart writes beside each point. Expected values are computed here."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from matplotlib import rc_context
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from analysis.crossrun.summary import (
    CrossRunSummary,
    GroupSummary,
    cross_run_summary,
    wilson_interval,
)
from analysis.judge.outcomes import CellVerdict, Verdict
from analysis.report import loss_charts
from analysis.report.charts import MAX_CHART_ROWS
from analysis.report.loss_charts import (
    ProbabilityPoint,
    draw_loss_bars,
    draw_loss_probability,
    loss_probability_points,
)
from tests.unit.report_runs import AP, CP, healthy_events, judge_all, result
from tests.unit.results_json import typed

INK = "#24292f"


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Figure, str, str]]:
    calls: list[tuple[Figure, str, str]] = []
    real = loss_charts.svg_of

    def grab(fig: Figure, label: str, prefix: str) -> Any:
        calls.append((fig, label, prefix))
        return real(fig, label, prefix)

    monkeypatch.setattr(loss_charts, "svg_of", grab)
    return calls


def _judged(raws: list[dict[str, Any]]) -> tuple[list[CellVerdict], dict[str, Any]]:
    raws = [{**r, "timeline": []} for r in raws]
    events = {r["run_dir"]: healthy_events() for r in raws}
    return judge_all(raws, events), {r["run_dir"]: typed(r) for r in raws}


def test_each_cell_is_a_bar_of_its_verdicts_colour_with_its_spread_and_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cells, results = _judged(
        [
            result("ap", AP, 0, lost=19),
            result("ap", AP, 1, lost=38),
            result("cp", CP, 0),
            {**result("bare", CP, 0), "counts": None, "status": "incomplete"},
        ]
    )
    # Loss with no fault recorded: a violation even where acks=1 allows loss under a fault.
    assert [c.verdict for c in cells] == [Verdict.VIOLATION, Verdict.PASS, Verdict.UNKNOWN]
    calls = _captured(monkeypatch)
    svg = loss_charts.loss_chart_svg(cells, results)
    ((fig, label, prefix),) = calls
    assert (label, prefix) == ("loss by configuration", "loss-chart")
    assert 'aria-label="loss by configuration"' in svg and 'id="loss-chart-' in svg
    assert tuple(fig.get_size_inches()) == pytest.approx((11, 0.9 + 0.36 * 3))
    (ax,) = fig.axes
    bars = ax.patches
    assert [(b.get_y() + b.get_height() / 2, b.get_height()) for b in bars] == [
        (0, 0.6),
        (1, 0.6),
        (2, 0.6),
    ]
    ap_rate = 100 * 57 / 3800
    assert [b.get_width() for b in bars] == [pytest.approx(ap_rate), 0.0, 0.0]
    assert [to_hex(b.get_facecolor()) for b in bars] == ["#cf222e", "#1a7f37", "#8250df"]
    (spread,) = ax.lines  # only the cell whose repetitions differ
    assert spread.get_gid() == "spread-0"
    assert list(spread.get_xdata()) == pytest.approx([1.0, 2.0])
    assert list(spread.get_ydata()) == [0, 0]
    assert (to_hex(spread.get_color()), spread.get_linewidth()) == (INK, 1.2)
    assert (spread.get_marker(), spread.get_markersize()) == ("|", 7)
    texts = [(t.get_text(), t.get_position()) for t in ax.texts]
    assert texts == [
        ("  1.5 %", (2.0, 0)),  # the mean, written past the whisker's end
        ("  0 %", (0.0, 1)),
        ("  no data", (0.0, 2)),
    ]
    assert texts[0][1][0] == pytest.approx(2.0)
    assert {(t.get_va(), t.get_fontsize()) for t in ax.texts} == {("center", 8.0)}
    assert ax.get_xlim() == pytest.approx((0, 2.0 * 1.25))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ap", "cp", "bare"]
    assert list(ax.get_yticks()) == [0, 1, 2]
    assert ax.yaxis_inverted()
    assert not ax.yaxis.get_gridlines()[0].get_visible()
    assert ax.get_xlabel() == (
        "acknowledged messages missing (loss, % of acked; line: min–max over repetitions)"
    )
    assert ax.get_title(loc="left") == ""


def test_a_chart_without_loss_keeps_a_scale_of_one_and_names_experiments_when_several() -> None:
    cells, results = _judged([result("a", CP, 0), {**result("b", CP, 0), "experiment": "other"}])
    ax = Figure().subplots()
    draw_loss_bars(ax, cells, results)
    assert ax.get_xlim() == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["chaos/a", "other/b"]
    assert len(ax.lines) == 0


def test_a_repetition_without_acks_or_with_a_malformed_count_has_no_rate_in_the_spread() -> None:
    cells, results = _judged(
        [
            result("a", AP, 0, lost=19),
            {**result("a", AP, 1), "counts": {**result("a", AP, 1)["counts"], "acked": 0}},
            {**result("a", AP, 2, lost=5), "counts": {**result("a", AP, 2)["counts"], "lost": "5"}},
            result("a", AP, 3, lost=38),
        ]
    )
    ax = Figure().subplots()
    draw_loss_bars(ax, cells, results)
    (spread,) = ax.lines
    assert list(spread.get_xdata()) == pytest.approx([1.0, 2.0])
    ax = Figure().subplots()
    draw_loss_bars(ax, cells, {})  # no results: no spread at all
    assert len(ax.lines) == 0


def test_past_the_row_limit_the_most_lossy_rows_are_kept_in_their_order() -> None:
    rows = list(range(MAX_CHART_ROWS + 3))
    keys = {r: (1.0 if r in (5, 50, 102) else 0.0, -r) for r in rows}
    kept = loss_charts._most_lossy(rows, lambda r: keys[r])
    dropped = set(rows) - set(kept)
    assert kept == sorted(kept)
    assert len(kept) == MAX_CHART_ROWS
    assert dropped == {100, 101, 99}  # the least lossy: the last ones on a tie broken by -r
    ties = loss_charts._most_lossy(rows, lambda r: 0.0)
    assert ties == rows[:MAX_CHART_ROWS]  # the first ones on ties
    assert loss_charts._most_lossy(rows[:MAX_CHART_ROWS], lambda r: -r) == rows[:MAX_CHART_ROWS]


def test_a_chart_that_left_rows_out_says_how_many() -> None:
    ax = Figure().subplots()
    loss_charts._say_what_is_left_out(ax, 100, 1234, "cells")
    assert ax.get_title(loc="left") == (
        "the 100 cells with the most loss of 1,234; the tables list every one"
    )
    assert ax.title.get_text() == ""
    assert ax._left_title.get_fontsize() == 8
    ax = Figure().subplots()
    loss_charts._say_what_is_left_out(ax, 7, 7, "groups")
    assert ax.get_title(loc="left") == ""


def _summary() -> CrossRunSummary:
    cells, results = _judged(
        [
            result("ap", AP, 0, lost=1),
            result("ap", AP, 1),
            result("ap", AP, 2, lost=2),
            result("cp", CP, 0),
            {**result("none", {**CP, "kafka_version": "4.0.0"}, 0), "counts": None},
        ]
    )
    return cross_run_summary(list(results.values()), cells)


def test_the_probability_points_are_the_groups_with_a_probability() -> None:
    points = loss_probability_points(_summary())
    assert [(p.lossy, p.counted) for p in points] == [(0, 1), (2, 3)]
    first = points[1]
    (group,) = [g for g in _summary().groups if g.lossy == 2]
    assert first.label == f"leader-partition · 3.9.0 · {group.label}"
    assert first.percent == pytest.approx(100 * 2 / 3)
    assert (first.low, first.high) == (100 * group.interval.low, 100 * group.interval.high)


def test_each_probability_is_a_dot_on_its_interval_with_lossy_of_counted_beside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _captured(monkeypatch)
    svg = loss_charts.loss_probability_svg(_summary())
    ((fig, label, prefix),) = calls
    assert (label, prefix) == ("loss probability by configuration, fault and version", "loss-prob")
    assert 'id="loss-prob-' in svg
    assert tuple(fig.get_size_inches()) == pytest.approx((11, 0.9 + 0.36 * 2))
    (ax,) = fig.axes
    assert ax.get_xlabel() == (
        "repetitions that lost acknowledged data (%, line: 95 % Wilson interval)"
    )
    assert ax.get_xlim() == (0.0, 112.0)
    assert ax.yaxis_inverted()
    assert not ax.yaxis.get_gridlines()[0].get_visible()
    points = loss_probability_points(_summary())
    assert [t.get_text() for t in ax.get_yticklabels()] == [p.label for p in points]
    assert {t.get_fontsize() for t in ax.get_yticklabels()} == {7.5}
    texts = [(t.get_text(), t.get_position()) for t in ax.texts]
    assert texts == [("  0/1", (points[0].high, 0)), ("  2/3", (points[1].high, 1))]
    assert {(t.get_va(), t.get_fontsize()) for t in ax.texts} == {("center", 8.0)}


def test_the_probability_lines_and_dots_are_drawn_in_ink() -> None:
    points = [ProbabilityPoint("g", 40.0, 10.0, 75.0, 2, 5)]
    ax = Figure().subplots()
    draw_loss_probability(ax, points)
    line, dot = ax.lines
    assert (line.get_gid(), dot.get_gid()) == ("interval-0", "point-0")
    assert (to_hex(line.get_color()), line.get_linewidth()) == (INK, 1.2)
    assert (line.get_marker(), line.get_markersize()) == ("|", 7)
    assert (to_hex(dot.get_color()), dot.get_marker(), dot.get_linestyle()) == (INK, "o", "None")
    assert (list(dot.get_xdata()), list(dot.get_ydata())) == ([40.0], [0])


def test_an_empty_probability_chart_still_has_a_row_of_height() -> None:
    empty = CrossRunSummary(groups=(), effects=(), decisive_settings=())
    calls: list[Figure] = []
    real = loss_charts.svg_of
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loss_charts, "svg_of", lambda f, *a: calls.append(f) or real(f, *a))
        loss_charts.loss_probability_svg(empty)
        loss_charts.loss_chart_svg([], {})
    assert [tuple(f.get_size_inches()) for f in calls] == [pytest.approx((11, 1.26))] * 2


def _group(version: str, lossy: int) -> GroupSummary:
    return GroupSummary(
        configuration=(("acks", "all"),),
        fault="leader-kill",
        kafka_version=version,
        experiments=("chaos",),
        repetitions=4,
        counted=4,
        lossy=lossy,
        loss_probability=lossy / 4,
        interval=wilson_interval(lossy, 4),
        loss_rate=None,
        verdicts={},
    )


def test_past_the_row_limit_the_probability_chart_draws_the_most_lossy_groups_and_says_so() -> None:
    lossy_at = {5: 1, 50: 2, MAX_CHART_ROWS + 2: 4}
    total = MAX_CHART_ROWS + 3
    groups = tuple(_group(f"v{i}", lossy_at.get(i, 0)) for i in range(total))
    svg = loss_charts.loss_probability_svg(CrossRunSummary(groups, (), ()))
    assert f"the {MAX_CHART_ROWS} groups with the most loss of {total}; the tables list" in svg
    drawn = [i for i in range(total) if f">leader-kill · v{i} · acks=all<" in svg]
    assert drawn == [i for i in range(total) if i not in (99, 100, 101)]  # the last on ties
    assert svg.count("  4/4<") == 1


def test_the_probability_chart_is_the_same_svg_every_time() -> None:
    assert loss_charts.loss_probability_svg(_summary()) == loss_charts.loss_probability_svg(
        _summary()
    )


@pytest.mark.parametrize("grid", [True, False])
def test_the_probability_chart_has_vertical_grid_lines_as_the_axes_had_and_no_horizontal(
    grid: bool,
) -> None:
    with rc_context({"axes.grid": grid}):
        ax = Figure().subplots()
        draw_loss_probability(ax, loss_probability_points(_summary()))
    assert not any(line.get_visible() for line in ax.yaxis.get_gridlines())
    assert all(line.get_visible() == grid for line in ax.xaxis.get_gridlines())


@pytest.mark.parametrize(
    ("rc", "vertical"),
    [
        ({"axes.grid": True}, True),
        ({"axes.grid": False}, False),
        ({"axes.grid": True, "axes.grid.axis": "x"}, True),  # a matplotlibrc gridding x only
    ],
)
def test_the_loss_bars_have_no_horizontal_grid_lines_whatever_the_matplotlibrc(
    rc: dict[str, Any], vertical: bool
) -> None:
    """The bars' rows never get horizontal grid lines, whether the axes had them or not; the
    vertical ones stay as the axes had them."""
    cells, results = _judged([result("ap", AP, 0, lost=19), result("cp", CP, 0)])
    with rc_context(rc):
        ax = Figure().subplots()
        draw_loss_bars(ax, cells, results)
    assert not any(line.get_visible() for line in ax.yaxis.get_gridlines())
    assert all(line.get_visible() == vertical for line in ax.xaxis.get_gridlines())


def test_past_the_row_limit_the_loss_chart_keeps_the_cells_of_highest_loss_not_widest_spread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cells are ranked by their loss figure first, their repetitions' worst only on a tie:
    of x (1 % lost, one repetition 2 %) and y (1.58 %, one repetition), x is left out."""
    fillers = [result(f"f{i:02}", AP, 0, lost=190) for i in range(MAX_CHART_ROWS - 1)]
    raws = [*fillers, result("x", AP, 0), result("x", AP, 1, lost=38), result("y", AP, 0, lost=30)]
    cells, results = _judged(raws)
    assert [(c.cell, c.stats.loss_rate) for c in cells[-2:]] == [
        ("x", pytest.approx(38 / 3800)),
        ("y", pytest.approx(30 / 1900)),
    ]
    calls = _captured(monkeypatch)
    loss_charts.loss_chart_svg(cells, results)
    ((fig, _, _),) = calls
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == [r["cell"] for r in fillers] + ["y"]
    assert ax.get_title(loc="left") == (
        f"the {MAX_CHART_ROWS} cells with the most loss of {MAX_CHART_ROWS + 1}; "
        "the tables list every one"
    )


def test_a_chart_of_exactly_the_row_limit_keeps_every_row_without_ranking_them() -> None:
    """Nothing to leave out: the rows as given, and the key (for the loss chart, a pass over
    each cell's repetitions) is never computed."""
    rows = list(range(MAX_CHART_ROWS))
    ranked: list[int] = []

    def loss(row: int) -> int:
        ranked.append(row)
        return row

    assert loss_charts._most_lossy(rows, loss) == rows
    assert ranked == []
    assert loss_charts._most_lossy([*rows, -1], loss) == rows  # one more: the least is left out
    assert sorted(ranked) == [-1, *rows]


COUNT = st.integers(0, 40)


@functools.cache
def _four_repetitions() -> CellVerdict:
    """One cell of four repetitions (their results are drawn by the property below)."""
    cells, _ = _judged([result("a", AP, rep) for rep in range(4)])
    (cell,) = cells
    return cell


@pytest.mark.property
@given(
    st.lists(
        st.none()
        | st.fixed_dictionaries(
            {}, optional={"acked": COUNT, "lost": COUNT | st.just("5"), "unseen": COUNT}
        ),
        min_size=4,
        max_size=4,
    )
)
@example([None, {"acked": 0, "lost": 1, "unseen": 0}, {"acked": 9, "lost": "5", "unseen": 0}, {}])
@example([{"acked": 10, "lost": 1, "unseen": 1}, {"acked": 40, "lost": 2, "unseen": 0}, None, None])
def test_a_cells_spread_is_the_min_and_max_loss_of_its_measured_repetitions(
    counts: list[dict[str, Any] | None],
) -> None:
    """A repetition counts when it has a result with acks and integer loss counts: its rate is
    100 × (lost + unseen) / acked; no such repetition is a spread of (0, 0), not a whisker."""
    cell = _four_repetitions()
    template = typed(result("a", AP, 0))
    results = {
        rep.run_dir: replace(template, run_dir=rep.run_dir, counts=c)
        for rep, c in zip(cell.repetitions, counts, strict=True)
        if c is not None
    }
    rates = [
        100 * (c["lost"] + c["unseen"]) / c["acked"]
        for c in counts
        if c is not None
        and c.get("acked")
        and isinstance(c.get("lost"), int)
        and isinstance(c.get("unseen"), int)
    ]
    expected = (min(rates), max(rates)) if rates else (0.0, 0.0)
    assert loss_charts._rep_loss_span(cell, results) == expected
