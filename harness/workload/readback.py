"""The full read-back: every partition from the log start to the high watermark, written to
readback.parquet as it is read (a row group every ROW_GROUP_RECORDS records), so memory does
not grow with the topic."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from harness.rundir.records import READBACK_SCHEMA
from harness.waiting import Deadline, WaitTimeout, poll_until
from harness.workload.values import Decoder, decode_value

# Records of readback.parquet held in memory before they are written as one row group.
ROW_GROUP_RECORDS: Final = 200_000


@dataclass(frozen=True)
class Readback:
    """What was read and whether it reached every high watermark."""

    records: int
    log_start_offsets: dict[int, int]
    high_watermarks: dict[int, int]
    complete: bool
    seconds: float
    # Where the consumer reached each partition's end: the high watermark under
    # read_uncommitted, the last stable offset under read_committed (an open transaction holds
    # it back).
    end_offsets: dict[int, int] = field(default_factory=dict)


def read_back(
    bootstrap: str,
    topic: str,
    partitions: int,
    out: Path,
    timeout_s: float = 120.0,
    isolation: str = "read_uncommitted",
    decode: Decoder = decode_value,
) -> Readback:
    """Read all of `topic` into `out` (readback.parquet); read_committed skips the records of
    aborted transactions and stops at the last stable offset. `decode` reads each value's
    message id and key sequence (the client's value format). `timeout_s` bounds a wait, not the
    read: the read gives up (incomplete) once no record has come for `timeout_s`, so a log of
    any length is read whole (an hour's soak of 18M records takes ~2.6 min).

    The records go to a file beside `out`, renamed to `out` once all are written: when the
    read raises, `out` is not written (the run has no read-back, as for a read never made)."""
    started = time.monotonic()
    deadline = Deadline.after(timeout_s)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kchaos-readback-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    try:
        with _replaced(out) as partial, RecordSink(partial) as sink:
            low, high = _watermarks(consumer, topic, partitions, deadline)
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            ends: dict[int, int] = {}
            complete = _consume(consumer, high, timeout_s, ends, sink, decode)
    finally:
        consumer.close()
    return Readback(sink.records, low, high, complete, time.monotonic() - started, ends)


@contextlib.contextmanager
def _replaced(out: Path) -> Iterator[Path]:
    """A path beside `out` to write in its stead: renamed to `out` when the block ends, removed
    when it raises (so a file named `out` is always whole)."""
    partial = out.with_name(f".{out.name}.partial")
    try:
        yield partial
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)


class RecordSink:
    """readback.parquet (READBACK_SCHEMA) written as records arrive: batches are held until
    they make `row_group` records, then written as one row group. Closing writes what is held;
    a sink that got no record closes as a file of the schema and no rows."""

    def __init__(self, path: Path, row_group: int | None = None):
        self._writer = pq.ParquetWriter(str(path), READBACK_SCHEMA)
        self._row_group = row_group or ROW_GROUP_RECORDS
        self._held: list[pa.RecordBatch] = []
        self._held_records = 0
        self.records = 0  # added so far

    def add(self, batch: pa.RecordBatch) -> None:
        """Take `batch` (READBACK_SCHEMA); write a row group once enough are held."""
        self._held.append(batch)
        self._held_records += batch.num_rows
        self.records += batch.num_rows
        if self._held_records >= self._row_group:
            self._write_held()

    def _write_held(self) -> None:
        table = pa.Table.from_batches(self._held, schema=READBACK_SCHEMA)
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._held, self._held_records = [], 0

    def close(self) -> None:
        """Write what is held (the schema alone if nothing ever was) and close the file."""
        if self._held_records or not self.records:
            self._write_held()
        self._writer.close()

    def __enter__(self) -> RecordSink:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *rest: object) -> None:
        if error_type is None:
            self.close()
        else:  # the file is dropped: only let go of it
            self._writer.close()


# Errors of a partition whose metadata has not reached this client yet (a topic just created,
# a leader just elected), of a leader just elected whose high watermark has not caught up yet
# (it answers ListOffsets OFFSET_NOT_AVAILABLE until then), or of a connection to a broker that
# just came back (librdkafka destroys and remakes its broker handle, _DESTROY_BROKER;
# _TRANSPORT): asked again until the read-back's time is up.
RETRIABLE: Final = frozenset(
    {
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._TIMED_OUT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)


def _watermarks(
    consumer: Consumer, topic: str, partitions: int, deadline: Deadline
) -> tuple[dict[int, int], dict[int, int]]:
    """Each partition's (low, high) watermarks, asked again while the partition is not known
    yet (RETRIABLE) until `deadline`; then that KafkaException is raised, as any other at once."""
    low, high = {}, {}
    for p in range(partitions):

        def watermarks(p: int = p) -> tuple[int, int]:
            return consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10, cached=False
            )

        try:
            low[p], high[p] = poll_until(
                watermarks,
                deadline.remaining(),
                f"the watermarks of {topic}-{p}",
                retry_on=_retriable,
            )
        except WaitTimeout as timeout:
            raise timeout.last_error or timeout from None
    return low, high


def _retriable(exc: Exception) -> bool:
    """True for a KafkaException whose error says the partition is not known yet, or its
    broker's connection is being remade."""
    return isinstance(exc, KafkaException) and exc.args[0].code() in RETRIABLE


def _consume(
    consumer: Consumer,
    high: dict[int, int],
    stall_s: float,
    ends: dict[int, int],
    sink: RecordSink,
    decode: Decoder = decode_value,
) -> bool:
    """Add the records up to each partition's end to `sink`, batch by batch, until every end
    is reached or `stall_s` passes without a record; whether every end was reached. `ends`
    gets the offset at which each partition reported its end."""
    pending = {p for p, hw in high.items() if hw > 0}
    deadline = Deadline.after(stall_s)
    while pending and not deadline.passed():
        records: list[Message] = []
        for msg in consumer.consume(num_messages=5000, timeout=1.0):
            error = msg.error()
            if error is not None:
                eof_partition, eof_offset = msg.partition(), msg.offset()
                if error.code() == KafkaError._PARTITION_EOF and eof_partition is not None:
                    pending.discard(eof_partition)
                    ends[eof_partition] = eof_offset if eof_offset is not None else -1
                continue
            partition, offset = msg.partition(), msg.offset()
            if partition is None or offset is None:  # a record always has both
                continue
            records.append(msg)
            if offset >= high[partition] - 1:
                pending.discard(partition)
        if records:
            sink.add(_batch(records, decode))
            deadline = Deadline.after(stall_s)  # progress: the wait starts again
    return not pending


def _batch(records: list[Message], decode: Decoder) -> pa.RecordBatch:
    """readback.parquet's rows of consumed records (each with a partition and an offset),
    built column by column."""
    ids, key_seqs = zip(*(decode(msg.value()) for msg in records), strict=True)
    keys = [key.decode(errors="replace") if (key := msg.key()) else None for msg in records]
    return pa.record_batch(
        [
            pa.array(ids, pa.int64()),
            pa.array(keys, pa.string()),
            pa.array(key_seqs, pa.int64()),
            pa.array([msg.partition() for msg in records], pa.int32()),
            pa.array([msg.offset() for msg in records], pa.int64()),
            pa.array([msg.timestamp()[1] * 1000 for msg in records], pa.int64()),
        ],
        schema=READBACK_SCHEMA,
    )
