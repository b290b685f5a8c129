"""The crash-safe journal, the record format of values, and outcome classification."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, Message

from harness.rundir import layout
from harness.rundir.events import EventLog, FaultStart, PhaseEvent, load_events
from harness.rundir.records import NO_REPORT, STATUSES
from harness.workload.journal import AckJournal, JournalError, parse_ids
from harness.workload.producer.librdkafka import close_with_tally
from harness.workload.producer.recorder import DeliveryTally, delivery_callback, status_of
from harness.workload.values import decode_value, encode_value
from tests.unit.finalized import finalized


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
    delivery_callback(journal, DeliveryTally())(error, msg)
    journal.commit(ack_ns)


def test_finalize_derives_keys_and_marks_sends_without_report_indeterminate(tmp_path):
    journal = AckJournal(tmp_path, 2, classify)
    journal.sent_upto = 4
    report(journal, 0, partition=2, offset=7, ack_ns=1_700_000_000_000_000_000)
    report(journal, 1, FakeError("MSG_SIZE_TOO_LARGE"), partition=-1, offset=-1001)
    report(journal, 2, FakeError("_MSG_TIMED_OUT"), partition=1, offset=-1001)
    journal.close()
    rows = {r["msg_id"]: r for r in finalized(tmp_path).to_pylist()}
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
    assert finalized(tmp_path).column("offset").to_pylist() == [None]


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
    data = (tmp_path / layout.JOURNAL_ACKS).read_bytes()
    (tmp_path / layout.JOURNAL_ACKS).write_bytes(data[: len(data) - 40])
    table = finalized(tmp_path)
    assert table.num_rows >= 1000
    assert table.filter(pc.equal(table["status"], "ok")).num_rows == 1000


def test_journal_is_on_disk_before_close(tmp_path):
    journal = AckJournal(tmp_path, 1, classify)
    journal.sent_upto = 1
    report(journal, 0)
    journal.flush()
    assert (tmp_path / layout.JOURNAL_SENDS).stat().st_size > 0
    assert (tmp_path / layout.JOURNAL_ACKS).stat().st_size > 0
    journal.close()


def test_event_log_lines_are_json_with_time_and_type(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.write(PhaseEvent(phase="x"))
    log.write(FaultStart(ts_us=123, fault="kill"))
    log.close()
    first, second = (json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines())
    assert first["type"] == "phase" and first["ts_us"] > 1_600_000_000_000_000
    assert second["ts_us"] == 123


def test_one_commit_stamps_every_report_it_holds_and_keeps_errors_apart(tmp_path):
    journal = AckJournal(tmp_path, 1, classify)
    journal.sent_upto = 3
    journal.delivered.append(FakeMessage(encode_value(0, 0, 40), None, 0, 10, 0.001))
    journal.failed.append(FakeMessage(encode_value(1, 1, 40), FakeError("X"), -1, -1, None))
    journal.delivered.append(FakeMessage(encode_value(2, 2, 40), None, 0, 11, 0.003))
    journal.commit(5_000_000_000)
    assert journal.delivered == journal.failed == journal.indeterminate == []
    journal.close()
    rows = finalized(tmp_path).to_pylist()
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
    assert status_of(None) == "ok"
    assert status_of(KafkaError(KafkaError._MSG_TIMED_OUT)) == "indeterminate"
    assert status_of(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND)) == "indeterminate"
    assert status_of(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)) == "failed"
    assert status_of(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)) == "failed"


# --- No delivery report is ever dropped ------------------------------------------------------

STAMP_NS = 1_700_000_000_000_000_000


class Unreadable(FakeMessage):
    """A report one of whose accessors raises, as no column-wise decoder can read it."""

    def __init__(self, value, broken: str):
        super().__init__(value, None, 0, 1, 0.001)
        self._broken = broken

    def __getattribute__(self, name):
        if name != "_broken" and name == object.__getattribute__(self, "_broken"):
            raise RuntimeError(f"{name} is unreadable")
        return object.__getattribute__(self, name)


def real(msg_id, error=None, partition=0, offset=None, latency=0.002, value=None):
    """A confluent_kafka.Message as librdkafka builds it (offset -1001 reads back as None)."""
    return Message(
        topic="t",
        value=encode_value(msg_id, 0, 40) if value is None else value,
        error=error,
        partition=-1 if partition is None else partition,
        offset=-1001 if offset is None else offset,
        latency=-1 if latency is None else latency,
    )


def serve(journal, tally, reports, stamp_ns=STAMP_NS):
    """Serve `reports` through the recorder's own delivery callback, then commit one page."""
    on_delivery = delivery_callback(journal, tally)
    for msg in reports:
        on_delivery(msg.error(), msg)
    journal.commit(stamp_ns)


