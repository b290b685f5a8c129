"""Property tests of the report: every interval is ordered, and every generated set of
repetitions renders in full, with the plotted values equal to the summary's.

The worst inputs are the point: n of n lost, 0 of n, one repetition, cells whose repetitions
all errored or acknowledged nothing, mixed Kafka versions and modes.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analysis.anomalies import COUNT_NAMES
from analysis.judge.verdicts import judge_all
from analysis.report import charts
from analysis.report.charts import loss_probability_points
from analysis.report.render import render_report
from analysis.results import RunResult, RunStatus
from analysis.summary import cross_run_summary, wilson_interval
from harness.rundir.config import CellConfig

pytestmark = pytest.mark.property
T0_US = 1_700_000_000_000_000


@given(st.integers(0, 10**6).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@example((4, 4))
@example((10, 10))
@example((14, 14))
@example((0, 69))
@example((0, 75))
@example((0, 125))
@example((1, 1))
@example((0, 1))
@example((10**6, 10**6))
def test_every_interval_holds_its_point_inside_zero_and_one(k_of_n: tuple[int, int]) -> None:
    k, n = k_of_n
    interval = wilson_interval(k, n)
    p = k / n if n else 0.0
    assert 0.0 <= interval.low <= p <= interval.high <= 1.0
    assert (interval.low == 0.0) == (k == 0) or n == 0
    assert (interval.high == 1.0) == (k == n) or n == 0


# A repetition: ("complete", acked, loss) or ("error", 0, 0).
REPETITION = st.one_of(
    st.tuples(st.just("complete"), st.integers(0, 50), st.integers(0, 50)).map(
        lambda r: (r[0], r[1], min(r[1], r[2]))
    ),
    st.just(("error", 0, 0)),
)
CELL = st.tuples(
    st.sampled_from(["1", "all", "0"]),
    st.sampled_from(["3.9.1", "4.3.1", "0.10.2.2"]),
    st.sampled_from(["kraft", "zookeeper"]),
    st.lists(REPETITION, min_size=1, max_size=8),
)


def _results(root: Path, cells: list[tuple]) -> list[RunResult]:
    """RunResults of the generated cells, each repetition in a run directory of its own."""
    results = []
    for c, (acks, version, mode, repetitions) in enumerate(cells):
        config = CellConfig.read(
            {
                "acks": acks,
                "min_insync_replicas": 2 if acks == "all" else 1,
                "fault_class": "leader-kill",
                "kafka_version": version,
                "kafka_mode": mode,
            }
        )
        for rep, (status, acked, loss) in enumerate(repetitions):
            run_dir = root / f"cell{c}" / str(rep)
            run_dir.mkdir(parents=True)
            (run_dir / "spec.json").write_text(json.dumps({"started_at_us": T0_US}))
            complete = status == "complete"
            counts = {**dict.fromkeys(COUNT_NAMES, 0), "sent": acked, "acked": acked}
            results.append(
                RunResult(
                    run_dir=str(run_dir),
                    experiment="generated",
                    cell=f"cell{c}-acks{acks}-{version}-{mode}",
                    repetition=rep,
                    config=config,
                    axes={"acks": acks},
                    status=RunStatus.COMPLETE if complete else RunStatus.ERROR,
                    error=None if complete else "OSError: generated",
                    counts=counts | {"lost": loss} if complete else None,
                    loss=loss if complete else None,
                )
            )
    return results


def _healthy_events(result: RunResult) -> list[dict]:
    """A complete read-back and a tally agreeing with the journal."""
    acked = (result.counts or {}).get("acked", 0)
    return [
        {"type": "readback", "ts_us": T0_US, "complete": True, "high_watermarks": {}},
        {"type": "recorder_tally", "ts_us": T0_US, "journal_error": None,
         "reports": {"ok": acked, "failed": 0, "indeterminate": 0}},
    ]  # fmt: skip


# A whole report per example (matplotlib draws each chart): a tenth of the profile's budget.
@settings(max_examples=max(10, settings.default.max_examples // 10))
@given(st.lists(CELL, min_size=0, max_size=4))
@example([("all", "4.3.1", "kraft", [("complete", 10, 10)] * 4)])  # 4 of 4 lost
@example([("1", "3.9.1", "zookeeper", [("complete", 10, 0)] * 69)])  # 0 of 69 lost
@example([("all", "4.3.1", "kraft", [("error", 0, 0)] * 3)])  # every repetition errored
@example([("0", "0.10.2.2", "zookeeper", [("complete", 0, 0)])])  # nothing acknowledged
@example([("1", "3.9.1", "kraft", [("complete", 1, 0), ("complete", 1, 0), ("complete", 1, 1)])])
def test_every_generated_report_renders_in_full(cells: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = _results(root / "runs", cells)
        events = {r.run_dir: _healthy_events(r) for r in results}
        judged = judge_all(results, events)
        summary = cross_run_summary(results, judged)
        paths = render_report(judged, results, events, [], root / "report", "t", summary)
        assert paths.failures == ()
        html = paths.html.read_text()
        assert 'class="part-failed"' not in html
        assert json.loads(paths.json.read_text())
        assert paths.markdown.read_text().startswith("#")
    for group in summary.groups:
        interval, p = group.interval, group.loss_probability
        assert 0.0 <= interval.low <= (p if p is not None else 0.0) <= interval.high <= 1.0
    for point, group in zip(
        loss_probability_points(summary),
        [g for g in summary.groups if g.loss_probability is not None],
        strict=True,
    ):
        assert group.loss_probability == group.lossy / group.counted
        assert point.percent == 100 * group.loss_probability
        assert (point.low, point.high) == (100 * group.interval.low, 100 * group.interval.high)
        assert point.low <= point.percent <= point.high


def test_four_of_four_lost_plots_its_dot_at_100_with_the_bar_ending_there(tmp_path: Path) -> None:
    cells = [("all", "4.3.1", "kraft", [("complete", 10, 10)] * 4)]
    results = _results(tmp_path, cells)
    judged = judge_all(results, {r.run_dir: _healthy_events(r) for r in results})
    (point,) = loss_probability_points(cross_run_summary(results, judged))
    assert (point.percent, point.high, point.lossy, point.counted) == (100.0, 100.0, 4, 4)
    assert 0 < point.low < 100


def test_thousands_of_cells_render(tmp_path: Path) -> None:
    cells = [
        (("1", "all")[i % 2], ("3.9.1", "4.3.1")[i % 3 == 0], "kraft", [("complete", 5, i % 2)])
        for i in range(2000)
    ]
    results = _results(tmp_path / "runs", cells)
    events = {r.run_dir: _healthy_events(r) for r in results}
    judged = judge_all(results, events)
    summary = cross_run_summary(results, judged)
    paths = render_report(judged, results, events, [], tmp_path / "report", "t", summary)
    assert paths.failures == ()
    assert paths.html.read_text().count('<section class="cell') == 2000


def test_a_part_that_fails_shows_its_error_in_place_and_the_rest_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args, **_kwargs):
        raise ValueError("'xerr' must not contain negative values")

    monkeypatch.setattr(charts, "loss_probability_svg", broken)
    from analysis.report import html as html_module

    monkeypatch.setattr(html_module, "loss_probability_svg", broken)
    cells = [("all", "4.3.1", "kraft", [("complete", 10, 10)] * 4)]
    results = _results(tmp_path / "runs", cells)
    events = {r.run_dir: _healthy_events(r) for r in results}
    judged = judge_all(results, events)
    summary = cross_run_summary(results, judged)
    paths = render_report(judged, results, events, [], tmp_path / "report", "t", summary)
    html = paths.html.read_text()
    assert "the loss probability chart could not be drawn" in html
    assert "ValueError: &#39;xerr&#39; must not contain negative values" in html
    assert 'id="summary"' in html and '<section class="cell' in html  # the rest stands
    assert paths.failures == ()  # the page itself rendered
    assert json.loads(paths.json.read_text())["cells"]


def test_a_rendering_that_fails_is_written_as_a_stub_naming_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analysis.report import render

    def broken(*_args, **_kwargs):
        raise RuntimeError("markdown broke")

    monkeypatch.setattr(render, "render_markdown", broken)
    cells = [("1", "3.9.1", "kraft", [("complete", 10, 1)])]
    results = _results(tmp_path / "runs", cells)
    events = {r.run_dir: _healthy_events(r) for r in results}
    judged = judge_all(results, events)
    paths = render_report(judged, results, events, [], tmp_path / "report", "t", None)
    assert [f.part for f in paths.failures] == ["report.md"]
    assert "RuntimeError: markdown broke" in paths.markdown.read_text()
    assert '<section class="cell' in paths.html.read_text()
    assert json.loads(paths.json.read_text())["cells"]
