"""Reconciliation of tiny hand-made run directories, one per anomaly class."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from analysis.engine.reconcile import (
    find_runs,
    reconcile,
    reconcile_in_process,
    write_results,
)
from analysis.model.anomalies import ANOMALY_NAMES
from analysis.model.attribution import MissingMessage
from analysis.model.results import Example, RunResult, RunStatus
from harness.rundir.events import load_events
from harness.rundir.layout import segments_dir
from harness.rundir.records import ACKED_SCHEMA, READBACK_SCHEMA
from kafka_chaos.cli import main
from kafka_chaos.commands.reconcile import cell_table
from tests.unit.kafka_bytes import full_batch, value_of

T0_US = 1_700_000_000_000_000
# The schemas the harness writes: the fixtures must look like real run directories.
ACKED = ACKED_SCHEMA
READBACK = READBACK_SCHEMA
ZERO = dict.fromkeys(ANOMALY_NAMES, 0)


def sent(
    msg_id: int,
    offset: int | None,
    *,
    partition: int | None = 0,
    status: str = "ok",
    key: str | None = None,
    key_seq: int | None = 0,
    send_us: int | None = None,
    latency_us: int = 500,
) -> dict:
    """An acked.parquet row; each message has its own key unless told."""
    send_ts = T0_US + msg_id * 1000 if send_us is None else send_us
    return {
        "msg_id": msg_id,
        "key": key or f"k{msg_id}",
        "key_seq": key_seq,
        "status": status,
        "partition": partition,
        "offset": offset,
        "error": None if status == "ok" else "timed out",
        "send_ts_us": send_ts,
        "ack_ts_us": send_ts + latency_us if status == "ok" else None,
    }


def read(
    msg_id: int | None,
    offset: int,
    *,
    partition: int = 0,
    key: str | None = None,
    key_seq: int | None = 0,
) -> dict:
    """A readback.parquet row."""
    return {
        "msg_id": msg_id,
        "key": key or f"k{msg_id}",
        "key_seq": key_seq,
        "partition": partition,
        "offset": offset,
        "ts_us": T0_US,
    }


def write_run(
    root: Path,
    cell: str,
    acked: list[dict],
    readback: list[dict] | None,
    *,
    repetition: int = 0,
    acks: str = "1",
    events: list[dict] | None = None,
) -> Path:
    """A repetition directory in the README layout; no readback.parquet when readback is None."""
    run_dir = root / "runs" / "exp" / "20260101T000000Z" / cell / str(repetition)
    run_dir.mkdir(parents=True)
    spec = {
        "experiment": "exp",
        "cell": cell,
        "repetition": repetition,
        "seed": 7,
        "axes": {"acks": acks},
        "config": {"acks": acks, "min_insync_replicas": 1, "fault_class": "leader-kill"},
    }
    (run_dir / "spec.json").write_text(json.dumps(spec))
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events or []))
    pq.write_table(pa.Table.from_pylist(acked, schema=ACKED), run_dir / "acked.parquet")
    if readback is not None:
        table = pa.Table.from_pylist(readback, schema=READBACK)
        pq.write_table(table, run_dir / "readback.parquet")
    return run_dir


def in_order(n: int) -> tuple[list[dict], list[dict]]:
    """n messages acked at offsets 0..n-1 of partition 0, all read where acked."""
    return [sent(i, i - 1) for i in range(1, n + 1)], [read(i, i - 1) for i in range(1, n + 1)]


def reordered_run() -> tuple[list[dict], list[dict]]:
    """Key k sent with seq 0,1,2,3 but logged as 0,2,1,3, plus a seq-less record and key j."""
    layout = [(1, "k", 0, 0), (2, "k", 1, 2), (3, "k", 2, 1), (4, "k", 3, 3)]
    layout += [(5, "k", None, 4), (6, "j", 0, 5)]
    acked = [sent(m, off, key=key, key_seq=seq) for m, key, seq, off in layout]
    readback = [read(m, off, key=key, key_seq=seq) for m, key, seq, off in layout]
    return acked, readback


def acks0_run() -> tuple[list[dict], list[dict]]:
    """acks=0: no offsets; partition 0 reads a later send than msg 2, partition 1 none after 6."""
    acked = [sent(m, None, partition=0 if m <= 3 else 1) for m in range(1, 7)]
    acked[2]["offset"] = -1001  # librdkafka's "no offset", must be read as unknown
    readback = [read(1, 0), read(3, 1), read(4, 0, partition=1), read(5, 1, partition=1)]
    return acked, readback


def timeline_run() -> tuple[list[dict], list[dict]]:
    """Sends at +0.1 s, +0.5 s (ok, 2 and 4 ms), +0.9 s (failed) and +2.2 s (indeterminate)."""
    acked = [
        sent(1, 0, send_us=T0_US + 100_000, latency_us=2000),
        sent(2, 1, send_us=T0_US + 500_000, latency_us=4000),
        sent(3, None, partition=None, status="failed", send_us=T0_US + 900_000),
        sent(4, None, partition=None, status="indeterminate", send_us=T0_US + 2_200_000),
    ]
    return acked, [read(1, 0), read(2, 1)]


SCENARIOS: dict[tuple[str, int], tuple[list[dict], list[dict] | None]] = {
    ("clean", 0): in_order(6),
    ("lost", 0): ([sent(i, i - 1) for i in range(1, 5)], [read(1, 0), read(2, 1), read(4, 3)]),
    ("lost", 1): ([sent(i, i - 1) for i in range(1, 5)], [read(3, 2), read(4, 3)]),
    ("unseen", 0): (
        [*(sent(i, i - 1) for i in range(1, 5)), sent(5, None, partition=None)],
        [read(1, 0), read(2, 1), read(3, 2)],
    ),
    ("duplicated", 0): (in_order(3)[0], [*in_order(3)[1], read(2, 3)]),
    ("offset_divergent", 0): (
        [sent(1, 0), sent(2, 1), sent(3, 1), sent(4, 2)],
        [read(1, 0), read(3, 1), read(4, 2)],
    ),
    ("moved", 0): (in_order(3)[0], [read(1, 0), read(2, 3), read(3, 2)]),
    ("failed_present", 0): (
        [sent(1, 0), sent(2, None, partition=None, status="failed")],
        [read(1, 0), read(2, 1)],
    ),
    ("indeterminate_present", 0): (
        [sent(1, 0), *(sent(m, None, status="indeterminate") for m in (2, 3))],
        [read(1, 0), read(2, 1)],
    ),
    ("reordered", 0): reordered_run(),
    ("phantom", 0): (in_order(2)[0], [*in_order(2)[1], read(99, 2), read(None, 3), read(99, 4)]),
    ("acks0", 0): acks0_run(),
    ("timeline", 0): timeline_run(),
    ("incomplete", 0): (in_order(2)[0], None),
    # AP under a cut-off: offsets 0..5 acked; the new leader rewrote 2..3 with 7, 8 and the
    # read-back ends at offset 3, so 3 and 4 are lost (one holds another message) and 5, 6 unseen.
    ("ap_cut", 0): (
        [*(sent(i, i - 1) for i in range(1, 7)), sent(7, 2), sent(8, 3)],
        [read(1, 0), read(2, 1), read(7, 2), read(8, 3)],
    ),
    # Item 10: the last offset read holds another message: proven lost, not unseen.
    ("last_offset_rewritten", 0): ([sent(1, 0), sent(2, 1), sent(3, 1)], [read(1, 0), read(3, 1)]),
    # Item 7: the consumer returned one record (p0@1) twice: one record, not a duplicate.
    ("record_read_twice", 0): (in_order(3)[0], [*in_order(3)[1], read(2, 1)]),
    # Item 8: ids 2 (failed) and 3 (indeterminate) in the log twice each; 1 (ok) twice too.
    ("unacked_duplicates", 0): (
        [sent(1, 0), sent(2, None, status="failed"), sent(3, None, status="indeterminate")],
        [read(1, 0), read(2, 1), read(3, 2), read(2, 3), read(3, 4), read(1, 5)],
    ),
    # Item 6: key k in partitions 0 and 1 with interleaved sequences; in order per partition.
    ("order_per_partition", 0): (
        [
            sent(1, 0, key="k", key_seq=0),
            sent(2, 0, key="k", key_seq=1, partition=1),
            sent(3, 1, key="k", key_seq=2),
        ],
        [
            read(1, 0, key="k", key_seq=0),
            read(3, 1, key="k", key_seq=2),
            read(2, 0, key="k", key_seq=1, partition=1),
        ],
    ),
    # Item 9: retention moved the log start of p0 to 3: ids 1-3 expired, 5 lost, p1 untouched.
    ("retention", 0): (
        [*(sent(i, i - 1) for i in range(1, 7)), sent(7, 0, partition=1)],
        [read(4, 3), read(6, 5)],
    ),
    # Item 5: acked.parquet holds msg_id 2 twice (ok and failed), a status nobody defined, and
    # two reports whose value was not ours (no msg_id).
    ("broken_contract", 0): (
        [
            sent(1, 0),
            sent(2, 1),
            sent(2, None, status="failed"),
            sent(3, 2, status="maybe"),
            {**sent(4, 3), "msg_id": None},
            {**sent(5, None, status="failed"), "msg_id": None},
        ],
        [read(1, 0), read(3, 2)],
    ),
}
EVENTS = {
    ("retention", 0): [
        {"ts_us": T0_US, "type": "readback", "complete": True, "log_start_offsets": {"0": 3}}
    ]
}


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs tree with every scenario, plus two broken runs."""
    root = tmp_path_factory.mktemp("reconcile")
    for (cell, repetition), (acked, readback) in SCENARIOS.items():
        acks = "0" if cell == "acks0" else "1"
        events = EVENTS.get((cell, repetition))
        write_run(root, cell, acked, readback, repetition=repetition, acks=acks, events=events)
    garbage = write_run(root, "garbage", *in_order(1))
    (garbage / "acked.parquet").write_bytes(b"not parquet")
    no_status = write_run(root, "no_status", *in_order(1))
    table = pq.read_table(no_status / "acked.parquet").drop(["status"])
    pq.write_table(table, no_status / "acked.parquet")
    return root