def reported_by_status(table) -> dict[str, int]:
    """acked.parquet rows that carry a delivery report, counted by status."""
    counts = dict.fromkeys(STATUSES, 0)
    for row in table.to_pylist():
        if row["error"] != NO_REPORT:
            counts[row["status"]] += 1
    return counts


def journal_of(tmp_path, sent):
    journal = AckJournal(tmp_path, 4, status_of)
    journal.sent_upto = sent
    return journal


def test_an_acked_report_without_offset_keeps_its_page(tmp_path):
    # The user's case: after a leader SIGKILL the idempotent producer acks a retry the broker
    # took as a duplicate with no offset; the old journal lost this whole page.
    journal, tally = journal_of(tmp_path, 3), DeliveryTally()
    serve(journal, tally, [real(0, offset=5), real(1, offset=None), real(2, offset=6)])
    journal.close()
    rows = finalized(tmp_path).to_pylist()
    assert [(r["status"], r["offset"], r["partition"]) for r in rows] == [
        ("ok", 5, 0),
        ("ok", None, 0),
        ("ok", 6, 0),
    ]
    assert tally.as_dict() == journal.counts == {"ok": 3, "failed": 0, "indeterminate": 0}


def test_real_error_reports_without_offset_or_partition_are_all_journalled(tmp_path):
    journal, tally = journal_of(tmp_path, 3), DeliveryTally()
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT)
    refused = KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)
    serve(
        journal,
        tally,
        [real(0, timed_out, partition=None, latency=None), real(1, refused), real(2, offset=9)],
    )
    journal.close()
    table = finalized(tmp_path)
    rows = table.to_pylist()
    assert [(r["status"], r["error"], r["partition"], r["offset"]) for r in rows] == [
        ("indeterminate", "_MSG_TIMED_OUT", None, None),
        ("failed", "NOT_ENOUGH_REPLICAS", 0, None),
        ("ok", None, 0, 9),
    ]
    assert rows[0]["send_ts_us"] is not None  # no latency: estimated from the checkpoints
    assert reported_by_status(table) == tally.as_dict() == journal.counts


def test_none_latency_and_none_partition_on_acks_become_nulls(tmp_path):
    journal, tally = journal_of(tmp_path, 2), DeliveryTally()
    serve(journal, tally, [real(0, partition=None, offset=3, latency=None), real(1, offset=4)])
    journal.close()
    rows = finalized(tmp_path).to_pylist()
    assert (rows[0]["partition"], rows[0]["offset"], rows[0]["status"]) == (None, 3, "ok")
    assert rows[1]["send_ts_us"] == STAMP_NS // 1000 - 2000
    assert journal.counts == tally.as_dict()


def test_reports_whose_value_is_not_ours_are_kept_with_what_they_know(tmp_path):
    journal, tally = journal_of(tmp_path, 2), DeliveryTally()
    stranger = Message(topic="t", value=b"\xffnot ours", partition=1, offset=8, latency=0.001)
    empty = Message(topic="t", partition=2, offset=9, error=KafkaError(KafkaError._MSG_TIMED_OUT))
    serve(journal, tally, [real(0, offset=7), stranger, empty, real(1, offset=10)])
    journal.close()
    table = finalized(tmp_path)
    rows = table.to_pylist()
    assert table.num_rows == 4  # two sends, two reports that name no send
    strays = {r["partition"]: r for r in rows if r["msg_id"] is None}
    assert (strays[1]["status"], strays[1]["offset"], strays[1]["error"]) == ("ok", 8, None)
    assert (strays[2]["status"], strays[2]["error"]) == ("indeterminate", "_MSG_TIMED_OUT")
    assert strays[2]["key"] is None and strays[2]["ack_ts_us"] == STAMP_NS // 1000
    assert (
        reported_by_status(table) == tally.as_dict() == {"ok": 3, "failed": 0, "indeterminate": 1}
    )


def test_mixed_report_classes_in_one_page(tmp_path):
    journal, tally = journal_of(tmp_path, 4), DeliveryTally()
    reports = [
        FakeMessage(encode_value(0, 0, 40), None, 0, 1, 0.001),
        real(1, offset=2),
        real(2, offset=None),
        FakeMessage(encode_value(3, 0, 40), None, 1, 3, None),
    ]
    serve(journal, tally, reports)
    journal.close()
    rows = finalized(tmp_path).to_pylist()
    assert [(r["msg_id"], r["status"], r["offset"]) for r in rows] == [
        (0, "ok", 1),
        (1, "ok", 2),
        (2, "ok", None),
        (3, "ok", 3),
    ]
    assert journal.counts == tally.as_dict()


