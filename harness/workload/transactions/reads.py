"""The reading side of a consume-transform-produce transaction (workload.transactions.reads).

Before its sends, each transaction reads up to `reads` records of the run's own topic with a
read_committed consumer the transactional recorder owns: assigned every partition from the
beginning (no group membership, so no rebalance moves it), so it reads the committed log in
order and, once caught up, what the latest transactions committed. Each record read is journalled as
(txn, msg_id, partition, offset, ts_us) in a crash-safe Arrow stream (layout.TXN_READS_JOURNAL,
TXN_READ_SCHEMA), the msg_id decoded from the value as the read-back decodes it; the cycle
check turns the reads of committed transactions into wr edges (G1c), and the poll check
their steps (a committed transaction's read skipping records: KAFKA-17582).

The reader knows its position (the offset after the last record it read of each partition):
a transaction that sends offsets commits that position for the group, and after a
transaction that did not commit, with `rewind` (workload.transactions.rewind_on_abort), the
reader goes back to where the last committed transaction left it, as Kafka's exactly-once
example does; without it the position stays past what the aborted transaction read, as a
client left alone does unless a rebalance happens (KAFKA-17582).

A read never holds the workload up for long: it ends after `reads` records, after READ_BUDGET_S
in all, or at the first poll that brings nothing within POLL_S (the consumer has handed over
what it had fetched).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from harness.rundir import layout
from harness.rundir.events import now_us
from harness.rundir.streams import StreamWriter, stream_to_parquet
from harness.rundir.transactions import TXN_READ_SCHEMA
from harness.workload.values import Decoder, decode_value

__all__ = [
    "POLL_S",
    "READ_BUDGET_S",
    "ReadRecord",
    "TransactionReader",
    "finalize_txn_reads",
    "open_reader",
    "reader_consumer",
]

log = logging.getLogger("kafka_chaos.transactions")

READ_BUDGET_S: Final = 0.2  # the most one transaction spends reading
POLL_S: Final = 0.05  # one poll's wait: a poll that brings nothing in it ends the read
REWIND_TIMEOUT_S: Final = 5.0  # the most a rewind waits for the group's committed offsets

# Moves the consumer to these positions (partition -> next offset; a partition left out: its
# beginning, or the group's committed offset where the rewinder asks the group).
Rewinder = Callable[[dict[int, int]], None]


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


def reader_consumer(
    bootstrap: str, topic: str, partitions: int, group: str | None = None
) -> Consumer:
    """A read_committed consumer assigned every partition of `topic` from the beginning. It
    never commits itself: with `group`, the transactions commit its position for that group;
    without, its group id is unique, so its position is its own."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"kchaos-txn-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return consumer


def rewinder(consumer: Consumer, topic: str, partitions: int, from_group: bool) -> Rewinder:
    """Assigns every partition again at the position given, or, `from_group`, at the group's
    committed offset where the group has one (the positions given are the fallback when the
    group does not answer). Assigning again also drops what the consumer had fetched ahead."""

    def rewind(positions: dict[int, int]) -> None:
        targets = dict(positions)
        if from_group:
            asked = [TopicPartition(topic, p) for p in range(partitions)]
            try:
                committed = consumer.committed(asked, timeout=REWIND_TIMEOUT_S)
            except (KafkaException, RuntimeError) as exc:
                log.warning("the group's committed offsets did not come: %s", exc)
                committed = []
            targets |= {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
        consumer.assign(
            [TopicPartition(topic, p, targets.get(p, OFFSET_BEGINNING)) for p in range(partitions)]
        )

    return rewind


class TransactionReader:
    """Reads up to `reads` records for each transaction from `source` and journals them.

    `read(txn)` is what a transaction calls before its sends, `position` what it commits for
    the group, `ended(committed)` what it calls once it ended; `close()` closes the source and
    the journal (a stream of TXN_READ_SCHEMA, one batch per transaction that read). The clock,
    the source and the rewinder are parameters so the bounds can be tested without a broker;
    without a rewinder the reader never goes back.
    """

    def __init__(
        self,
        source: RecordSource,
        reads: int,
        journal: StreamWriter,
        decode: Decoder = decode_value,
        budget_s: float = READ_BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
        rewind: Rewinder | None = None,
        group_metadata: Any = None,
        topic: str = "",
    ):
        self.source, self.reads, self.journal = source, reads, journal
        self.decode, self.budget_s, self.clock = decode, budget_s, clock
        self.rewind = rewind
        self.group_metadata = group_metadata  # for send_offsets_to_transaction; None: no group
        self.topic = topic  # what it reads (named in the offsets it commits)
        self.position: dict[int, int] = {}  # partition -> the offset after the last one read
        self.committed_position: dict[int, int] = {}  # the position the last commit left
        self.rewinds = 0
        self._source_error = False

    def offsets(self) -> list[TopicPartition]:
        """Its position as the offsets a transaction commits for the reader's group."""
        return [TopicPartition(self.topic, p, o) for p, o in sorted(self.position.items())]

    def ended(self, committed: bool) -> None:
        """A transaction ended: committed, its position is the committed one; else, with a
        rewinder, the reader goes back to the committed position (a rewinder that fails is
        logged, and the reader stays where it was)."""
        if committed:
            self.committed_position = dict(self.position)
            return
        if self.rewind is None or self.position == self.committed_position:
            return
        try:
            self.rewind(dict(self.committed_position))
        except (KafkaException, RuntimeError) as exc:
            log.warning("the transactions' reader could not rewind: %s", exc)
            return
        self.position = dict(self.committed_position)
        self.rewinds += 1

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
            # A record past the count is dropped, as the consumer's position already is: the
            # position is what the consumer handed over, read or not.
            self.position |= {r.partition: r.offset + 1 for r in got}
            if not batch:
                break
        self.journal.append(
            txn=txn, msg_id=[r.msg_id for r in records], offset=[r.offset for r in records],
            partition=[r.partition for r in records], ts_us=[r.ts_us for r in records],
        )  # fmt: skip
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
    bootstrap: str,
    topic: str,
    partitions: int,
    reads: int,
    run_dir: Path,
    group: str | None = None,
    rewind: bool = True,
) -> TransactionReader:
    """The reader of a transactional recorder whose transactions read `reads` records each,
    journalling to the run directory's layout.TXN_READS_JOURNAL; its position committed for
    `group` when given, and, with `rewind`, rewound after a transaction that did not commit
    (to the group's committed offsets when it has a group)."""
    journal = StreamWriter(run_dir / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA)
    consumer = reader_consumer(bootstrap, topic, partitions, group)
    back = rewinder(consumer, topic, partitions, group is not None) if rewind else None
    metadata = consumer.consumer_group_metadata() if group is not None else None
    return TransactionReader(
        consumer, reads, journal, rewind=back, group_metadata=metadata, topic=topic
    )


def finalize_txn_reads(run_dir: Path) -> pa.Table | None:
    """Write txn-reads.parquet from the reads journal; None for a run whose transactions did
    not read."""
    return stream_to_parquet(
        run_dir / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA, run_dir / layout.TXN_READS
    )
