"""The full read-back: every partition from the log start to the high watermark."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from harness.rundir.records import READBACK_SCHEMA
from harness.waiting import Deadline, WaitTimeout, poll_until
from harness.workload.recorder import decode_value

# (msg_id, key_seq) of a record value; Nones for a value that names no message.
Decoder = Callable[[bytes | None], tuple[int | None, int | None]]


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
    message id and key sequence (the client's value format)."""
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
        low, high = _watermarks(consumer, topic, partitions, deadline)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        ends: dict[int, int] = {}
        rows, complete = _consume(consumer, high, deadline, ends, decode)
    finally:
        consumer.close()
    table = pa.Table.from_pylist(rows, schema=READBACK_SCHEMA)
    pq.write_table(table, out)
    return Readback(table.num_rows, low, high, complete, time.monotonic() - started, ends)


# Errors of a partition whose metadata has not reached this client yet (a topic just created,
# a leader just elected): asked again until the read-back's time is up.
RETRIABLE: Final = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._TIMED_OUT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
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
    """True for a KafkaException whose error says the partition is not known yet."""
    return isinstance(exc, KafkaException) and exc.args[0].code() in RETRIABLE


def _consume(
    consumer: Consumer,
    high: dict[int, int],
    deadline: Deadline,
    ends: dict[int, int],
    decode: Decoder = decode_value,
) -> tuple[list, bool]:
    """The records up to each partition's end, and whether every end was reached; `ends` gets
    the offset at which each partition reported its end."""
    pending = {p for p, hw in high.items() if hw > 0}
    rows = []
    while pending and not deadline.passed():
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
            msg_id, key_seq = decode(msg.value())
            key = msg.key()
            rows.append(
                {
                    "msg_id": msg_id,
                    "key": key.decode(errors="replace") if key else None,
                    "key_seq": key_seq,
                    "partition": partition,
                    "offset": offset,
                    "ts_us": msg.timestamp()[1] * 1000,
                }
            )
            if offset >= high[partition] - 1:
                pending.discard(partition)
    return rows, not pending