@pytest.fixture(scope="module")
def results(runs_root: Path) -> dict[tuple[str, int], RunResult]:
    """Every run of runs_root reconciled in one call, by (cell, repetition), by the Spark task's
    body in this process (test_the_spark_job_answers_each_run_as_its_task_body_does holds the
    Spark job to the same answers)."""
    reconciled = reconcile_in_process(find_runs([str(runs_root / "runs")]))
    return {(r.cell, r.repetition): r for r in reconciled}


def test_the_spark_job_answers_each_run_as_its_task_body_does(
    spark: SparkSession, runs_root: Path, results: dict[tuple[str, int], RunResult]
) -> None:
    reconciled = reconcile(spark, find_runs([str(runs_root / "runs")]))
    assert len(reconciled) == len(results) > 10
    for result in reconciled:
        assert result == results[(result.cell, result.repetition)], result.cell


def counts(sent: int, acked: int, read: int, **classes: int) -> dict[str, int]:
    """The full counts dict of a run with only these anomaly classes non-zero."""
    failed, indeterminate = classes.pop("failed", 0), classes.pop("indeterminate", 0)
    base = {"sent": sent, "acked": acked, "failed": failed, "indeterminate": indeterminate}
    return {**base, "read": read, **ZERO, **classes}


def example_ids(result: RunResult, anomaly: str) -> list[int | None]:
    """msg_ids of the examples of one class, in reported order."""
    return [example.msg_id for example in result.examples[anomaly]]


