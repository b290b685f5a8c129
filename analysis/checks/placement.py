"""The placement check: every record of the read-back must lie where its producer put it, and
hold what its producer sent (the record of KAFKA-19012, a producer's pooled buffer reused while
still in flight: its bytes sent for another batch, so records land on another partition or
carry another message's key).

A record is judged against its message's rows of acked.parquet (any status: a failed send may
still be in the log, but only where it was sent):
- `partition`: the rows name the partitions the send went to, and the record lies on none;
- `key`: the record's key is none of the keys the rows give the message. Only keys of the
  harness's form (`k<i>`, `p<p>-k<i>`) are compared: a verifiable-protocol client keys its
  records its own way;
- `key_seq`: the key sequence at the head of the record's value is none the rows give it (the
  value's head mixed from two messages).
A record mismatching several ways counts once, under the first of these.

It reads its columns of acked.parquet and readback.parquet itself, so the one-process and the
DataFrame message engines' runs take it alike. Kafka never moves a record to another partition
nor rewrites its key, in any configuration: the judge holds every misplaced record a violation
unless a known bug explains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.checks.arrays import filled_ints
from analysis.checks.check import RunFacts
from analysis.model.anomalies import AnomalyName
from analysis.model.results import ExampleRow
from harness.rundir import layout

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = ["MISMATCHES", "PlacementCheck", "misplaced_records"]

MAX_EXAMPLES: Final = 20
# What a record can fail to match, in the order a record is counted under.
MISMATCHES: Final = ("partition", "key", "key_seq")
HARNESS_KEY: Final = r"^(p[0-9]+-)?k[0-9]+$"  # harness/workload/journal.py key_of
_SENT: Final = ["msg_id", "key", "key_seq", "partition"]
_READ: Final = ["msg_id", "key", "key_seq", "partition", "offset"]


@dataclass(frozen=True)
class Misplaced:
    """The misplaced records, in (partition, offset, msg_id, mismatch) order: where each was
    read, its msg_id, what it mismatched and a partition its send went to (None if unknown)."""

    msg_id: list[int]
    partition: list[int]
    offset: list[int]
    mismatch: list[str]
    sent_partition: list[int | None]

    def rows(self, limit: int) -> list[ExampleRow]:
        """The first `limit` as example rows (the registry's fields for the class)."""
        return [
            {"msg_id": m, "partition": p, "offset": o, "sent_partition": s, "mismatch": w}
            for m, p, o, s, w in zip(
                self.msg_id[:limit], self.partition[:limit], self.offset[:limit],
                self.sent_partition[:limit], self.mismatch[:limit], strict=True,
            )
        ]  # fmt: skip


def misplaced_records(sent: pa.Table, read: pa.Table) -> Misplaced:
    """The records of `read` (columns _READ) not where, or not what, the rows of `sent`
    (columns _SENT) say their message was sent (see the module docstring)."""
    # One entry per distinct record: a slot the read-back read twice is one record.
    read = read.filter(pc.is_valid(read["msg_id"])).group_by(_READ).aggregate([])
    read = _numbered(read)
    harness_key = pc.fill_null(pc.match_substring_regex(read["key"], HARNESS_KEY), False)
    outside = {
        "partition": _outside(read, sent, "partition"),
        "key": _outside(read.filter(harness_key), sent, "key"),
        "key_seq": _outside(read, sent, "key_seq"),
    }
    first: dict[int, str] = {}
    for mismatch in MISMATCHES:
        for row in outside[mismatch]:
            first.setdefault(row, mismatch)
    rows = np.array(sorted(first), dtype=np.int64)
    picked = read.take(pa.array(rows)) if len(rows) else read.slice(0, 0)
    kinds = np.array([MISMATCHES.index(first[r]) for r in picked["row"].to_pylist()], np.int64)
    order = np.lexsort(
        [kinds, *(filled_ints(picked[c], -1) for c in ("msg_id", "offset", "partition"))]
    )
    picked = picked.take(pa.array(order))
    where = _some_partition(sent)
    ids = picked["msg_id"].to_pylist()
    return Misplaced(
        msg_id=ids,
        partition=picked["partition"].to_pylist(),
        offset=picked["offset"].to_pylist(),
        mismatch=[first[row] for row in picked["row"].to_pylist()],
        sent_partition=[where.get(m) for m in ids],
    )


def _numbered(read: pa.Table) -> pa.Table:
    """`read` with a `row` column: each record's number."""
    return read.append_column("row", pa.array(np.arange(read.num_rows, dtype=np.int64)))


def _outside(read: pa.Table, sent: pa.Table, column: str) -> list[int]:
    """The `row` of each record of `read` whose message has a non-null `column` in `sent`
    and whose own `column` is none of them (a null one included)."""
    pairs = sent.select(["msg_id", column]).filter(
        pc.and_(pc.is_valid(sent["msg_id"]), pc.is_valid(sent[column]))
    )
    if not pairs.num_rows or not read.num_rows:
        return []
    pairs = pairs.group_by(["msg_id", column]).aggregate([])
    known = pairs.group_by("msg_id").aggregate([])
    judged = read.select(["msg_id", column, "row"]).join(known, "msg_id", join_type="left semi")
    inside = judged.join(pairs, ["msg_id", column], join_type="left semi")
    rows = judged["row"]
    out = pc.invert(pc.is_in(rows, value_set=inside["row"].combine_chunks()))
    return sorted(rows.filter(out).to_pylist())


def _some_partition(sent: pa.Table) -> dict[int, int]:
    """A partition each message's send went to (the lowest its rows name)."""
    rows = sent.filter(pc.and_(pc.is_valid(sent["msg_id"]), pc.is_valid(sent["partition"])))
    lowest = rows.group_by("msg_id").aggregate([("partition", "min")])
    return dict(zip(lowest["msg_id"].to_pylist(), lowest["partition_min"].to_pylist(), strict=True))


@dataclass(frozen=True)
class PlacementCheck:
    """Misplaced records over a complete run's read-back and acknowledged sends."""

    name: str = "placement"

    def applies(self, run: RunHistory) -> bool:
        """A complete run (a read-back to judge)."""
        return run.complete

    def facts(self, run: RunHistory) -> RunFacts:
        """The count of misplaced records and the first of them, by partition and offset."""
        sent = pq.read_table(run.run_dir / layout.ACKED, columns=_SENT)
        read = pq.read_table(run.run_dir / layout.READBACK, columns=_READ)
        found = misplaced_records(sent, read)
        name = AnomalyName.MISPLACED
        return RunFacts(counts={name: len(found.msg_id)}, examples={name: found.rows(MAX_EXAMPLES)})
