"""A repetition's price of safety, the matrix row and the cell's view, as the report words them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from analysis.report import views
from analysis.report.matrix import MatrixValue
from tests.unit.report_runs import AP, CP, judge_all, result

# ---------------------------------------------------------------------------------------------
# A repetition's price of safety, the matrix row, the cell's view


def _priced_run(availability: Any, **changes: Any) -> Any:
    from tests.unit.results_json import typed

    return replace(typed(result("c", CP, 0)), availability=availability, **changes)


def test_the_price_sentence_reads_times_on_the_timelines_clock() -> None:
    from analysis.model.availability import (
        Availability,
        FaultLatency,
        Gap,
        HealRecovery,
        Latency,
        PartitionAvailability,
    )
    from analysis.report.matrix import availability_text
    from tests.unit.report_runs import us

    availability = Availability(
        workload_start_us=us(0),
        workload_end_us=us(20),
        window_from_events=True,
        ok=10,
        failed=1234,
        indeterminate=5678,
        failed_without_partition=0,
        indeterminate_without_partition=0,
        longest_gap=Gap(us(3), us(5.5), 3.0, 5.5),
        partitions=(
            PartitionAvailability(0, 5, 0, 0, Gap(us(2), us(3), 2.0, 3.0)),
            PartitionAvailability(1, 5, 0, 0, Gap(us(6), us(9.55), 6.0, 9.55)),
        ),
        heals=(
            HealRecovery(1, "pause", us(4), 4.0, True, 0.25, {0: 0.25, 1: 2.5}),
            HealRecovery(2, "pause", us(7), 7.0, True, 0.5, {0: 0.5, 1: None}),
            HealRecovery(3, "pause", us(8), 8.0, True, None, {0: None, 1: None}),
            HealRecovery(4, "pause", us(30), 30.0, False, 0.1, {0: 0.1, 1: 0.2}),
        ),
        fault_latency=(
            FaultLatency(1, "pause", us(2), us(4), Latency(3, 1234.4, 5678.6)),
            FaultLatency(2, "kill", us(6), us(7), Latency(0, None, None)),
        ),
        latency_outside_faults=Latency(9, 4.0, 12.0),
    )
    run = _priced_run(availability)
    assert availability_text(run, []) == (
        "price of safety: longest stall of one partition 3.5 s (partition 1, t=6.0–9.6 s); "
        "no partition acknowledged anything for 2.5 s (t=3.0–5.5 s); 1,234 failed and 5,678 "
        "indeterminate sends; after the heal at t=4.0 s the first ack came after 0.2 s, every "
        "partition after 2.5 s; after the heal at t=7.0 s the first ack came after 0.5 s, some "
        "partition never again before the workload ended; after the heal at t=8.0 s no send was "
        "acknowledged before the workload ended; sends during pause (fault 1) acked in p50 1,234 "
        "ms, p99 5,679 ms; outside every fault in p50 4 ms, p99 12 ms"
    )
    quiet = replace(
        availability,
        longest_gap=None,
        partitions=(),
        heals=(),
        latency_outside_faults=Latency(0, None, None),
    )
    assert availability_text(_priced_run(quiet), []) == (
        "price of safety: 1,234 failed and 5,678 indeterminate sends; sends during pause (fault "
        "1) acked in p50 1,234 ms, p99 5,679 ms"
    )
    no_outside = replace(quiet, latency_outside_faults=None)
    assert availability_text(_priced_run(no_outside), []) == (
        "price of safety: 1,234 failed and 5,678 indeterminate sends"
    )
    # Without a timeline the clock starts at the first event.
    untimed = _priced_run(quiet, timeline=())
    events = [{"type": "phase", "ts_us": us(2)}, {"type": "phase", "ts_us": us(1)}]
    text = availability_text(
        replace(untimed, availability=replace(quiet, heals=availability.heals[:1])), events
    )
    assert "after the heal at t=3.0 s the first ack" in (text or "")
    assert availability_text(None, []) is None
    unmeasured = _priced_run(None, availability_error="AvailabilityError: x")
    assert availability_text(unmeasured, []) == "price of safety not measured: AvailabilityError: x"
    assert availability_text(_priced_run(None), []) == "price of safety not measured: no figures"


def test_a_matrix_row_flags_loss_and_anomalies_by_how_serious() -> None:
    from analysis.report.matrix import MATRIX_COUNTS, matrix_counts, matrix_row

    raws = [result("c", AP, 0, lost=2, moved=1), result("c", AP, 1, lost=4, moved=0)]
    (cell,) = judge_all(raws, {})
    row = matrix_row(cell)
    by_name = dict(zip([n for n in MATRIX_COUNTS if n != "loss"], row.values, strict=True))
    assert by_name["sent"] == MatrixValue("2,000", "", "")
    assert by_name["acked"] == MatrixValue("1,900", "", "")
    assert row.loss == MatrixValue("3", "2–4", "serious")
    assert by_name["lost"] == MatrixValue("3", "2–4", "serious")
    assert by_name["moved"] == MatrixValue("0.5", "0–1", "notable")
    assert by_name["unseen"] == MatrixValue("0", "", "")
    assert (row.slug, row.cell, row.experiment) == ("cell-chaos-c", "c", "chaos")
    assert row.config == tuple(views.config_parts(cell.config))
    assert (row.loss_rate, row.repetitions, row.verdict, row.css) == (
        "0.158 %",
        2,
        cell.verdict.value,
        views.css_class(cell.verdict),
    )
    assert row.price == ()
    columns = matrix_counts([cell])
    assert columns.shown == ("sent", "acked", "lost", "moved")
    assert set(columns.folded) == set(MATRIX_COUNTS) - {"sent", "acked", "loss", "lost", "moved"}
    shown = matrix_row(cell, None, columns.shown)
    assert shown.values == (by_name["sent"], by_name["acked"], by_name["lost"], by_name["moved"])
    priced_row = matrix_row(cell, {})
    assert priced_row.price == (
        MatrixValue("—", "0 of 2 reps", ""),
        MatrixValue("—", "", ""),
        MatrixValue("—", "", ""),
        MatrixValue("—", "", ""),
    )
    bare = {**result("b", AP, 0), "counts": None, "status": "incomplete"}
    (unknown,) = judge_all([bare], {})
    assert {v.text for v in matrix_row(unknown).values} == {"—"}
    assert {v.level for v in matrix_row(unknown).values} == {""}


def test_the_price_of_a_cell_says_why_each_repetition_was_not_measured() -> None:
    from analysis.report.matrix import price_of
    from tests.unit.results_json import typed

    raws = [result("c", CP, rep) for rep in range(3)]
    (cell,) = judge_all(raws, {})
    results = {
        raws[0]["run_dir"]: replace(typed(raws[0]), availability_error="AvailabilityError: a"),
        raws[1]["run_dir"]: typed(raws[1]),
    }
    price = price_of(cell, results)
    assert price.unmeasured == (
        "repetition 0: AvailabilityError: a",
        "repetition 1: not measured",
        "repetition 2: not measured",
    )
    assert (price.measured, price.repetitions) == (0, 3)


def test_a_fault_window_is_labelled_with_what_was_done_to_whom() -> None:
    from analysis.report.marks import FaultWindow, fault_windows

    def start(fault_id: int, ts: int | None, nodes: list[int], **more: Any) -> dict[str, Any]:
        event = {"type": "fault_start", "fault_id": fault_id, "nodes": nodes, "detail": {}}
        return event | ({"ts_us": ts} if ts is not None else {}) | more

    events = [
        start(2, 50, [1, 3], fault="kill", target="followers"),
        {"type": "fault_end", "fault_id": 2, "ts_us": 70, "fault": "kill"},
        start(1, 10, [2], fault="pause", target="leader"),
        start(3, None, []),
        {"type": "fault_end", "fault_id": 3, "fault": "x"},
    ]
    assert fault_windows(events) == [
        FaultWindow("", "", (), 0, 0),
        FaultWindow("pause", "leader", (2,), 10, None),
        FaultWindow("kill", "followers", (1, 3), 50, 70),
    ]
    labels = [w.label for w in fault_windows(events)]
    assert labels == ["", "pause leader (node 2)", "kill followers (nodes 1, 3)"]
    assert FaultWindow("kill", "", (4,), 0, None).label == "kill  (node 4)"
    assert FaultWindow("partition", "all", (), 0, None).label == "partition all"


def test_a_failed_part_reads_as_a_note_in_text_and_html() -> None:
    from pathlib import Path

    from analysis.report.safe import PartFailure, safely

    failure = safely("the chart <x>", lambda: 1 / 0)
    assert failure == PartFailure("the chart <x>", "ZeroDivisionError: division by zero")
    assert str(failure) == (
        "the chart <x> failed: ZeroDivisionError: division by zero (the rest of the report stands)"
    )
    assert failure.__html__() == (
        '<p class="part-failed">the chart &lt;x&gt; failed: ZeroDivisionError: division by zero '
        "(the rest of the report stands)</p>"
    )
    assert failure.failed is True
    unwritten = safely("report.md", lambda: 1 / 0, Path("/r/report.md"))
    assert str(unwritten) == (
        "report.md could not be written to /r/report.md (ZeroDivisionError: division by zero)"
    )
    assert safely("fine", lambda: "built") == "built"


def test_a_cells_view_shows_each_repetition_with_its_examples_and_guarantee() -> None:
    from analysis.judge.guarantees import ALLOWED, FORBIDDEN
    from analysis.model.results import Example
    from analysis.report.cells import GuaranteeView, cell_view, guarantee_view
    from tests.unit.report_runs import events_with_fault_and_leader_change
    from tests.unit.results_json import typed

    raws = [
        {**result("c", AP, 0, lost=2), "timeline": []},
        {**result("c", AP, 1), "timeline": []},
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in raws}
    (cell,) = judge_all(raws, events)
    results = {r["run_dir"]: typed(r) for r in raws}
    many = tuple(Example(msg_id=i, partition=None, offset=None) for i in range(25))
    first = results[raws[0]["run_dir"]]
    examples = {
        "unseen": many,
        "lost": first.examples["lost"],
        "offset_divergent": (
            Example(msg_id=9, partition=1, offset=2, readback_msg_id_at_offset=3),
        ),
        "duplicated": (Example(msg_id=5, partition=0, offset=1),),
    }
    results[raws[0]["run_dir"]] = replace(first, examples=examples)
    view = cell_view(cell, results, events)
    assert (view.slug, view.cell, view.experiment, view.verdict) == (
        "cell-chaos-c",
        "c",
        "chaos",
        cell.verdict.value,
    )
    assert view.config == views.config_summary(cell.config)
    assert view.css == views.css_class(cell.verdict)
    assert view.reasons == cell.reasons
    lost_rep, clean_rep = view.repetitions
    assert (lost_rep.repetition, lost_rep.run_dir) == (0, raws[0]["run_dir"])
    assert lost_rep.verdict == cell.repetitions[0].verdict.value
    assert lost_rep.css == views.css_class(cell.repetitions[0].verdict)
    assert view.repetitions[1].css == views.css_class(cell.repetitions[1].verdict)
    assert lost_rep.reasons == cell.repetitions[0].reasons
    assert lost_rep.faults == ("kill leader (node 1)",)
    assert lost_rep.timeline is None and not lost_rep.timeline_skipped  # no timeline recorded
    assert lost_rep.sensitivity is not None and lost_rep.sensitivity.startswith(
        "sensitivity check passed: 5 of 5"
    )
    assert lost_rep.attribution is not None and lost_rep.attribution.text.startswith(
        "where the 2 missing acknowledged messages are: 1 on no broker's disk"
    )
    assert lost_rep.availability == "price of safety not measured: no figures"
    assert (lost_rep.client, lost_rep.members) == (None, None)
    rows = [(r.cls, r.msg_id, r.partition, r.offset, r.readback) for r in lost_rep.examples]
    assert rows == [
        ("lost", 1000, 0, 500, "—"),
        ("lost", 1001, 0, 501, "—"),
        *[("unseen", i, "—", "—", "—") for i in range(20)],
        ("offset-divergent", 9, 1, 2, 3),
    ]
    assert clean_rep.examples == () and clean_rep.attribution is None
    assert guarantee_view(None) is None
    assert cell.guarantee is not None
    g = replace(cell.guarantee, loss=FORBIDDEN, duplicates=ALLOWED, order="guaranteed")
    assert guarantee_view(g) == GuaranteeView(
        chips=(
            ("loss", FORBIDDEN, True),
            ("duplicates", ALLOWED, False),
            ("order", "guaranteed", True),
        ),
        citations=(g.citation, g.duplicates_citation, g.order_citation),
    )
    loose = replace(g, loss=ALLOWED, duplicates=FORBIDDEN, order="not-guaranteed")
    assert [chip[2] for chip in guarantee_view(loose).chips] == [False, True, False]


def test_a_cell_draws_the_repetitions_not_passing_then_the_most_lossy() -> None:
    from analysis.judge.outcomes import Verdict as V
    from analysis.report.cells import _worth_drawing
    from tests.unit.results_json import typed

    raws = [result("c", AP, rep, lost=[0, 0, 7, 0, 3, 0, 9, 0][rep]) for rep in range(8)]
    (cell,) = judge_all(raws, {})
    verdicts = [V.PASS, V.PASS, V.PASS, V.VIOLATION, V.PASS, V.PASS, V.PASS, V.PASS]
    reps = tuple(replace(r, verdict=v) for r, v in zip(cell.repetitions, verdicts, strict=True))
    cell = replace(cell, repetitions=reps)
    results = {r["run_dir"]: typed(r) for r in raws}
    drawn = _worth_drawing(cell, results)
    assert drawn == {raws[i]["run_dir"] for i in (3, 6, 2, 4, 0)}
    assert _worth_drawing(cell, {}) == {raws[i]["run_dir"] for i in (3, 0, 1, 2, 4)}


def test_a_failed_part_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from analysis.report.safe import safely

    with caplog.at_level(logging.ERROR, logger="kafka_chaos.report"):
        safely("the chart", lambda: 1 / 0)
    (record,) = caplog.records
    assert record.getMessage() == "report part the chart failed"
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


CLIENT_EVENT = {
    "type": "client_config",
    "client": "librdkafka 2.12.1",
    "config": {"linger.ms": "5", "acks": "all"},
    "idempotent": True,
}
GROUP_EVENT = {
    "type": "consumers",
    "client": "java 3.8.0",
    "config": {"x": "y", "isolation.level": "read_committed"},
}


def test_a_repetitions_view_names_its_clients_and_stands_without_its_result() -> None:
    """Each repetition's view says which producer and group settings it ran with (from its
    events), reads its price of safety on the events' clock when it has no timeline, and a
    repetition whose result is missing shows no figures instead of failing the cell."""
    from analysis.report.cells import cell_view
    from tests.unit.report_runs import events_with_fault_and_leader_change, priced
    from tests.unit.results_json import typed

    raws = [{**result("c", CP, rep), "timeline": []} for rep in range(2)]
    run_events = [*events_with_fault_and_leader_change(), CLIENT_EVENT, GROUP_EVENT]
    events = {r["run_dir"]: run_events for r in raws}
    (cell,) = judge_all(raws, events)
    measured = priced(typed(raws[0]), 3.0, 40, 1.5)  # times from t=8 on the events' clock
    view = cell_view(cell, {raws[0]["run_dir"]: measured}, events)
    for rep in view.repetitions:
        assert rep.client == "librdkafka 2.12.1 ran with acks=all, linger.ms=5 (idempotent: True)"
        assert rep.members == (
            "the group's members (java 3.8.0) ran with isolation.level=read_committed"
        )
        assert rep.faults == ("kill leader (node 1)",)
    with_result, without = view.repetitions
    assert with_result.availability == (
        "price of safety: longest stall of one partition 3.0 s (partition 0, t=8.0–11.0 s); "
        "no partition acknowledged anything for 1.5 s (t=8.0–9.5 s); 40 failed and 60 "
        "indeterminate sends; after the heal at t=12.0 s the first ack came after 0.0 s, every "
        "partition after 1.5 s"
    )
    assert with_result.sensitivity is not None and with_result.attribution is None
    assert (without.repetition, without.verdict) == (1, cell.repetitions[1].verdict.value)
    shown = (without.timeline, without.sensitivity, without.attribution, without.availability)
    assert shown == (None, None, None, None)
    assert without.examples == ()


def test_a_repetition_without_a_result_ranks_as_losing_nothing() -> None:
    """Among passing repetitions that lost nothing, a missing result counts as no loss, like a
    result of loss 0 or of no loss figure: the lowest repetition numbers are drawn first."""
    from analysis.judge.outcomes import Verdict
    from analysis.report.cells import MAX_TIMELINES_PER_CELL, _worth_drawing
    from tests.unit.results_json import typed

    raws = [result("c", CP, rep) for rep in range(MAX_TIMELINES_PER_CELL + 1)]
    (cell,) = judge_all(raws, {})
    passing = tuple(replace(r, verdict=Verdict.PASS) for r in cell.repetitions)
    cell = replace(cell, repetitions=passing)
    first = {r["run_dir"] for r in raws[:MAX_TIMELINES_PER_CELL]}
    last = raws[-1]["run_dir"]
    no_figure = replace(typed(raws[-1]), loss=None)
    assert _worth_drawing(cell, {last: typed(raws[-1])}) == first  # the last one has loss 0
    assert _worth_drawing(cell, {last: no_figure}) == first
    earlier = {r["run_dir"]: typed(r) for r in raws[:MAX_TIMELINES_PER_CELL]}
    assert _worth_drawing(cell, earlier) == first  # the last one has no result
