"""The crash-safe journal, the record format of values, and outcome classification."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import KafkaError

from harness.journal import ACKS_FILE, SENDS_FILE, AckJournal, EventLog, finalize
from harness.recorder import decode_value, encode_value, outcome_of


class FakeError:
    """Stands in for confluent_kafka.KafkaError in a delivery report."""

    def __init__(self, name: str):
        self._name = name

    def name(self) -> str:
        return self._name


def classify(error) -> str:
    return "indeterminate" if error.name().startswith("_MSG_TIMED_OUT") else "failed"


def report(journal, msg_id, error=None, partition=0, offset=0, latency_s=0.002, ack_ns=None):
    ack_ns = ack_ns or 1_700_000_000_000_000_000 + msg_id * 1_000_000
    journal.report((encode_value(msg_id, 0, 40), error, partition, offset, latency_s, ack_ns))


def test_finalize_derives_keys_and_marks_sends_without_report_indeterminate(tmp_path):
    journal = AckJournal(tmp_path, 2, classify)
    journal.sent_upto = 4
    report(journal, 0, partition=2, offset=7, ack_ns=1_700_000_000_000_000_000)
    report(journal, 1, FakeError("MSG_SIZE_TOO_LARGE"), partition=-1, offset=-1001)
    report(journal, 2, FakeError("_MSG_TIMED_OUT"), partition=1, offset=-1001)
    journal.close()
    rows = {r["msg_id"]: r for r in finalize(tmp_path).to_pylist()}
    assert sorted(rows) == [0, 1, 2, 3]
    assert (rows[0]["status"], rows[0]["partition"], rows[0]["offset"]) == ("ok", 2, 7)
    assert rows[0]["send_ts_us"] == 1_700_000_000_000_000 - 2000
    assert (rows[1]["status"], rows[1]["error"], rows[1]["partition"]) == (
        "failed",
        "MSG_SIZE_TOO_LARGE",
        None,
    )
    assert rows[2]["status"] == "indeterminate" and rows[2]["offset"] is None
    assert rows[3]["status"] == "indeterminate" and rows[3]["error"] == "no delivery report"
    assert [(r["key"], r["key_seq"]) for r in rows.values()] == [
        ("k0", 0),
        ("k1", 0),
        ("k0", 1),
        ("k1", 1),
    ]
    assert journal.counts == {"ok": 1, "failed": 1, "indeterminate": 1}
    assert pq.read_table(tmp_path / "acked.parquet").num_rows == 4


def test_offsets_are_dropped_when_the_broker_gives_none(tmp_path):
    journal = AckJournal(tmp_path, 1, classify)
    journal.offsets_known = False
    journal.sent_upto = 1
    report(journal, 0, offset=5)
    journal.close()
    assert finalize(tmp_path).column("offset").to_pylist() == [None]


def test_journal_survives_a_torn_tail(tmp_path):
    journal = AckJournal(tmp_path, 4, classify)
    journal.sent_upto = 1000
    for i in range(1000):
        report(journal, i)
    journal.flush()
    journal.sent_upto = 1010
    for i in range(1000, 1010):
        report(journal, i)
    journal.close()
    # A crash mid-write leaves a partial last batch: simulate by cutting the file.
    data = (tmp_path / ACKS_FILE).read_bytes()
    (tmp_path / ACKS_FILE).write_bytes(data[: len(data) - 40])
    table = finalize(tmp_path)
    assert table.num_rows >= 1000
    assert table.filter(pc.equal(table["status"], "ok")).num_rows == 1000


def test_journal_is_on_disk_before_close(tmp_path):
    journal = AckJournal(tmp_path, 1, classify)
    journal.sent_upto = 1
    report(journal, 0)
    journal.flush()
    assert (tmp_path / SENDS_FILE).stat().st_size > 0
    assert (tmp_path / ACKS_FILE).stat().st_size > 0
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