def test_clean_run_counts_nothing(results: dict) -> None:
    result = results[("clean", 0)]
    assert result.status == "complete" and result.error is None
    assert result.counts == counts(6, 6, 6)
    assert all(examples == () for examples in result.examples.values())


def test_lost_needs_a_later_offset_read(results: dict) -> None:
    result = results[("lost", 0)]
    assert result.counts == counts(4, 4, 3, lost=1)
    assert result.examples["lost"] == (Example(3, partition=0, offset=2),)
    assert result.examples["lost"][0].as_json("lost") == {
        "msg_id": 3,
        "partition": 0,
        "offset": 2,
        "readback_msg_id_at_offset": None,
    }


def test_unseen_is_beyond_the_last_offset_read_or_unlocated(results: dict) -> None:
    result = results[("unseen", 0)]
    assert result.counts == counts(5, 5, 3, unseen=2)
    assert result.examples["unseen"] == (Example(4, partition=0, offset=3), Example(5))


def test_duplicated_counts_ids_read_twice(results: dict) -> None:
    result = results[("duplicated", 0)]
    assert result.counts == counts(3, 3, 4, duplicated=1)
    assert result.examples["duplicated"] == (Example(2, partition=0, offset=1, reads=2),)
    assert result.examples["duplicated"][0].as_json("duplicated") == {
        "msg_id": 2,
        "partition": 0,
        "offset": 1,
        "reads": 2,
    }


