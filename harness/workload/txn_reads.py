"""The reading side of a consume-transform-produce transaction (workload.transactions.reads).

Before its sends, each transaction reads up to `reads` records of the run's own topic with a
read_committed consumer the transactional recorder owns: assigned every partition from the
beginning, its position its own (no group, no commits), so it reads the committed log in order
and, once caught up, what the latest transactions committed. Each record read is journalled as
(txn, msg_id, partition, offset, ts_us) in a crash-safe Arrow stream (layout.TXN_READS_JOURNAL,
TXN_READ_SCHEMA), the msg_id decoded from the value as the read-back decodes it; the cycle
check turns the reads of committed transactions into wr edges (G1c).

A read never holds the workload up for long: it ends after `reads` records, after READ_BUDGET_S
in all, or at the first poll that brings nothing within POLL_S (the consumer has handed over
what it had fetched).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from harness.rundir import layout
from harness.rundir.events import now_us
from harness.rundir.streams import StreamWriter, stream_to_parquet
from harness.rundir.transactions import TXN_READ_SCHEMA
from harness.workload.recorder import decode_value

__all__ = [
    "POLL_S",
    "READ_BUDGET_S",
    "ReadRecord",
    "TransactionReader",
    "TxnReadJournal",
    "finalize_txn_reads",
    "open_reader",
    "reader_consumer",
]

log = logging.getLogger("kafka_chaos.transactions")

READ_BUDGET_S: Final = 0.2  # the most one transaction spends reading
POLL_S: Final = 0.05  # one poll's wait: a poll that brings nothing in it ends the read

# (msg_id, key_seq) of a record value; Nones for a value that names no message.
Decoder = Callable[[bytes | None], tuple[int | None, int | None]]


class RecordSource(Protocol):
    """What the reader needs of a consumer (confluent_kafka.Consumer has it)."""

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ReadRecord:
    """One record a transaction read: the msg_id its value names (None: not ours), where it
    lies, and when the consumer returned it (epoch microseconds)."""

    msg_id: int | None
    partition: int
    offset: int
    ts_us: int


class TxnReadJournal:
    """The reads of each transaction, one batch per transaction appended to an Arrow stream as
    it is read (crash-safe). A failure to write is kept in `error`, as TransactionJournal does."""

    def __init__(self, path: Path):
        self.path = path
        self.records = 0
        self._stream = StreamWriter(path, TXN_READ_SCHEMA)

    @property
    def error(self) -> str | None:
        """The first failure to write or close the stream, or None."""
        return self._stream.error

    def write(self, txn: int, records: Sequence[ReadRecord]) -> None:
        """Append the records transaction `txn` read (nothing for none)."""
        if not records:
            return
        self.records += len(records)
        batch = pa.record_batch(
            {
                "txn": [txn] * len(records),
                "msg_id": [r.msg_id for r in records],
                "partition": [r.partition for r in records],
                "offset": [r.offset for r in records],
                "ts_us": [r.ts_us for r in records],
            },
            schema=TXN_READ_SCHEMA,
        )
        self._stream.write(batch)

    def close(self) -> str | None:
        """Close the stream; the first error, or None."""
        self._stream.close()
        return self.error


def reader_consumer(bootstrap: str, topic: str, partitions: int) -> Consumer:
    """A read_committed consumer assigned every partition of `topic` from the beginning; its
    group id is unique and it never commits, so its position is its own."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kchaos-txn-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return consumer


class TransactionReader:
    """Reads up to `reads` records for each transaction from `source` and journals them.

    `read(txn)` is what a transaction calls before its sends; `close()` closes the source and
    the journal. The clock and the source are parameters so the bounds can be tested without a
    broker.
    """

    def __init__(
        self,
        source: RecordSource,
        reads: int,
        journal: TxnReadJournal,
        decode: Decoder = decode_value,
        budget_s: float = READ_BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.source, self.reads, self.journal = source, reads, journal
        self.decode, self.budget_s, self.clock = decode, budget_s, clock
        self._source_error = False

    def read(self, txn: int) -> list[ReadRecord]:
        """The records transaction `txn` read (at most `reads`, within `budget_s`), journalled
        before they are returned. A consumer that raises ends the read with what it had."""
        records: list[ReadRecord] = []
        ends = self.clock() + self.budget_s
        while len(records) < self.reads and (left := ends - self.clock()) > 0:
            try:
                batch = self.source.consume(
                    num_messages=self.reads - len(records), timeout=min(left, POLL_S)
                )
            except (KafkaException, RuntimeError) as exc:
                self._warn_once(exc)
                break
            got = [r for msg in batch if (r := self._record(msg)) is not None]
            records.extend(got[: self.reads - len(records)])
            if not batch:
                break
        self.journal.write(txn, records)
        return records

    def _record(self, msg: Any) -> ReadRecord | None:
        """The ReadRecord of a consumed message; None for an error event or a message without
        a partition and an offset."""
        partition, offset = msg.partition(), msg.offset()
        if msg.error() is not None or partition is None or offset is None:
            return None
        msg_id, _ = self.decode(msg.value())
        return ReadRecord(msg_id, partition, offset, now_us())

    def _warn_once(self, exc: Exception) -> None:
        """Log the consumer's first failure only: it may fail every transaction alike."""
        if not self._source_error:
            log.warning("the transactions' reader failed: %s", exc)
        self._source_error = True

    def close(self) -> str | None:
        """Close the consumer (its errors ignored) and the journal; the journal's first error."""
        with contextlib.suppress(Exception):
            self.source.close()
        return self.journal.close()


def open_reader(
    bootstrap: str, topic: str, partitions: int, reads: int, run_dir: Path
) -> TransactionReader:
    """The reader of a transactional recorder whose transactions read `reads` records each,
    journalling to the run directory's layout.TXN_READS_JOURNAL."""
    journal = TxnReadJournal(run_dir / layout.TXN_READS_JOURNAL)
    return TransactionReader(reader_consumer(bootstrap, topic, partitions), reads, journal)


def finalize_txn_reads(run_dir: Path) -> pa.Table | None:
    """Write txn-reads.parquet from the reads journal; None for a run whose transactions did
    not read."""
    return stream_to_parquet(
        run_dir / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA, run_dir / layout.TXN_READS
    )
