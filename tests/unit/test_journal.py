"""The crash-safe journal, the record format of values, and outcome classification."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import KafkaError

from harness import rundir
from harness.journal import AckJournal, EventLog, finalize, parse_ids
from harness.recorder import decode_value, encode_value, outcome_of


class FakeError:
    """Stands in for confluent_kafka.KafkaError in a delivery report."""

    def __init__(self, name: str):
        self._name = name

    def name(self) -> str:
        return self._name


def classify(error) -> str:
    return "indeterminate" if error.name().startswith("_MSG_TIMED_OUT") else "failed"


class FakeMessage:
    """Stands in for confluent_kafka.Message as the delivery callback receives it."""

    def __init__(self, value, error, partition, offset, latency_s):
        self._fields = (value, error, partition, offset, latency_s)

    def value(self):
        return self._fields[0]

    def error(self):
        return self._fields[1]

    def partition(self):
        return self._fields[2]

    def offset(self):
        return self._fields[3]

    def latency(self):
        return self._fields[4]


def report(journal, msg_id, error=None, partition=0, offset=0, latency_s=0.002, ack_ns=None):
    """Deliver one report the way the recorder's callback does, and commit it at `ack_ns`."""
    ack_ns = ack_ns or 1_700_000_000_000_000_000 + msg_id * 1_000_000
    msg = FakeMessage(encode_value(msg_id, 0, 40), error, partition, offset, latency_s)
    (journal.delivered if error is None else journal.undelivered).append(msg)
    journal.commit(ack_ns)


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
    data = (tmp_path / rundir.JOURNAL_ACKS).read_bytes()
    (tmp_path / rundir.JOURNAL_ACKS).write_bytes(data[: len(data) - 40])
    table = finalize(tmp_path)
    assert table.num_rows >= 1000
    assert table.filter(pc.equal(table["status"], "ok")).num_rows == 1000


def test_journal_is_on_disk_before_close(tmp_path):
    journal = AckJournal(tmp_path, 1, classify)
    journal.sent_upto = 1
    report(journal, 0)
    journal.flush()
    assert (tmp_path / rundir.JOURNAL_SENDS).stat().st_size > 0
    assert (tmp_path / rundir.JOURNAL_ACKS).stat().st_size > 0
    journal.close()


def test_event_log_lines_are_json_with_time_and_type(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.write("phase", phase="x")
    log.write("fault_start", ts_us=123, fault="kill")
    log.close()
    first, second = (json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines())
    assert first["type"] == "phase" and first["ts_us"] > 1_600_000_000_000_000
    assert second["ts_us"] == 123


def test_one_commit_stamps_every_report_it_holds_and_keeps_errors_apart(tmp_path):
    journal = AckJournal(tmp_path, 1, classify)
    journal.sent_upto = 3
    journal.delivered.append(FakeMessage(encode_value(0, 0, 40), None, 0, 10, 0.001))
    journal.undelivered.append(FakeMessage(encode_value(1, 1, 40), FakeError("X"), -1, -1, None))
    journal.delivered.append(FakeMessage(encode_value(2, 2, 40), None, 0, 11, 0.003))
    journal.commit(5_000_000_000)
    assert journal.delivered == [] and journal.undelivered == []
    journal.close()
    rows = finalize(tmp_path).to_pylist()
    assert [r["ack_ts_us"] for r in rows] == [5_000_000] * 3
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert [r["offset"] for r in rows] == [10, None, 11]
    assert rows[2]["send_ts_us"] == 5_000_000 - 3000
    assert rows[1]["send_ts_us"] is not None  # no latency: estimated from the checkpoints


def test_ids_parse_column_wise_and_foreign_values_become_null():
    values = [encode_value(i, i // 3, 64) for i in (0, 7, 999_999_999_999_999)]
    assert parse_ids(values).to_pylist() == [0, 7, 999_999_999_999_999]
    mixed = [encode_value(5, 0, 64), b"hello", encode_value(6, 0, 40), None]
    assert parse_ids(mixed).to_pylist() == [5, None, 6, None]
    assert parse_ids([b"12:3:" + b"x" * 59, encode_value(4, 0, 64)]).to_pylist() == [12, 4]
    assert parse_ids([]).to_pylist() == []


def test_values_round_trip_and_foreign_values_are_recognised():
    value = encode_value(123456, 42, 100)
    assert len(value) == 100 and value.startswith(b"000000000123456:000000000042:")
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
