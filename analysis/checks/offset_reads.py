"""The offset-reads check: every read of one partition offset against every other read of it
(Jepsen's inconsistent offsets between reads, whatever the row order).

A partition offset names one record for ever: whoever reads it, at whatever isolation level,
must get the same message. The readers of a run are the final read_committed read-back
(readback.parquet), the read_uncommitted read-back of a transactional run, the transactions'
reads (txn-reads.parquet, one reader per transaction) and the consumer group's processed
records (one reader per member). An offset counts once when two reads of it returned
different messages and one of the two is not the read_committed read-back's (that read-back
against itself is `inconsistent_offsets`, the message check's). A record that is not the
producer's counts as one message, whoever read it.

Only offsets two reads returned a record for are compared: a read_uncommitted read returns an
aborted transaction's records where read_committed returns nothing, which is visibility, not a
disagreement about which record sits at the offset.

It applies where a run holds a reader besides the read-back (then the cycle or the liveness
check has already read the read-back's records: it shares them), reads only the columns it
needs of each other reader, one reader at a time, and compares each with the read-back by
binary search over its reads in slot order; only the reads at offsets the read-back never
returned are grouped among themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.checks.arrays import SLOT_BITS, filled_ints, gather, slot_of
from analysis.checks.check import RunFacts
from analysis.checks.messages.columns import NO_ID
from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow
from harness.rundir import layout
from harness.rundir.records import PROCESSED_SCHEMA
from harness.rundir.streams import read_stream

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = [
    "CONSUMER",
    "READBACK",
    "TRANSACTION",
    "UNCOMMITTED",
    "OffsetReadsCheck",
    "Reads",
    "disagreements",
    "reader_code",
    "reader_name",
]

MAX_EXAMPLES: Final = 20

# The kinds of reader; a reader's code is its kind << READER_BITS | its number (the transaction
# or the member), so codes sort by kind first and the read_committed read-back's is 0.
READBACK, UNCOMMITTED, TRANSACTION, CONSUMER = 0, 1, 2, 3
READER_BITS: Final = 32
_KIND_NAMES: Final = {
    READBACK: "read-back",
    UNCOMMITTED: "read_uncommitted read-back",
    TRANSACTION: "transaction",
    CONSUMER: "consumer",
}


def reader_code(kind: int, number: int = 0) -> int:
    """The code of reader `number` of `kind` (a transaction's number, a member's)."""
    return kind << READER_BITS | number


def reader_name(code: int) -> str:
    """'read-back', 'read_uncommitted read-back', 'transaction 7' or 'consumer 2'."""
    kind, number = code >> READER_BITS, code & ((1 << READER_BITS) - 1)
    named = _KIND_NAMES[kind]
    return f"{named} {number}" if kind in (TRANSACTION, CONSUMER) else named


@dataclass(frozen=True)
class Reads:
    """Reads of offsets: each one's slot (analysis.checks.arrays.slot_of), the msg_id it returned
    (NO_ID: a record that is not the producer's) and its reader's code."""

    slot: np.ndarray
    ident: np.ndarray
    reader: np.ndarray

    @classmethod
    def of(cls, table: pa.Table, reader: np.ndarray | int) -> Reads:
        """The reads of a table holding msg_id, partition and offset (rows without a partition
        or an offset left out), all by `reader` or each by its own."""
        partition = filled_ints(table["partition"], -1)
        offset = filled_ints(table["offset"], -1)
        ident = filled_ints(table["msg_id"], NO_ID)
        readers = np.broadcast_to(np.asarray(reader, dtype=np.int64), partition.shape)
        kept = (partition >= 0) & (offset >= 0)
        return cls(slot_of(partition[kept], offset[kept]), ident[kept], readers[kept])

    def take(self, rows: np.ndarray | slice) -> Reads:
        """The reads at `rows` (an index, a mask or a slice)."""
        return Reads(self.slot[rows], self.ident[rows], self.reader[rows])

    @classmethod
    def joined(cls, parts: list[Reads]) -> Reads:
        """The reads of every part, in order."""
        empty = np.zeros(0, dtype=np.int64)
        return cls(
            np.concatenate([empty, *(p.slot for p in parts)]),
            np.concatenate([empty, *(p.ident for p in parts)]),
            np.concatenate([empty, *(p.reader for p in parts)]),
        )


@dataclass(frozen=True)
class Disagreements:
    """The offsets two reads disagree at (one of them not the read-back's), sorted, and the reads
    that show it there: each other read differing from the read-back, the read-back's records
    there, and every read of an offset the read-back never returned."""

    slots: np.ndarray
    evidence: Reads

    def rows(self, limit: int) -> list[ExampleRow]:
        """The first `limit` offsets, each with one pair of reads that disagree: the other
        reader's with the lowest (code, msg_id), against the read-back's record where it
        differs, else the next reader's with another message."""
        shown = self.slots[:limit]
        if not len(shown):
            return []
        at = self.evidence.take(self.evidence.slot <= shown[-1])
        at = at.take(np.lexsort((at.ident, at.reader, at.slot)))
        starts = np.searchsorted(at.slot, shown, "left")
        ends = np.searchsorted(at.slot, shown, "right")
        return [
            _pair(at.take(slice(a, b))) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
        ]


def _pair(reads: Reads) -> ExampleRow:
    """The example row of one offset's reads, sorted by (reader, msg_id)."""
    first = int(np.flatnonzero(reads.reader != 0)[0])
    differ = np.flatnonzero(reads.ident != reads.ident[first])
    other = int(differ[0])  # the read-back's first: its code is 0
    slot = int(reads.slot[first])
    return {
        "partition": slot >> SLOT_BITS,
        "offset": slot & ((1 << SLOT_BITS) - 1),
        "msg_id": _msg(reads.ident[first]),
        "read_by": reader_name(int(reads.reader[first])),
        "other_msg_id": _msg(reads.ident[other]),
        "other_read_by": reader_name(int(reads.reader[other])),
    }


def _msg(ident: np.int64) -> int | None:
    """A msg_id, None for a record that is not the producer's."""
    return None if ident == NO_ID else int(ident)


def disagreements(readback: Reads, others: Iterable[Reads]) -> Disagreements:
    """The offsets at which two reads returned different messages, one of the two not of
    `readback` (the read_committed read-back, any row order); `others` may be consumed one at a
    time (each is compared with the read-back, then only its reads that show something kept)."""
    slot, ident = _distinct(readback)
    # How many records the read-back holds at each row's slot (more than one: contradicted).
    starts = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1]]) if len(slot) else slot
    held = np.repeat(np.diff(np.r_[starts, len(slot)]), np.diff(np.r_[starts, len(slot)]))
    shown: list[Reads] = []
    unread: list[Reads] = []  # reads of offsets the read-back never returned
    for reads in map(_by_slot, others):
        # Keys in order make the binary search walk the read-back once (far fewer cache misses).
        lo = np.searchsorted(slot, reads.slot, "left")
        at = np.where(lo < len(slot), lo, -1)
        at = np.where(gather(slot, at, -1) == reads.slot, at, -1)
        found = gather(held, at, 0)
        # One record there: a read differs from it; several: the read-back contradicts itself,
        # so any other read of the offset differs from one of them.
        same = (found == 1) & (gather(ident, at, NO_ID) == reads.ident)
        shown.append(reads.take((found > 0) & ~same))
        unread.append(reads.take(found == 0))
    shown.append(_among_themselves(Reads.joined(unread)))
    evidence = Reads.joined(shown)
    slots = np.unique(evidence.slot)
    rb = _at(slot, slots)
    mine = Reads(slot[rb], ident[rb], np.zeros(len(rb), dtype=np.int64))
    return Disagreements(slots, Reads.joined([evidence, mine]))


