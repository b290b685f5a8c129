"""A run survives its client: a send produce() refuses synchronously is journalled as failed,
counted in the recorder's tally, and the workload goes on."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.rundir import layout
from harness.rundir.events import EventLog, load_events
from harness.rundir.streams import read_stream
from harness.rundir.transactions import TRANSACTION_SCHEMA
from harness.workload.journal import AckJournal
from harness.workload.producer.librdkafka import process_fleet, producer_tasks
from harness.workload.producer.recorder import (
    Recorder,
    RefusedSend,
    Workload,
    delivery_callback,
    status_of,
)
from harness.workload.transactions.librdkafka import TransactionalRecorder, TransactionPlan
from harness.workload.values import decode_value
from tests.unit.finalized import finalized

UNKNOWN_TOPIC = KafkaError(KafkaError._UNKNOWN_TOPIC, "Unknown topic")


class Delivered:
    """A delivery report of a send that succeeded at (partition 0, offset)."""

    def __init__(self, value: bytes, offset: int):
        self._value, self._offset = value, offset

    def value(self) -> bytes:
        return self._value

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def latency(self) -> float:
        return 0.001


class RefusingProducer:
    """Stands in for the client: produce() raises for the msg_ids in `refuse`, and each other
    send is delivered ok at the next offset when the recorder polls."""

    def __init__(self, on_delivery, refuse: set[int], error: Exception):
        self.on_delivery, self.refuse, self.error = on_delivery, refuse, error
        self.queued: list[bytes] = []
        self.offset = 0

    def produce(self, topic: str, value: bytes, key=None, partition=None) -> None:
        if decode_value(value)[0] in self.refuse:
            raise self.error
        self.queued.append(value)

    def poll(self, timeout: float = 0) -> int:
        served, self.queued = self.queued, []
        for value in served:
            self.on_delivery(None, Delivered(value, self.offset))
            self.offset += 1
        return len(served)

    def __len__(self) -> int:
        return len(self.queued)

    def purge(self, **_kwargs) -> None:
        self.queued = []

    def close(self) -> None:
        self.poll()


def run_refusing(tmp_path: Path, count: int, refuse: set[int], error: Exception, rate=None):
    """A recorder of `count` sends whose client refuses `refuse`; (stats, acked table)."""
    journal = AckJournal(tmp_path, 4, status_of)
    recorder = Recorder("127.0.0.1:1", "t", {"acks": "all"}, Workload(rate, None, count, 40, 4),
                        journal)  # fmt: skip
    recorder.producer.close()  # the real client never sends: the fake below does
    recorder.producer = RefusingProducer(delivery_callback(journal, recorder.tally), refuse, error)
    recorder.REFUSED_BACKOFF_S = 0.0
    stats = recorder.run(threading.Event())
    journal.close()
    finalized(tmp_path)
    return stats, recorder, pq.read_table(tmp_path / layout.ACKED)


@pytest.mark.parametrize("rate", [None, 5000.0])
def test_a_refused_send_is_a_failed_send_and_the_workload_goes_on(tmp_path: Path, rate) -> None:
    stats, recorder, acked = run_refusing(
        tmp_path, 50, {3, 4, 40}, KafkaException(UNKNOWN_TOPIC), rate
    )
    assert (stats.sent, stats.ok, stats.failed, stats.indeterminate) == (50, 47, 3, 0)
    assert recorder.tally.as_dict() == {"ok": 47, "failed": 3, "indeterminate": 0}
    rows = {r["msg_id"]: r for r in acked.to_pylist()}
    assert len(rows) == 50
    for msg_id in (3, 4, 40):
        assert rows[msg_id]["status"] == "failed"
        assert rows[msg_id]["error"] == "_UNKNOWN_TOPIC"
        assert rows[msg_id]["offset"] is None
    assert sorted(r["offset"] for r in rows.values() if r["status"] == "ok") == list(range(47))


def test_a_refusal_without_a_kafka_error_is_still_journalled(tmp_path: Path) -> None:
    stats, _, acked = run_refusing(tmp_path, 5, {0}, KafkaException("client closed"))
    assert (stats.ok, stats.failed) == (4, 1)
    (row,) = [r for r in acked.to_pylist() if r["msg_id"] == 0]
    assert row["status"] == "failed" and row["error"] == "_FAIL"


def test_a_client_refusing_everything_ends_with_every_send_failed(tmp_path: Path) -> None:
    stats, _, acked = run_refusing(tmp_path, 20, set(range(20)), KafkaException(UNKNOWN_TOPIC))
    assert (stats.sent, stats.ok, stats.failed) == (20, 0, 20)
    assert acked.num_rows == 20
    assert set(acked["status"].to_pylist()) == {"failed"}


class TransactionalClient(RefusingProducer):
    """Stands in for a transactional client: produce() raises for the msg_ids in `refuse`;
    what is queued is delivered ok on poll, on commit, and purged on abort."""

    def __init__(self, on_delivery, refuse: set[int], error: Exception):
        super().__init__(on_delivery, refuse, error)
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0

    def commit_transaction(self, timeout: float) -> None:
        self.poll()
        self.calls.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        purged = KafkaError(KafkaError._PURGE_QUEUE)
        for value in self.queued:
            self.on_delivery(purged, RefusedSend(value, purged))
        self.queued = []
        self.calls.append("abort")

    def close(self, *args) -> None:
        self.calls.append("close")


def test_a_refused_send_aborts_its_transaction_and_the_next_one_goes_on(tmp_path: Path) -> None:
    plan = TransactionPlan(
        size=3, abort_every=None, abort_ratio=None, seed=1, timeout_ms=10_000,
        send_offsets=False, partitions=2,
    )  # fmt: skip
    workload = Workload(rate=None, duration_s=None, count=12, message_bytes=40, keys=2)
    recorder = TransactionalRecorder("127.0.0.1:1", "t", {}, workload, plan, tmp_path)
    recorder.REFUSED_BACKOFF_S = 0.0
    client = TransactionalClient(
        delivery_callback(recorder.journal, recorder.tally), {4}, KafkaException(UNKNOWN_TOPIC)
    )
    recorder.producer = client
    recorder.run(threading.Event())
    events = EventLog(tmp_path / layout.EVENTS)
    assert recorder.close(events) is None
    stats = recorder.stats  # as the runner reads them: once the journal is closed
    events.close()
    finalized(tmp_path)
    # msg 3 went out, msg 4 was refused: transaction 1 ends there, aborted though meant to
    # commit; transaction 2 starts at msg 5. Every msg_id is journalled once.
    assert client.calls.count("abort") == 1 and client.calls.count("commit") == 4
    rows = read_stream(tmp_path / layout.TRANSACTIONS_JOURNAL, TRANSACTION_SCHEMA).to_pylist()
    assert [(r["first_msg_id"], r["messages"], r["outcome"]) for r in rows] == [
        (0, 3, "committed"), (3, 2, "aborted"), (5, 3, "committed"), (8, 3, "committed"),
        (11, 1, "committed"),
    ]  # fmt: skip
    assert rows[1]["intent"] == "commit" and rows[1]["error"].startswith("produce: _UNKNOWN_TOPIC")
    acked = {r["msg_id"]: r for r in pq.read_table(tmp_path / layout.ACKED).to_pylist()}
    assert sorted(acked) == list(range(12))
    assert (acked[4]["status"], acked[4]["error"]) == ("failed", "_UNKNOWN_TOPIC")
    assert acked[3]["status"] == "ok"  # delivered before the refusal; its abort undoes it
    assert (stats.sent, stats.ok, stats.failed) == (12, 11, 1)
    (tally,) = [e for e in load_events(tmp_path) if e["type"] == "recorder_tally"]
    assert tally["reports"] == {"ok": 11, "failed": 1, "indeterminate": 0}
    assert tally["transactions"] == {"committed": 4, "aborted": 1}


def test_producer_processes_whose_client_refuses_every_send_journal_each_as_failed(
    tmp_path: Path,
) -> None:
    """Real clients in real producer processes: a message larger than message.max.bytes is
    refused by produce() itself (MSG_SIZE_TOO_LARGE), no broker needed."""
    workload = Workload(rate=None, duration_s=None, count=24, message_bytes=2000, keys=4)
    config = {"acks": "all", "message.max.bytes": 1000, "log_level": 0}
    tasks = producer_tasks(2, workload, "127.0.0.1:9", "t", config, tmp_path)
    events = EventLog(tmp_path / layout.EVENTS)
    fleet = process_fleet(tasks, events)
    try:
        fleet.start()
        stats = fleet.run(threading.Event())
    finally:
        error = fleet.close(events)
        events.close()
    assert error is None
    assert not [e for e in load_events(tmp_path) if e["type"] == "producer_crashed"]
    assert (stats.sent, stats.ok, stats.failed) == (24, 0, 24)
    acked = finalized(tmp_path)
    assert acked.num_rows == 24
    assert set(acked["status"].to_pylist()) == {"failed"}
    assert set(acked["error"].to_pylist()) == {"MSG_SIZE_TOO_LARGE"}
    (tally,) = [e for e in load_events(tmp_path) if e["type"] == "recorder_tally"]
    assert tally["reports"] == {"ok": 0, "failed": 24, "indeterminate": 0}
