"""The reconciliation job: one Spark task per run, runs that fail alone, the timeline,
results.json, the reconcile command and the attribution of what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from analysis.model.anomalies import ANOMALY_NAMES
from analysis.model.attribution import MissingMessage
from analysis.model.results import RunResult, RunStatus
from analysis.spark.reconcile import (
    find_runs,
    reconcile,
    reconcile_in_process,
    write_results,
)
from harness.rundir.events import load_events
from harness.rundir.layout import segments_dir
from kafka_chaos.cli import main
from kafka_chaos.commands.reconcile import cell_table
from tests.unit.kafka_bytes import full_batch, value_of
from tests.unit.reconcile_runs import (
    RESULTS_KEYS,
    SCENARIOS,
    T0_US,
    in_order,
    read,
    sent,
    write_run,
)


def test_the_spark_job_answers_each_run_as_its_task_body_does(
    spark: SparkSession, runs_root: Path, results: dict[tuple[str, int], RunResult]
) -> None:
    reconciled = reconcile(spark, find_runs([str(runs_root / "runs")]))
    assert len(reconciled) == len(results) > 10
    for result in reconciled:
        assert result == results[(result.cell, result.repetition)], result.cell


def test_reported_counts_leave_out_sends_without_a_report(spark, tmp_path: Path) -> None:
    acked = [sent(1, 0), sent(2, None, partition=None, status="indeterminate")]
    acked[1]["error"] = "no delivery report"
    run = write_run(tmp_path, "noreport", acked, [read(1, 0)])
    (result,) = reconcile(spark, [run])
    assert result.contract["reported_ok"] == 1
    assert result.contract["reported_indeterminate"] == 0


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
        "stuck", "reset",
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
