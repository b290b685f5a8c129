"""The read-back's watermark query waits for a just-created topic's partitions, within the
read-back's own time, and raises what it cannot wait out as before (a KafkaException); the
read-back writes readback.parquet row group by row group, renamed into place when whole."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from harness.rundir.records import READBACK_SCHEMA
from harness.waiting import Deadline
from harness.workload import readback
from harness.workload.values import decode_value, encode_value


class _JustCreated:
    """A consumer whose metadata knows each partition only after `unknown_for` asks."""

    def __init__(self, code: int = KafkaError._UNKNOWN_PARTITION, unknown_for: int = 2) -> None:
        self.code, self.unknown_for = code, unknown_for
        self.asks: dict[int, int] = {}

    def get_watermark_offsets(self, tp, timeout: float, cached: bool) -> tuple[int, int]:
        self.asks[tp.partition] = self.asks.get(tp.partition, 0) + 1
        if self.asks[tp.partition] <= self.unknown_for:
            raise KafkaException(KafkaError(self.code))
        return 0, 10 * tp.partition


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)


@pytest.mark.parametrize("code", sorted(readback.RETRIABLE))
def test_the_read_back_waits_for_a_just_created_partition(code: int) -> None:
    consumer = _JustCreated(code)
    low, high = readback._watermarks(consumer, "t", 3, Deadline.after(60))
    assert low == {0: 0, 1: 0, 2: 0} and high == {0: 0, 1: 10, 2: 20}
    assert consumer.asks == {0: 3, 1: 3, 2: 3}


def test_the_read_back_does_not_retry_what_is_not_retriable() -> None:
    consumer = _JustCreated(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as caught:
        readback._watermarks(consumer, "t", 1, Deadline.after(60))
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consumer.asks == {0: 1}


def test_when_the_read_back_time_is_up_the_error_is_raised_as_before() -> None:
    consumer = _JustCreated(unknown_for=10**9)
    with pytest.raises(KafkaException) as caught:
        readback._watermarks(consumer, "t", 2, Deadline.after(-1))
    assert caught.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    assert consumer.asks == {0: 1}  # asked once: no time was left to ask again


# --- readback.parquet written as it is read ----------------------------------------------------


class FakeTopic:
    """The consumer read_back builds, over partitions held in memory (`logs`): each consume
    hands out up to `per_call` messages round-robin over the partitions, a partition's EOF
    after its last record; the `fail_at`-th consume raises. With `stuck`, the last record of
    each partition never comes (nor its EOF)."""

    def __init__(
        self,
        logs: dict[int, list[Message]],
        per_call: int = 7,
        fail_at: int = 0,
        stuck: bool = False,
    ):
        self.logs, self.per_call, self.fail_at, self.stuck = logs, per_call, fail_at, stuck
        self.handed: list[Message] = []  # every message handed out, in order
        self.calls, self.closed = 0, False

    def __call__(self, config: dict) -> FakeTopic:  # stands in for the Consumer class
        return self

    def get_watermark_offsets(self, tp, timeout: float, cached: bool) -> tuple[int, int]:
        return 0, len(self.logs[tp.partition])

    def assign(self, partitions: list) -> None:
        self.queues = {}
        for tp in partitions:
            log = self.logs[tp.partition]
            end = eof(tp.partition, len(log))
            self.queues[tp.partition] = log[:-1] if self.stuck else [*log, end]

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        out: list[Message] = []
        while len(out) < self.per_call and any(self.queues.values()):
            for queue in self.queues.values():
                if queue and len(out) < self.per_call:
                    out.append(queue.pop(0))
        self.handed += out
        return out

    def close(self) -> None:
        self.closed = True


def eof(partition: int, offset: int) -> Message:
    """The message that tells a partition's end."""
    end = KafkaError(KafkaError._PARTITION_EOF)
    return Message(topic="t", partition=partition, offset=offset, error=end)


def record(partition: int, offset: int) -> Message:
    """A record of ours (msg_id 100p+o), now and then one whose value or key is not."""
    value = b"not ours" if offset % 11 == 5 else encode_value(100 * partition + offset, offset, 40)
    key = None if offset % 7 == 3 else b"" if offset % 7 == 4 else f"k{offset % 5}".encode()
    stamp = (1, 1_700_000_000_000 + offset)
    return Message(
        topic="t", partition=partition, offset=offset, key=key, value=value, timestamp=stamp
    )