def test_a_page_whose_decode_raises_is_decoded_report_by_report(tmp_path):
    journal, tally = journal_of(tmp_path, 5), DeliveryTally()
    odd = FakeMessage(encode_value(2, 0, 40), None, 0, "12", "soon")  # strings, not numbers
    serve(
        journal,
        tally,
        [
            real(0, offset=1),
            Unreadable(encode_value(1, 0, 40), "offset"),
            odd,
            Unreadable(encode_value(3, 0, 40), "latency"),
            Unreadable(encode_value(4, 0, 40), "value"),
        ],
    )
    journal.close()
    table = finalized(tmp_path)
    rows = {r["msg_id"]: r for r in table.to_pylist()}
    assert (rows[0]["offset"], rows[1]["offset"], rows[2]["offset"]) == (1, None, None)
    assert rows[2]["partition"] == 0 and rows[3]["offset"] == 1
    assert rows[4]["error"] == NO_REPORT  # its report is the row without an id
    assert rows[None]["status"] == "ok" and rows[None]["offset"] == 1
    assert (
        reported_by_status(table) == tally.as_dict() == {"ok": 5, "failed": 0, "indeterminate": 0}
    )


def test_error_reports_whose_error_cannot_be_read_stay_reports(tmp_path):
    journal, tally = journal_of(tmp_path, 2), DeliveryTally()
    broken = Unreadable(encode_value(0, 0, 40), "error")
    on_delivery = delivery_callback(journal, tally)
    on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), broken)  # the callback had the error
    too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    on_delivery(too_large, real(1, too_large, partition=None))
    journal.commit(STAMP_NS)
    journal.close()
    table = finalized(tmp_path)
    rows = table.to_pylist()
    assert (rows[0]["status"], rows[0]["error"]) == ("indeterminate", "unknown error")
    assert (rows[1]["status"], rows[1]["error"]) == ("failed", "MSG_SIZE_TOO_LARGE")
    assert reported_by_status(table) == tally.as_dict() == journal.counts


def test_many_pages_through_the_callback_match_the_tally(tmp_path):
    journal, tally = journal_of(tmp_path, 3000), DeliveryTally()
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT)
    for page in range(30):
        reports = []
        for msg_id in range(page * 100, page * 100 + 100):
            if msg_id % 37 == 0:
                reports.append(real(msg_id, timed_out))
            else:
                reports.append(real(msg_id, offset=None if msg_id % 11 == 0 else msg_id))
        serve(journal, tally, reports, STAMP_NS + page)
        if page % 7 == 0:
            journal.flush()
    journal.close()
    table = finalized(tmp_path)
    assert table.num_rows == 3000 and journal.error is None
    assert reported_by_status(table) == tally.as_dict() == journal.counts
    assert tally.indeterminate == len(range(0, 3000, 37))


class FailingWriter:
    """An Arrow stream writer on a full disk."""

    def write_batch(self, batch):
        raise OSError(28, "No space left on device")

    def close(self):
        pass


def test_a_write_failure_surfaces_from_close(tmp_path):
    journal, tally = journal_of(tmp_path, 2), DeliveryTally()
    serve(journal, tally, [real(0, offset=1)])
    journal.flush()
    journal._acks._writer = FailingWriter()
    serve(journal, tally, [real(1, offset=2)])
    with pytest.raises(JournalError, match="No space left on device") as raised:
        journal.close()
    assert "1 delivery reports not written" in str(raised.value)
    assert journal.counts["ok"] == 1 and tally.ok == 2  # the analysis sees the gap too
    assert reported_by_status(finalized(tmp_path))["ok"] == 1


def test_a_page_that_cannot_be_decoded_at_all_is_kept_and_reported(tmp_path, monkeypatch):
    journal, tally = journal_of(tmp_path, 2), DeliveryTally()

    def broken(*args):
        raise MemoryError("simulated")

    monkeypatch.setattr(journal, "_columnwise", broken)
    monkeypatch.setattr(journal, "_per_report", broken)
    serve(journal, tally, [real(0, offset=1), real(1, offset=2)])
    with pytest.raises(JournalError, match="2 delivery reports could not be decoded"):
        journal.close()
    (kept,) = journal.undecodable
    assert [report.offset() for report in kept[0]] == [1, 2]


def test_the_runner_writes_the_tally_and_the_journal_error(tmp_path):
    journal, tally = journal_of(tmp_path, 1), DeliveryTally()
    serve(journal, tally, [real(0, offset=1)])
    journal._acks._writer = FailingWriter()
    events = EventLog(tmp_path / layout.EVENTS)
    error = close_with_tally(journal, tally, events)
    events.close()
    (event,) = load_events(tmp_path)
    assert event["type"] == "recorder_tally"
    assert event["reports"] == {"ok": 1, "failed": 0, "indeterminate": 0}
    assert event["journal_error"] == error and "No space left" in error
