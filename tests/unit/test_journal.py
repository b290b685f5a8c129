"""The crash-safe journal, the record format of values, and outcome classification."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from confluent_kafka import KafkaError

from harness.journal import ACKS_FILE, SENDS_FILE, AckJournal, EventLog, finalize
from harness.recorder import decode_value, encode_value, outcome_of


def test_finalize_joins_sends_and_outcomes_and_marks_missing_reports_indeterminate(tmp_path):
    journal = AckJournal(tmp_path)
    journal.sent(0, "k0", 0, 100)
    journal.sent(1, "k1", 0, 101)
    journal.sent(2, "k0", 1, 102)
    journal.acked(0, "ok", 2, 7, None, 150)
    journal.acked(1, "failed", None, None, "MSG_SIZE_TOO_LARGE", 160)
    journal.close()
    rows = {r["msg_id"]: r for r in finalize(tmp_path).to_pylist()}
    assert rows[0]["status"] == "ok" and (rows[0]["partition"], rows[0]["offset"]) == (2, 7)
    assert rows[1]["status"] == "failed" and rows[1]["error"] == "MSG_SIZE_TOO_LARGE"
    assert rows[2]["status"] == "indeterminate" and rows[2]["error"] == "no delivery report"
    assert pq.read_table(tmp_path / "acked.parquet").num_rows == 3


def test_journal_survives_a_torn_tail(tmp_path):
    journal = AckJournal(tmp_path)
    for i in range(1000):
        journal.sent(i, "k", i, i)
    journal.flush()
    for i in range(1000, 1010):
        journal.sent(i, "k", i, i)
    journal.close()
    # A crash mid-write leaves a partial last batch: simulate by cutting the file.
    data = (tmp_path / SENDS_FILE).read_bytes()
    (tmp_path / SENDS_FILE).write_bytes(data[: len(data) - 40])
    (tmp_path / ACKS_FILE).write_bytes(b"")
    table = finalize(tmp_path)
    assert table.num_rows >= 1000
    assert set(table.column("status").to_pylist()) == {"indeterminate"}


def test_journal_is_on_disk_before_close(tmp_path):
    journal = AckJournal(tmp_path)
    journal.sent(1, "k", 0, 5)
    journal.flush()
    assert (tmp_path / SENDS_FILE).stat().st_size > 0
    journal.close()


def test_event_log_lines_are_json_with_time_and_type(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.write("phase", phase="x")
    log.write("fault_start", ts_us=123, fault="kill")
    log.close()
    first, second = (json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines())
    assert first["type"] == "phase" and first["ts_us"] > 1_600_000_000_000_000
    assert second["ts_us"] == 123


def test_values_round_trip_and_foreign_values_are_recognised():
    value = encode_value(123456, 42, 100)
    assert len(value) == 100
    assert decode_value(value) == (123456, 42)
    assert decode_value(b"hello") == (None, None)
    assert decode_value(None) == (None, None)
    assert decode_value(b"x:y:z") == (None, None)


def test_outcome_classification():
    assert outcome_of(None) == "ok"
    assert outcome_of(KafkaError(KafkaError._MSG_TIMED_OUT)) == "indeterminate"
    assert outcome_of(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND)) == "indeterminate"
    assert outcome_of(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)) == "failed"
    assert outcome_of(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)) == "failed"