def _by_slot(reads: Reads) -> Reads:
    """The reads sorted by slot, unless they already are."""
    if (np.diff(reads.slot) >= 0).all():
        return reads
    return reads.take(np.argsort(reads.slot, kind="stable"))


def _distinct(readback: Reads) -> tuple[np.ndarray, np.ndarray]:
    """The read-back's distinct (slot, msg_id) pairs, sorted: as given when they already are
    (Reads' order of readback.parquet), else sorted and deduplicated."""
    slot, ident = readback.slot, readback.ident
    step_slot = np.diff(slot)
    if not ((step_slot > 0) | ((step_slot == 0) & (np.diff(ident) > 0))).all():
        order = np.lexsort((ident, slot))
        slot, ident = slot[order], ident[order]
        first = _firsts(slot, ident)
        slot, ident = slot[first], ident[first]
    return slot, ident


def _firsts(slot: np.ndarray, ident: np.ndarray) -> np.ndarray:
    """A mask of the first row of each (slot, msg_id) run of rows sorted by both."""
    first = np.ones(len(slot), dtype=bool)
    first[1:] = (slot[1:] != slot[:-1]) | (ident[1:] != ident[:-1])
    return first


def _among_themselves(reads: Reads) -> Reads:
    """Of reads the read-back never returned, those at offsets read with two messages."""
    order = np.lexsort((reads.ident, reads.slot))
    slot, ident = reads.slot[order], reads.ident[order]
    pairs = slot[_firsts(slot, ident)]
    twice = np.unique(pairs[1:][pairs[1:] == pairs[:-1]])  # offsets with a second message
    return reads.take(np.isin(reads.slot, twice))


