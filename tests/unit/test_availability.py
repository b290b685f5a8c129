"""The price of safety measured on hand-made acked.parquet and events.jsonl; no Docker."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.checks.availability import availability_of, price_of_safety
from analysis.crossrun.price import cell_price
from analysis.model.availability import Availability, AvailabilityError
from analysis.model.evidence import RunEvidence
from analysis.model.results import RunResult, RunStatus
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.records import ACKED_SCHEMA

T0_US = 1_700_000_000_000_000
S = 1_000_000  # µs in a second


def row(msg_id: int, status: str, partition: int | None, ack_s: float | None) -> dict[str, Any]:
    """An acked.parquet row acknowledged (or failed) `ack_s` seconds after T0."""
    ack = None if ack_s is None else T0_US + int(ack_s * S)
    return {
        "msg_id": msg_id,
        "key": f"k{msg_id}",
        "key_seq": 0,
        "status": status,
        "partition": partition,
        "offset": msg_id if status == "ok" else None,
        "error": None if status == "ok" else "timed out",
        "send_ts_us": (ack or T0_US) - 1000,
        "ack_ts_us": ack,
    }


def ok(msg_id: int, partition: int, ack_s: float) -> dict[str, Any]:
    return row(msg_id, "ok", partition, ack_s)


def phase(name: str, t_s: float) -> dict[str, Any]:
    return {"type": "phase", "phase": name, "ts_us": T0_US + int(t_s * S)}


def heal(fault_id: int, t_s: float) -> dict[str, Any]:
    return {
        "type": "fault_end",
        "fault_id": fault_id,
        "fault": "kill",
        "nodes": [1],
        "ts_us": T0_US + int(t_s * S),
    }


def window(start_s: float = 0.0, end_s: float = 20.0) -> list[dict[str, Any]]:
    return [phase("workload-start", start_s), phase("workload-end", end_s)]


def run_dir(tmp_path: Path, rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> Path:
    """A run directory holding just acked.parquet and events.jsonl."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=ACKED_SCHEMA), tmp_path / layout.ACKED)
    lines = "".join(json.dumps(e) + "\n" for e in events)
    (tmp_path / layout.EVENTS).write_text(lines)
    return tmp_path


def measured(tmp_path: Path, rows: list[dict[str, Any]], events: list[dict[str, Any]]):
    return availability_of(RunEvidence.read(run_dir(tmp_path, rows, events)))


def gap_of(availability: Availability, partition: int | None = None) -> tuple[float, ...]:
    """(seconds, start_s, end_s) of the whole-run gap or of one partition's."""
    if partition is None:
        gap = availability.longest_gap
    else:
        [gap] = [p.longest_gap for p in availability.partitions if p.partition == partition]
    assert gap is not None
    return (round(gap.seconds, 6), round(gap.start_s, 6), round(gap.end_s, 6))


def test_a_gap_in_the_middle(tmp_path: Path) -> None:
    rows = [ok(i, 0, t) for i, t in enumerate([0.5, 1.0, 1.5, 9.5, 10.0, 11.0])]
    a = measured(tmp_path, rows, window(0.0, 12.0))
    assert gap_of(a) == gap_of(a, 0) == (8.0, 1.5, 9.5)
    assert a.window_from_events and a.workload_start_us == T0_US
    assert a.workload_end_us == T0_US + 12 * S


def test_a_gap_at_the_start_counts_from_the_workload_start(tmp_path: Path) -> None:
    rows = [ok(i, 0, t) for i, t in enumerate([6.0, 7.0, 8.0])]
    a = measured(tmp_path, rows, window(0.0, 9.0))
    assert gap_of(a) == (6.0, 0.0, 6.0)


def test_a_gap_at_the_end_counts_to_the_workload_end(tmp_path: Path) -> None:
    rows = [ok(i, 0, t) for i, t in enumerate([0.5, 1.0, 2.0])]
    a = measured(tmp_path, rows, window(0.0, 12.0))
    assert gap_of(a) == (10.0, 2.0, 12.0)


def test_partitions_have_their_own_gaps_and_the_run_merges_them(tmp_path: Path) -> None:
    # p0 stalls from 2 to 12 while p1 keeps acking every second: the topic never stalls long.
    rows = [ok(i, 0, t) for i, t in enumerate([1.0, 2.0, 12.0, 13.0])]
    rows += [ok(100 + t, 1, float(t)) for t in range(0, 15)]
    rows += [ok(200, 2, 7.0)]
    a = measured(tmp_path, rows, window(0.0, 14.0))
    assert [p.partition for p in a.partitions] == [0, 1, 2]
    assert gap_of(a, 0) == (10.0, 2.0, 12.0)
    assert gap_of(a, 1) == (1.0, 0.0, 1.0)  # the first of equal gaps
    assert gap_of(a, 2) == (7.0, 0.0, 7.0)  # 0 to 7 and 7 to the end tie: the first
    assert gap_of(a) == (1.0, 0.0, 1.0)  # some partition acked every second
    worst = a.longest_partition_gap
    assert worst is not None and worst.partition == 0
    assert [p.ok for p in a.partitions] == [4, 15, 1]


