"""Property tests of the report: every interval is ordered, and every generated set of
repetitions renders in full, with the plotted values equal to the counts they come from.

The worst inputs are the point: n of n lost, 0 of n, one repetition, cells whose repetitions
all errored or acknowledged nothing, mixed Kafka versions and modes. The expected values are
computed here from the generated repetitions (plain sums), not by the report's functions.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from analysis.crossrun.summary import CrossRunSummary, cross_run_summary, wilson_interval
from analysis.judge.outcomes import CellVerdict
from analysis.judge.verdicts import judge_all
from analysis.model.anomalies import COUNT_NAMES
from analysis.model.results import RunResult, RunStatus
from analysis.report.charts import MAX_CHART_ROWS
from analysis.report.junit import write_junit
from analysis.report.loss_charts import (
    ProbabilityPoint,
    draw_loss_bars,
    draw_loss_probability,
    loss_probability_points,
)
from analysis.report.render import render_report
from harness.rundir.config import CellConfig

T0_US = 1_700_000_000_000_000


# k of n with n up to 10^6, k often at the ends, where the floating-point excursions were.
K_OF_N = st.integers(0, 10**6).flatmap(
    lambda n: st.tuples(st.sampled_from([0, n]) | st.integers(0, n), st.just(n))
)


@pytest.mark.property
@given(K_OF_N)
@example((4, 4))
@example((10, 10))
@example((14, 14))
@example((0, 69))
@example((0, 75))
@example((0, 125))
@example((1, 1))
@example((0, 1))
@example((0, 0))
@example((10**6, 10**6))
@example((1, 10**6))
@example((10**6 - 1, 10**6))
def test_every_interval_holds_its_point_inside_zero_and_one(k_of_n: tuple[int, int]) -> None:
    k, n = k_of_n
    interval = wilson_interval(k, n)
    if n == 0:  # nothing counted: the whole range, and no point estimate
        assert (interval.low, interval.high) == (0.0, 1.0)
        return
    p = k / n
    assert 0.0 <= interval.low <= p <= interval.high <= 1.0
    assert (interval.low == 0.0) == (k == 0)
    assert (interval.high == 1.0) == (k == n)


def test_every_interval_up_to_200_repetitions_and_every_end_up_to_20_000_is_ordered() -> None:
    small = [(k, n) for n in range(1, 201) for k in range(n + 1)]
    ends = [(k, n) for n in range(1, 20_001) for k in (0, n)]
    for k, n in small + ends:
        interval = wilson_interval(k, n)
        assert 0.0 <= interval.low <= k / n <= interval.high <= 1.0, (k, n)
        assert (interval.low == 0.0, interval.high == 1.0) == (k == 0, k == n), (k, n)


# ---------------------------------------------------------------------------------------------
# Generated repetitions and cells


@dataclass(frozen=True)
class Rep:
    """A generated repetition: how its reconciliation ended, its counts, whether it has events."""

    status: RunStatus
    acked: int = 0
    loss: int = 0
    events: bool = True

    @property
    def counted(self) -> bool:
        """Whether the summary and the charts count it: complete, with something acked."""
        return self.status == RunStatus.COMPLETE and self.acked > 0


@dataclass(frozen=True)
class Cell:
    """A generated cell: its configuration and its repetitions."""

    acks: str
    version: str
    mode: str
    fault: str
    reps: tuple[Rep, ...]


COMPLETE = st.builds(
    lambda acked, share, events: Rep(RunStatus.COMPLETE, acked, round(acked * share), events),
    st.integers(0, 10_000),
    st.sampled_from([0.0, 0.0, 1.0, 1.0, 0.5, 0.001]) | st.floats(0, 1),  # none, all, some lost
    st.booleans(),
)
REP = COMPLETE | st.sampled_from(
    [Rep(RunStatus.ERROR), Rep(RunStatus.INCOMPLETE), Rep(RunStatus.ERROR, events=False)]
)
CELL = st.builds(
    Cell,
    st.sampled_from(["0", "1", "all"]),
    st.sampled_from(["3.9.1", "4.3.1", "0.10.2.2"]),
    st.sampled_from(["kraft", "kraft-dedicated", "zookeeper"]),
    st.sampled_from(["leader-kill", "leader-partition"]),
    # one repetition, all alike (n of n, 0 of n, all errored), or mixed
    st.lists(REP, min_size=1, max_size=8).map(tuple)
    | st.tuples(REP, st.integers(1, 40)).map(lambda rn: (rn[0],) * rn[1]),
)


def _results(cells: Sequence[Cell]) -> list[RunResult]:
    """RunResults of the generated cells, each repetition with a run directory of its own (not
    created: neither the judge nor the report reads one that lacks broker logs)."""
    results = []
    for c, cell in enumerate(cells):
        config = CellConfig.read(
            {
                "acks": cell.acks,
                "min_insync_replicas": 2 if cell.acks == "all" else 1,
                "fault_class": cell.fault,
                "kafka_version": cell.version,
                "kafka_mode": cell.mode,
            }
        )
        name = f"cell{c}-acks{cell.acks}-{cell.version}-{cell.mode}"
        for index, rep in enumerate(cell.reps):
            complete = rep.status == RunStatus.COMPLETE
            counts = {**dict.fromkeys(COUNT_NAMES, 0), "sent": rep.acked, "acked": rep.acked}
            results.append(
                RunResult(
                    run_dir=f"runs/generated/{name}/{index}",
                    experiment="generated",
                    cell=name,
                    repetition=index,
                    config=config,
                    axes={"acks": cell.acks},
                    status=rep.status,
                    error=None if complete else "OSError: generated",
                    counts=counts | {"lost": rep.loss} if complete else None,
                    loss=rep.loss if complete else None,
                )
            )
    return results


def _events(result: RunResult, rep: Rep) -> list[dict[str, Any]]:
    """A complete read-back and a tally agreeing with the journal, or no events at all."""
    if not rep.events:
        return []
    acked = (result.counts or {}).get("acked", 0)
    return [
        {"type": "readback", "ts_us": T0_US, "complete": True, "high_watermarks": {}},
        {"type": "recorder_tally", "ts_us": T0_US, "journal_error": None,
         "reports": {"ok": acked, "failed": 0, "indeterminate": 0}},
    ]  # fmt: skip


@dataclass(frozen=True)
class Judged:
    """Generated cells as the report takes them."""

    results: list[RunResult]
    events: dict[str, list[dict[str, Any]]]
    cells: list[CellVerdict]
    summary: CrossRunSummary


def _judged(cells: Sequence[Cell]) -> Judged:
    """Results, events, verdicts and the cross-run summary of the generated cells."""
    results = _results(cells)
    reps = [rep for cell in cells for rep in cell.reps]
    events = {r.run_dir: _events(r, rep) for r, rep in zip(results, reps, strict=True)}
    judged = judge_all(results, events)
    return Judged(results, events, judged, cross_run_summary(results, judged))


# ---------------------------------------------------------------------------------------------
# What the charts plot


def _plotted_lines(draw: Any, *args: Any) -> dict[str, tuple[list[float], list[float]]]:
    """{gid: (x data, y data)} of every line `draw(ax, *args)` put on a fresh axes."""
    ax = Figure().subplots()
    draw(ax, *args)
    return {
        line.get_gid(): ([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()])
        for line in ax.lines
        if line.get_gid()
    }


def _expected_points(cells: Sequence[Cell]) -> dict[tuple[str, str, str], tuple[int, int]]:
    """("fault · version", "acks=…", mode) → (lossy, counted), summed from the generated reps.

    The summary groups by configuration, fault and version; generated cells differ only in
    acks (which decides min.insync), mode, fault and version, so those name a group.
    """
    groups: dict[tuple[str, str, str], tuple[int, int]] = {}
    for cell in cells:
        key = (f"{cell.fault} · {cell.version}", f"acks={cell.acks}", cell.mode)
        lossy, counted = groups.get(key, (0, 0))
        lossy += sum(1 for rep in cell.reps if rep.counted and rep.loss > 0)
        counted += sum(1 for rep in cell.reps if rep.counted)
        groups[key] = (lossy, counted)
    return groups


def _group_key(point: ProbabilityPoint) -> tuple[str, str, str]:
    """The _expected_points key of a plotted point, read from its label."""
    fault_version, _, configuration = point.label.rpartition(" · ")
    settings_ = dict(word.split("=", 1) for word in configuration.split())
    return fault_version, f"acks={settings_['acks']}", settings_["kafka_mode"]


def _check_probability_chart(cells: Sequence[Cell], summary: CrossRunSummary) -> None:
    """Every counted group is plotted: its dot at lossy/counted, its line from the interval's
    low end to its high end exactly, 0 <= low <= dot <= high <= 100."""
    points = loss_probability_points(summary)
    expected = {k: v for k, v in _expected_points(cells).items() if v[1] > 0}
    assert sorted(_group_key(p) for p in points) == sorted(expected)
    lines = _plotted_lines(draw_loss_probability, points)
    assert len(lines) == 2 * len(points)
    for i, point in enumerate(points):
        lossy, counted = expected[_group_key(point)]
        assert (point.lossy, point.counted) == (lossy, counted)
        assert point.percent == 100 * (lossy / counted)
        interval = wilson_interval(lossy, counted)
        assert (point.low, point.high) == (100 * interval.low, 100 * interval.high)
        assert lines[f"point-{i}"] == ([point.percent], [i])
        assert lines[f"interval-{i}"] == ([point.low, point.high], [i, i])
        assert 0.0 <= point.low <= point.percent <= point.high <= 100.0


def _check_loss_bars(cells: Sequence[Cell], judged: Judged) -> None:
    """Each cell's bar is its loss rate over its counted repetitions (in %), its whisker the
    min–max of their rates, drawn only when they differ."""
    ax = Figure().subplots()
    draw_loss_bars(ax, judged.cells, {r.run_dir: r for r in judged.results})
    widths = [bar.get_width() for bar in ax.patches]
    lines = {line.get_gid(): list(line.get_xdata()) for line in ax.lines}
    assert len(widths) == len(cells)
    for i, cell in enumerate(cells):
        counted = [rep for rep in cell.reps if rep.counted]
        acked = sum(rep.acked for rep in counted)
        loss = sum(rep.loss for rep in counted)
        assert widths[i] == (100 * (loss / acked) if acked else 0.0)
        rates = [100 * rep.loss / rep.acked for rep in counted]
        if rates and max(rates) > min(rates):
            assert lines[f"spread-{i}"] == [min(rates), max(rates)]
        else:
            assert f"spread-{i}" not in lines


@pytest.mark.property
@given(st.lists(CELL, min_size=0, max_size=6))
@example([Cell("all", "4.3.1", "kraft", "leader-kill", (Rep(RunStatus.COMPLETE, 10, 10),) * 4)])
@example([Cell("1", "3.9.1", "zookeeper", "leader-kill", (Rep(RunStatus.COMPLETE, 10, 0),) * 69)])
@example([Cell("all", "4.3.1", "kraft", "leader-kill", (Rep(RunStatus.ERROR),) * 3)])
@example([Cell("0", "0.10.2.2", "zookeeper", "leader-kill", (Rep(RunStatus.COMPLETE, 0, 0),))])
def test_every_plotted_value_is_the_generated_counts(cells: list[Cell]) -> None:
    judged = _judged(cells)
    _check_probability_chart(cells, judged.summary)
    _check_loss_bars(cells, judged)


def _check_rendered(cells: Sequence[Cell], judged: Judged, out: Path) -> None:
    """Every file written, every cell and group in it, no part failed."""
    paths = render_report(
        judged.cells, judged.results, judged.events, [], out, "generated", judged.summary
    )
    assert paths.failures == ()
    html = paths.html.read_text()
    assert 'class="part-failed"' not in html
    assert html.count('<section class="cell') == len(cells)
    shown = min(len(loss_probability_points(judged.summary)), MAX_CHART_ROWS)
    assert html.count('id="loss-prob-interval-') == shown
    document = json.loads(paths.json.read_text())
    assert len(document["cells"]) == len(cells)
    groups = document["summary"]["groups"]
    assert [(g["lossy"], g["counted"]) for g in groups] == [
        (g.lossy, g.counted) for g in judged.summary.groups
    ]
    for group in groups:
        interval, p = group["interval"], group["loss_probability"]
        low, high = interval["low"], interval["high"]
        assert 0.0 <= low <= (p if p is not None else low) <= high <= 1.0
    markdown = paths.markdown.read_text()
    assert markdown.count("\n### ") == len(cells)
    junit = ET.parse(write_junit(judged.cells, judged.events, out / "junit.xml")).getroot()
    assert int(junit.get("tests", "-1")) == sum(len(c.reps) for c in cells)


# A whole report per example (matplotlib draws and writes each chart): a tenth of the budget.
@pytest.mark.property
@settings(max_examples=max(10, settings.default.max_examples // 10))
@given(st.lists(CELL, min_size=0, max_size=4))
@example([Cell("all", "4.3.1", "kraft", "leader-kill", (Rep(RunStatus.COMPLETE, 10, 10),) * 4)])
@example([Cell("1", "3.9.1", "zookeeper", "leader-kill", (Rep(RunStatus.COMPLETE, 10, 0),) * 69)])
@example([Cell("all", "4.3.1", "kraft", "leader-kill", (Rep(RunStatus.ERROR),) * 3)])
@example([Cell("0", "0.10.2.2", "zookeeper", "leader-kill", (Rep(RunStatus.COMPLETE, 0, 0),))])
@example([Cell("1", "3.9.1", "kraft", "leader-kill", (Rep(RunStatus.COMPLETE, 1, 0),))])
@example(
    [
        Cell("1", "3.9.1", "kraft", "leader-kill", (Rep(RunStatus.COMPLETE, 1, 1),)),
        Cell("all", "4.3.1", "zookeeper", "leader-partition", (Rep(RunStatus.INCOMPLETE),)),
    ]
)
def test_every_generated_report_renders_in_full(cells: list[Cell]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _check_rendered(cells, _judged(cells), Path(tmp))


def test_four_of_four_lost_plots_its_dot_at_100_with_the_line_ending_there() -> None:
    cells = [Cell("all", "4.3.1", "kraft", "leader-kill", (Rep(RunStatus.COMPLETE, 10, 10),) * 4)]
    (point,) = loss_probability_points(_judged(cells).summary)
    assert (point.percent, point.high, point.lossy, point.counted) == (100.0, 100.0, 4, 4)
    assert 0 < point.low < 100
    assert _plotted_lines(draw_loss_probability, [point])["interval-0"][0] == [point.low, 100.0]


def test_thousands_of_cells_render_and_the_charts_draw_the_most_lossy(tmp_path: Path) -> None:
    # 2,000 cells, one in 20 losing: past MAX_CHART_ROWS, the loss chart draws the cells with
    # the most loss and says how many it left out.
    cells = [
        Cell(
            ("1", "all")[i % 2],
            ("3.9.1", "4.3.1")[i % 3 == 0],
            "kraft",
            "leader-kill",
            (Rep(RunStatus.COMPLETE, 2_000, i + 1 if i % 20 == 0 else 0),),
        )
        for i in range(2_000)
    ]
    _check_rendered(cells, _judged(cells), tmp_path / "report")
    html = (tmp_path / "report" / "report.html").read_text()
    assert "the 100 cells with the most loss of 2,000" in html
    chart = html[html.index('aria-label="loss by configuration"') :]
    chart = chart[: chart.index("</svg>")]
    drawn = {f"cell{i}-" for i in range(0, 2_000, 20)}  # the 100 that lost
    assert all(f">{name}" in chart for name in drawn)
    assert ">cell1-" not in chart
