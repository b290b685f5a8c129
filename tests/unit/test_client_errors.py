"""A run survives its client: a send produce() refuses synchronously is journalled as failed,
counted in the recorder's tally, and the workload goes on."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.rundir import layout
from harness.workload.journal import AckJournal, finalize
from harness.workload.recorder import (
    Recorder,
    Workload,
    decode_value,
    delivery_callback,
    status_of,
)

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

    def produce(self, topic: str, value: bytes, key=None) -> None:
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
    finalize(tmp_path)
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