def test_failed_and_indeterminate_sends_are_counted_per_partition_and_without_one(
    tmp_path: Path,
) -> None:
    rows = [
        ok(0, 0, 1.0),
        row(1, "failed", 0, 2.0),
        row(2, "failed", 1, 2.0),
        row(3, "failed", None, None),
        row(4, "failed", -1, 2.5),  # librdkafka's "unassigned" partition: none
        row(5, "indeterminate", 1, 3.0),
        row(6, "indeterminate", None, None),
        row(7, "indeterminate", None, None),
        ok(8, 1, 4.0),
    ]
    a = measured(tmp_path, rows, window(0.0, 5.0))
    assert (a.ok, a.failed, a.indeterminate) == (2, 4, 3)
    assert (a.failed_without_partition, a.indeterminate_without_partition) == (2, 2)
    by = {p.partition: (p.ok, p.failed, p.indeterminate) for p in a.partitions}
    assert by == {0: (1, 1, 0), 1: (1, 1, 1)}
    # Failed sends are not acknowledged: p1's gap runs from the start to its only ack at 4.
    assert gap_of(a, 1) == (4.0, 0.0, 4.0)


def test_a_partition_that_never_acknowledged_stalls_for_the_whole_window(
    tmp_path: Path,
) -> None:
    rows = [ok(0, 0, 1.0), row(1, "failed", 1, 2.0)]
    a = measured(tmp_path, rows, window(0.0, 8.0))
    assert gap_of(a, 1) == (8.0, 0.0, 8.0)
    assert a.partitions[1].ok == 0


def test_first_ack_after_each_heal_overall_and_per_partition(tmp_path: Path) -> None:
    rows = [ok(i, 0, t) for i, t in enumerate([1.0, 5.5, 9.0])]
    rows += [ok(10 + i, 1, t) for i, t in enumerate([1.0, 7.0])]
    events = [*window(0.0, 10.0), heal(2, 8.0), heal(1, 5.0)]
    a = measured(tmp_path, rows, events)
    first, second = a.heals
    assert (first.fault_id, first.heal_s, first.during_workload) == (1, 5.0, True)
    assert first.first_ack_s == pytest.approx(0.5)
    assert first.first_ack_by_partition == pytest.approx({0: 0.5, 1: 2.0})
    assert first.every_partition_s == pytest.approx(2.0)
    # After the second heal p0 acks at 9 and p1 never again: no time for every partition.
    assert second.first_ack_s == pytest.approx(1.0)
    assert second.first_ack_by_partition == {0: pytest.approx(1.0), 1: None}
    assert second.every_partition_s is None


def test_a_heal_followed_by_no_ack_has_no_recovery_time(tmp_path: Path) -> None:
    rows = [ok(0, 0, 1.0), ok(1, 0, 2.0)]
    events = [*window(0.0, 10.0), heal(1, 3.0), heal(2, 11.0)]
    a = measured(tmp_path, rows, events)
    during, after = a.heals
    assert (during.first_ack_s, during.every_partition_s, during.during_workload) == (
        None,
        None,
        True,
    )
    assert after.during_workload is False  # the final heal after the workload ended
    assert gap_of(a) == (8.0, 2.0, 10.0)


def test_an_empty_journal_stalls_for_the_whole_window(tmp_path: Path) -> None:
    a = measured(tmp_path, [], [*window(0.0, 4.0), heal(1, 2.0)])
    assert gap_of(a) == (4.0, 0.0, 4.0)
    assert a.partitions == () and (a.ok, a.failed, a.indeterminate) == (0, 0, 0)
    [h] = a.heals
    assert h.first_ack_s is None and h.first_ack_by_partition == {}


def test_without_events_the_window_comes_from_the_rows(tmp_path: Path) -> None:
    rows = [ok(0, 0, 1.0), ok(1, 0, 4.0), ok(2, 0, 5.0)]
    a = measured(tmp_path, rows, [])
    assert not a.window_from_events
    assert a.workload_start_us == rows[0]["send_ts_us"]  # the first send
    assert a.workload_end_us == T0_US + 5 * S  # the last ack
    assert a.longest_gap is not None and a.longest_gap.seconds == pytest.approx(3.0)
    assert a.heals == ()