def test_offset_divergent_names_the_record_now_at_the_offset(results: dict) -> None:
    result = results[("offset_divergent", 0)]
    assert result.counts == counts(4, 4, 3, lost=1, offset_divergent=1)
    expected = Example(2, partition=0, offset=1, readback_msg_id_at_offset=3)
    assert result.examples["offset_divergent"] == (expected,)
    assert result.examples["lost"] == (expected,)


def test_moved_is_read_elsewhere_than_acked(results: dict) -> None:
    result = results[("moved", 0)]
    assert result.counts == counts(3, 3, 3, moved=1)
    assert result.examples["moved"] == (Example(2, partition=0, offset=1),)


def test_failed_present(results: dict) -> None:
    result = results[("failed_present", 0)]
    assert result.counts == counts(2, 1, 2, failed=1, failed_present=1)
    assert example_ids(result, "failed_present") == [2]
    assert result.examples["failed_present"][0].offset == 1


def test_indeterminate_present_and_never_lost(results: dict) -> None:
    result = results[("indeterminate_present", 0)]
    assert result.counts == counts(3, 1, 2, indeterminate=2, indeterminate_present=1)
    assert example_ids(result, "indeterminate_present") == [2]


def test_reordered_per_key_in_read_order(results: dict) -> None:
    result = results[("reordered", 0)]
    assert result.counts == counts(6, 6, 6, reordered=1)
    assert result.examples["reordered"] == (
        Example(2, partition=0, offset=2, key="k", key_seq=1, max_key_seq_before=2),
    )


def test_phantom_counts_records_of_unknown_or_unparsed_ids(results: dict) -> None:
    result = results[("phantom", 0)]
    # 99 read twice is a phantom, never a duplicate: only acknowledged ids count as duplicated
    assert result.counts == counts(2, 2, 5, phantom=3)
    assert example_ids(result, "phantom") == [99, None]
    assert result.examples["phantom"][1] == Example(None, partition=0, offset=3, reads=1)


def test_one_loss_figure_counts_each_missing_message_once(results: dict) -> None:
    result = results[("ap_cut", 0)]
    # Worked by hand: acked 1..8; read 1, 2, 7, 8 at 0..3. Missing: 3 (p0@2, now 7) and
    # 4 (p0@3, now 8) are lost; 5 and 6 (p0@4, p0@5) lie beyond the last offset read: unseen.
    assert result.counts == counts(8, 8, 4, lost=2, unseen=2, offset_divergent=2)
    assert result.loss == 4 == result.counts["lost"] + result.counts["unseen"]
    assert result.loss_by_partition == {"0": 4}
    assert example_ids(result, "offset_divergent") == [3, 4]


def test_rewritten_last_offset_read_is_lost_not_unseen(results: dict) -> None:
    result = results[("last_offset_rewritten", 0)]
    assert result.counts == counts(3, 3, 2, lost=1, offset_divergent=1)
    assert example_ids(result, "lost") == [2]


def test_one_record_read_twice_is_not_a_duplicate(results: dict) -> None:
    assert results[("record_read_twice", 0)].counts == counts(3, 3, 3)


def test_duplicates_of_unacknowledged_sends_are_counted_apart(results: dict) -> None:
    result = results[("unacked_duplicates", 0)]
    assert result.counts == counts(
        3, 1, 6, failed=1, indeterminate=1, duplicated=1, duplicated_unacked=2,
        failed_present=1, indeterminate_present=1,
    )  # fmt: skip
    assert example_ids(result, "duplicated") == [1]
    assert example_ids(result, "duplicated_unacked") == [2, 3]


def test_order_is_judged_per_partition(results: dict) -> None:
    assert results[("order_per_partition", 0)].counts["reordered"] == 0


def test_acked_below_the_log_start_offset_expired_not_lost(results: dict) -> None:
    result = results[("retention", 0)]
    assert result.counts == counts(7, 7, 2, expired=3, lost=1, unseen=1)
    assert example_ids(result, "expired") == [1, 2, 3]
    assert example_ids(result, "lost") == [5]
    assert example_ids(result, "unseen") == [7]  # p1 was never read
    assert result.loss == 2