def whole_table(handed: list[Message]) -> pa.Table:
    """readback.parquet as the read-back wrote it before it streamed: a dict per record."""
    rows = []
    for msg in handed:
        if msg.error() is None:
            msg_id, key_seq = decode_value(msg.value())
            key = msg.key()
            rows.append(
                {
                    "msg_id": msg_id,
                    "key": key.decode(errors="replace") if key else None,
                    "key_seq": key_seq,
                    "partition": msg.partition(),
                    "offset": msg.offset(),
                    "ts_us": msg.timestamp()[1] * 1000,
                }
            )
    return pa.Table.from_pylist(rows, schema=READBACK_SCHEMA)


@pytest.fixture
def small_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readback, "ROW_GROUP_RECORDS", 10)


def test_the_read_back_writes_row_group_by_row_group_what_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_row_groups: None
) -> None:
    logs = {0: [], 1: [record(1, o) for o in range(25)], 2: [record(2, o) for o in range(40)]}
    topic = FakeTopic(logs)
    monkeypatch.setattr(readback, "Consumer", topic)
    out = tmp_path / "readback.parquet"
    out.write_bytes(b"an older read-back")
    result = readback.read_back("127.0.0.1:1", "t", 3, out)
    assert pq.read_table(out).equals(whole_table(topic.handed))
    metadata = pq.ParquetFile(out).metadata
    groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    # Written once 10 records are held; a consume hands out at most 7.
    assert len(groups) > 1 and all(10 <= group < 17 for group in groups[:-1])
    assert (result.records, result.complete) == (65, True)
    assert result.log_start_offsets == {0: 0, 1: 0, 2: 0}
    assert result.high_watermarks == {0: 0, 1: 25, 2: 40}
    assert result.end_offsets == {0: 0, 1: 25, 2: 40} and topic.closed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["readback.parquet"]


def test_an_empty_read_back_is_a_file_of_the_schema_and_no_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readback, "Consumer", FakeTopic({0: [], 1: []}))
    result = readback.read_back("127.0.0.1:1", "t", 2, tmp_path / "readback.parquet")
    table = pq.read_table(tmp_path / "readback.parquet")
    assert table.num_rows == 0 and table.schema.equals(READBACK_SCHEMA)
    assert (result.records, result.complete) == (0, True)


def test_a_read_back_out_of_time_keeps_what_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sixth record never comes (a high watermark of 6, 5 records to read): when the time
    is up the file holds the five, and the read-back is incomplete."""
    topic = FakeTopic({0: [record(0, o) for o in range(6)]}, stuck=True)
    monkeypatch.setattr(readback, "Consumer", topic)
    result = readback.read_back("127.0.0.1:1", "t", 1, tmp_path / "r.parquet", timeout_s=0.05)
    assert (result.records, result.complete, result.end_offsets) == (5, False, {})
    assert pq.read_table(tmp_path / "r.parquet").equals(whole_table(topic.handed))


class SlowTopic(FakeTopic):
    """A topic whose every consume takes `delay_s`: a long log read at a steady pace."""

    delay_s = 0.02

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        threading.Event().wait(self.delay_s)  # time.sleep is a no-op in this module's tests
        return super().consume(num_messages, timeout)


def test_a_read_back_longer_than_its_timeout_is_whole_while_records_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time bounds a wait for records, not the read: 30 consumes of 20 ms each take 0.6 s,
    ten times the timeout, and every record is read (the soak's 18M-record log took 2.6 min
    where a 2 min limit cut it at 14.4M)."""
    topic = SlowTopic({0: [record(0, o) for o in range(200)]})
    monkeypatch.setattr(readback, "Consumer", topic)
    started = time.monotonic()
    result = readback.read_back("127.0.0.1:1", "t", 1, tmp_path / "r.parquet", timeout_s=0.06)
    assert time.monotonic() - started > 0.06 * 5  # it outlived its timeout many times over
    assert (result.records, result.complete) == (200, True)


def test_a_read_back_that_fails_midway_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_row_groups: None
) -> None:
    """Row groups were written when the read failed: no readback.parquet (the run has no
    read-back, as when the read fails before any record), nothing half-written left."""
    topic = FakeTopic({0: [record(0, o) for o in range(50)]}, per_call=5, fail_at=6)
    monkeypatch.setattr(readback, "Consumer", topic)
    with pytest.raises(KafkaException):
        readback.read_back("127.0.0.1:1", "t", 1, tmp_path / "readback.parquet")
    assert len(topic.handed) == 25 and topic.closed
    assert list(tmp_path.iterdir()) == []