def test_nothing_at_all_has_no_window_and_no_gap(tmp_path: Path) -> None:
    a = measured(tmp_path, [], [])
    assert a.longest_gap is None and a.workload_start_us is None
    assert a.as_json()["longest_gap_s"] is None


def test_missing_or_unreadable_acked_parquet_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(AvailabilityError, match=r"no acked\.parquet"):
        availability_of(RunEvidence.read(tmp_path))
    (tmp_path / layout.ACKED).write_bytes(b"not parquet")
    with pytest.raises(AvailabilityError, match=r"acked\.parquet cannot be read"):
        availability_of(RunEvidence.read(tmp_path))


def test_the_pipeline_never_crashes_on_an_unmeasurable_run(tmp_path: Path) -> None:
    availability, error = price_of_safety(RunEvidence.read(tmp_path))
    assert availability is None
    assert error is not None and "no acked.parquet" in error
    result = RunResult(
        run_dir=str(tmp_path),
        experiment="e",
        cell="c",
        repetition=0,
        config=CellConfig(),
        axes={},
        status=RunStatus.ERROR,
        availability_error=error,
    )
    assert result.as_json()["availability_error"] == error
    run_dir(tmp_path, [ok(0, 0, 1.0)], window(0.0, 2.0))
    availability, error = price_of_safety(RunEvidence.read(tmp_path))
    assert availability is not None and error is None


def test_results_json_form(tmp_path: Path) -> None:
    rows = [ok(0, 0, 1.0), ok(1, 1, 2.0), row(2, "failed", 1, 2.5)]
    a = measured(tmp_path, rows, [*window(0.0, 3.0), heal(7, 1.5)])
    data = json.loads(json.dumps(a.as_json()))
    assert data["longest_gap_s"] == pytest.approx(1.0)
    assert data["longest_partition_gap_s"] == pytest.approx(2.0)
    assert data["partitions"]["0"]["longest_gap_s"] == pytest.approx(2.0)
    assert data["partitions"]["0"]["longest_gap"]["start_s"] == pytest.approx(1.0)
    assert data["partitions"]["1"]["failed"] == 1
    assert data["heals"][0]["fault_id"] == 7
    assert data["heals"][0]["first_ack_by_partition"] == {"0": None, "1": pytest.approx(0.5)}


def test_a_cell_folds_maxima_and_sums_over_its_repetitions(tmp_path: Path) -> None:
    calm = measured(tmp_path / "a", [ok(0, 0, 1.0), ok(1, 0, 2.0)], window(0.0, 3.0))
    rows = [ok(0, 0, 1.0), ok(1, 1, 1.5), row(2, "failed", 0, 2.0), ok(3, 0, 8.0)]
    rows.append(row(4, "indeterminate", None, None))
    stalled = measured(tmp_path / "b", rows, [*window(0.0, 9.0), heal(1, 7.0), heal(2, 9.5)])
    price = cell_price([calm, stalled, None], ["run 2: no acked.parquet"])
    assert (price.measured, price.repetitions) == (2, 3)
    assert price.longest_partition_gap_s == pytest.approx(7.5)  # p1: 1.5 to the end at 9
    assert price.longest_gap_s == pytest.approx(6.5)  # no ack between 1.5 and 8
    assert (price.failed, price.indeterminate) == (1, 1)
    # After the heal at 7 p0 acks at 8, p1 never: no recovery figure, one heal without an ack.
    assert price.first_ack_after_heal_s is None and price.heals_without_ack == 1
    recovered = replace(
        stalled, heals=(replace(stalled.heals[0], first_ack_by_partition={0: 1.0}),)
    )
    assert cell_price([recovered]).first_ack_after_heal_s == 1.0
    nothing = cell_price([None])
    assert nothing.longest_gap_s is None and nothing.failed is None and nothing.measured == 0


def test_the_json_forms_key_the_send_counts_by_status(tmp_path: Path) -> None:
    """The typed results.json forms spell the send counts as Status spells them (ok, failed,
    indeterminate), for the run and for each partition."""
    from analysis.model.availability import AvailabilityJson, PartitionAvailabilityJson
    from harness.rundir.records import STATUSES

    for form in (AvailabilityJson, PartitionAvailabilityJson):
        assert set(STATUSES) <= set(form.__annotations__)
    data = Availability(1, 2, True, 3, 4, 5, 0, 0, None).as_json()
    assert [data[s] for s in STATUSES] == [3, 4, 5]