def _at(slot: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The rows of sorted `slot` whose value is one of sorted `wanted`."""
    lo = np.searchsorted(slot, wanted, "left")
    counts = np.searchsorted(slot, wanted, "right") - lo
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    rows: np.ndarray = np.repeat(lo, counts) + within
    return rows


def _others(run: RunHistory) -> Iterator[Reads]:
    """Each reader besides the read_committed read-back, read when the comparison reaches it:
    the read_uncommitted read-back, the transactions' reads, each member start's journal."""
    uncommitted = run.run_dir / layout.READBACK_UNCOMMITTED
    if uncommitted.is_file():
        table = pq.read_table(uncommitted, columns=["msg_id", "partition", "offset"])
        yield Reads.of(table, reader_code(UNCOMMITTED))
    if run.txn_reads is not None:
        txn = filled_ints(run.txn_reads["txn"], 0)
        yield Reads.of(run.txn_reads, reader_code(TRANSACTION) | txn)
    for path in sorted(run.run_dir.glob(layout.CONSUMER_PROCESSED_GLOB)):
        table = read_stream(path, PROCESSED_SCHEMA)
        yield Reads.of(table, reader_code(CONSUMER) | filled_ints(table["consumer"], 0))


@dataclass(frozen=True)
class OffsetReadsCheck:
    """Inconsistent offsets between the read-back and the run's other readers."""

    name: str = "offset_reads"

    def applies(self, run: RunHistory) -> bool:
        """A complete run with a reader besides the read_committed read-back."""
        others = (run.run_dir / layout.READBACK_UNCOMMITTED).is_file() or run.has_group
        return run.complete and (others or run.txn_reads is not None)

    def facts(self, run: RunHistory) -> RunFacts:
        """The count of offsets read with two messages and the first of them, by offset."""
        records = run.reads
        readback = Reads(
            records.slot,
            np.where(records.identified, records.msg_id, NO_ID),
            np.zeros(records.n, dtype=np.int64),
        )
        found = disagreements(readback, _others(run))
        name = AnomalyName.INCONSISTENT_READS
        return RunFacts(counts={name: len(found.slots)}, examples={name: found.rows(MAX_EXAMPLES)})