def test_contract_facts_are_counted(results: dict) -> None:
    contract = results[("broken_contract", 0)].contract
    assert contract == {
        "repeated_msg_ids": 1,
        "unidentified_rows": 2,
        "unknown_statuses": 1,
        "reported_ok": 3,
        "reported_failed": 2,
        "reported_indeterminate": 0,
    }
    assert results[("clean", 0)].contract["repeated_msg_ids"] == 0


def test_reported_counts_leave_out_sends_without_a_report(spark, tmp_path: Path) -> None:
    acked = [sent(1, 0), sent(2, None, partition=None, status="indeterminate")]
    acked[1]["error"] = "no delivery report"
    run = write_run(tmp_path, "noreport", acked, [read(1, 0)])
    (result,) = reconcile(spark, [run])
    assert result.contract["reported_ok"] == 1
    assert result.contract["reported_indeterminate"] == 0


def test_acks0_lost_needs_a_later_send_read_in_the_partition(results: dict) -> None:
    result = results[("acks0", 0)]
    assert result.counts == counts(6, 6, 4, lost=1, unseen=1)
    assert example_ids(result, "lost") == [2]
    assert example_ids(result, "unseen") == [6]
    assert result.examples["lost"][0].offset is None


def test_incomplete_run_has_no_counts(results: dict) -> None:
    result = results[("incomplete", 0)]
    assert result.status == RunStatus.INCOMPLETE
    assert result.counts is None and result.error is None
    assert [s.sent for s in result.timeline] == [2]


def test_unreadable_runs_are_errors_not_crashes(results: dict) -> None:
    assert results[("garbage", 0)].status == "error"
    assert results[("garbage", 0)].counts is None
    no_status = results[("no_status", 0)]
    assert no_status.status == "error"
    assert "status missing" in (no_status.error or "")
    assert results[("clean", 0)].status == "complete"


def test_the_price_of_safety_is_measured_with_the_check_and_never_crashes_it(results: dict):
    clean, incomplete = results[("clean", 0)], results[("incomplete", 0)]
    assert clean.availability is not None and clean.availability_error is None
    assert clean.availability.ok == clean.counts["acked"]
    assert incomplete.availability is not None  # acked.parquet alone is enough
    garbage = results[("garbage", 0)]  # failed inspection: priced on the driver
    assert garbage.availability is None
    assert garbage.availability_error and garbage.availability_error.startswith("AvailabilityError")


