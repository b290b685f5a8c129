"""The group's liveness on the report's timeline: the seconds a partition was stuck as a band,
each reset as a labelled diamond, both in the legend; absent from a run without them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from analysis.model.results import RunResult, TimelineSecond
from analysis.report import charts
from tests.unit.report_runs import CP, T0_S, result
from tests.unit.results_json import typed


def _run(rows: list[dict[str, Any]]) -> RunResult:
    seconds = tuple(
        TimelineSecond(t_s=i, epoch_s=int(T0_S) + i, sent=10, ok=10, **row)
        for i, row in enumerate(rows)
    )
    return replace(typed(result("c", CP, 0)), timeline=seconds, availability=None)


def test_stuck_seconds_and_a_reset_are_drawn_and_named() -> None:
    rows: list[dict[str, Any]] = [{}, {"stuck": 1}, {"stuck": 2}, {"reset": 40}, {}]
    svg = charts.timeline_svg(_run(rows), [], "cell-l-0")
    assert svg is not None
    assert "group stuck (a partition)" in svg and "group reset below its commit" in svg
    assert "reset: 40 read again" in svg


def test_a_run_without_liveness_anomalies_has_no_such_marks() -> None:
    svg = charts.timeline_svg(_run([{}, {}, {}]), [], "cell-l-1")
    assert svg is not None
    assert "group stuck" not in svg and "read again" not in svg