def test_timeline_per_second_with_gaps_filled(results: dict) -> None:
    timeline = results[("timeline", 0)].timeline
    assert [s.t_s for s in timeline] == [0, 1, 2]
    assert [s.epoch_s for s in timeline] == [T0_US // 1_000_000 + t for t in range(3)]
    assert [(s.sent, s.ok, s.failed, s.indeterminate) for s in timeline] == [
        (3, 2, 1, 0),
        (0, 0, 0, 0),
        (1, 0, 0, 1),
    ]
    assert timeline[0].ack_latency_p50_ms == pytest.approx(2.0)
    assert timeline[0].ack_latency_p99_ms == pytest.approx(4.0)
    assert timeline[1].ack_latency_p50_ms is None
    assert timeline[2].ack_latency_p99_ms is None


RESULTS_KEYS = {
    "run_dir", "experiment", "cell", "repetition", "config", "axes", "status", "counts",
    "examples", "timeline", "error", "loss", "loss_by_partition", "divergence_by_partition",
    "contract", "sensitivity", "attribution", "availability", "availability_error",
}  # fmt: skip


def test_results_json_written_into_each_run(results: dict) -> None:
    write_results(list(results.values()))
    written = json.loads((Path(results[("lost", 0)].run_dir) / "results.json").read_text())
    assert written.keys() == RESULTS_KEYS
    assert written["cell"] == "lost" and written["counts"]["lost"] == 1
    assert written["config"] == {
        "acks": "1",
        "min_insync_replicas": 1,
        "fault_class": "leader-kill",
    }
    assert written["axes"] == {"acks": "1"} and written["status"] == "complete"
    assert written["examples"]["lost"] == [
        {"msg_id": 3, "partition": 0, "offset": 2, "readback_msg_id_at_offset": None}
    ]
    assert written["sensitivity"] == {"removed": 1, "found": 1, "passed": True}
    assert written["timeline"][0].keys() == {
        "t_s", "epoch_s", "sent", "ok", "failed", "indeterminate", "missing", "duplicated",
        "ack_latency_p50_ms", "ack_latency_p99_ms", "processed", "commits_failed", "group_lag",
    }  # fmt: skip
    assert written["attribution"]["counts"]["segments_unavailable"] == 1
    incomplete = json.loads(json.dumps(results[("incomplete", 0)].as_json()))
    assert incomplete.keys() == RESULTS_KEYS
    assert (incomplete["counts"], incomplete["examples"], incomplete["sensitivity"]) == (
        None,
        {},
        None,
    )


def test_an_unreadable_config_makes_the_run_an_error_naming_the_key(spark, tmp_path: Path) -> None:
    run = write_run(tmp_path, "odd", *in_order(2), acks="2")
    [result] = reconcile(spark, [run])
    assert result.status == RunStatus.ERROR and result.counts is None
    assert "config.acks: unknown acks '2': expected 0, 1 or all" in (result.error or "")


def test_acks_spelt_minus_one_reads_as_all(spark, tmp_path: Path) -> None:
    run = write_run(tmp_path, "minus-one", *in_order(2), acks="-1")
    [result] = reconcile(spark, [run])
    assert result.config.acks == "all" and result.as_json()["config"]["acks"] == "all"


def test_cell_table_sums_each_cell_over_its_repetitions(results: dict) -> None:
    table = cell_table(list(results.values())).splitlines()
    assert table[0] == "| cell | reps | acked | " + " | ".join(ANOMALY_NAMES) + " | loss |"
    lost = next(line for line in table if line.startswith("| lost |"))
    # acked 4 + 4, lost 1 + 2, loss 3: sums over both repetitions
    # every class after lost and unseen is 0 (derived, so a new class keeps the test valid)
    zeros = " | ".join(["0"] * (len(ANOMALY_NAMES) - 2))
    assert lost == "| lost | 2 | 8 | 3 | 0 | " + zeros + " | 3 |"
    incomplete = next(line for line in table if line.startswith("| incomplete |"))
    assert incomplete.startswith("| incomplete | 0/1 | n/a | n/a |")


def test_find_runs_expands_parents_and_deduplicates(runs_root: Path) -> None:
    (runs_root / "runs" / "exp" / "not-a-run").mkdir()
    (runs_root / "runs" / "exp" / "not-a-run" / "spec.json").write_text("{}")
    lost_rep = runs_root / "runs" / "exp" / "*" / "lost" / "0"
    found = find_runs([str(runs_root / "runs"), str(lost_rep), str(runs_root / "nothing*")])
    assert len(found) == len(SCENARIOS) + 2
    assert found == sorted(found)


def test_a_run_the_checker_cannot_read_fails_alone(spark: SparkSession, tmp_path: Path) -> None:
    torn = write_run(tmp_path, "torn", *in_order(2000))
    clean = write_run(tmp_path, "clean", *in_order(3))
    # A torn file: its footer (and so its schema) reads, its data pages do not.
    data = bytearray((torn / "readback.parquet").read_bytes())
    data[4:2000] = b"\xff" * 1996
    (torn / "readback.parquet").write_bytes(bytes(data))
    by_cell = {r.cell: r for r in reconcile(spark, [torn, clean])}
    assert by_cell["torn"].status == "error"
    assert by_cell["torn"].error.startswith("OSError:"), by_cell["torn"].error
    assert by_cell["torn"].counts is None
    assert by_cell["torn"].availability is not None  # its acked.parquet is whole
    assert by_cell["clean"].status == "complete"
    assert by_cell["clean"].counts["acked"] == 3


def test_cli_writes_report_and_prints_table(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, "cp", *in_order(3), repetition=0)
    write_run(tmp_path, "cp", *in_order(3), repetition=1)
    out = tmp_path / "report"
    assert main(["reconcile", str(tmp_path / "runs" / "exp" / "*"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| cp | 2 | 6 | 0 |" in printed
    assert (out / "cells.md").read_text() == printed
    assert len(list(tmp_path.glob("runs/**/results.json"))) == 2
    assert spark.range(1).count() == 1


def test_cli_exits_2_when_no_run_matches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pattern = str(tmp_path / "nowhere" / "*")
    assert main(["reconcile", pattern]) == 2
    err = capsys.readouterr().err
    assert pattern in err and "Fix:" in err


def test_timeline_counts_missing_and_duplicated_by_send_second(results: dict) -> None:
    ap = results[("ap_cut", 0)]
    assert sum(s.missing for s in ap.timeline) == ap.loss == 4
    assert sum(s.duplicated for s in ap.timeline) == 0
    dup = results[("duplicated", 0)]
    assert sum(s.duplicated for s in dup.timeline) == dup.counts["duplicated"] == 1
    assert sum(s.missing for s in results[("clean", 0)].timeline) == 0


def test_every_complete_run_attributes_its_whole_loss(results: dict) -> None:
    for result in results.values():
        if result.status != "complete":
            assert result.attribution is None
            continue
        assert sum(result.attribution.counts.values()) == result.loss, result.cell
    # These runs kept no segments: nothing can be said about where their messages are.
    lost = results[("ap_cut", 0)].attribution
    assert lost.counts["segments_unavailable"] == 4 and "no segments event" in lost.note


def test_attribution_reads_the_kept_segments(spark: SparkSession, tmp_path: Path) -> None:
    # Acked 1-4 at offsets 0-3 of partition 0; the read-back holds 1 and 4. Every broker's
    # log holds 1, 3 (at offset 1) and 4: msg 2 is on no disk, msg 3 on disk but not served.
    segments = {"type": "segments", "kept": True, "topic": "chaos", "brokers": {}}
    events = [segments, {"type": "readback", "high_watermarks": {"0": 4}}]
    run = write_run(
        tmp_path, "kept", [sent(i, i - 1) for i in range(1, 5)], [read(1, 0), read(4, 3)]
    )
    log = full_batch(0, [value_of(m) for m in (1, 3, 4)])
    for broker in (1, 2, 3):
        folder = segments_dir(run, broker) / "chaos-0"
        folder.mkdir(parents=True)
        (folder / "00000000000000000000.log").write_bytes(log)
        segments["brokers"][str(broker)] = {"bytes": len(log), "skipped": None}
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    [result] = reconcile(spark, [run])
    assert result.loss == 2
    assert result.attribution.counts == {
        "on_no_disk": 1,
        "on_disk_not_served": 1,
        "segments_unavailable": 0,
        "not_examined": 0,
    }
    on_disk = [e for e in result.attribution.examples if e.place == "on_disk_not_served"]
    assert [e.message for e in on_disk] == [MissingMessage(3, 0, 2)]
    assert {(h.broker, h.offset) for h in on_disk[0].holders} == {(1, 1), (2, 1), (3, 1)}
    written = result.as_json()["attribution"]["examples"]
    assert [(e["msg_id"], e["place"]) for e in written] == [
        (2, "on_no_disk"),
        (3, "on_disk_not_served"),
    ]


def test_journal_rows_without_a_msg_id_missing_beside_others_are_attributed(
    tmp_path: Path,
) -> None:
    """The rows without a msg_id count as one message; sorting it among the missing ones for
    the attribution's examples once raised TypeError and failed the run's task."""
    acked = [sent(1, 0), sent(2, 1), sent(3, 2)]
    acked[1]["msg_id"] = acked[2]["msg_id"] = None
    (result,) = reconcile_in_process([write_run(tmp_path, "no-ids", acked, [])])
    assert result.status == "complete", result.error
    assert result.loss == 2
    assert result.contract["unidentified_rows"] == 2
    assert result.attribution is not None and len(result.attribution.examples) == 2


def test_a_run_stopped_before_its_read_back_names_the_error_that_stopped_it(
    tmp_path: Path,
) -> None:
    from analysis.judge.verdicts import judge_repetition

    error = 'KafkaException: KafkaError{code=_UNKNOWN_TOPIC,val=-188,str="Unknown topic"}'
    run = write_run(
        tmp_path, "stopped", *in_order(3)[:1], None,
        events=[{"type": "harness_error", "ts_us": T0_US, "error": error}],
    )  # fmt: skip
    (result,) = reconcile_in_process([run])
    assert (result.status, result.error) == ("incomplete", error)
    verdict = judge_repetition(result, load_events(run))
    assert verdict.reasons == (f"run incomplete: {error}",)
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps(spec | {"harness_error": "from spec.json"}))
    (result,) = reconcile_in_process([run])
    assert result.error == "from spec.json"  # the harness's own last word wins
