"""A run's two Parquet files as numpy columns: acked.parquet per send, readback.parquet per
distinct record, and the markers that stand for a missing value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.checks.arrays import filled_ints, slot_of
from harness.rundir.records import NO_REPORT, STATUSES

NULL = -1  # a missing partition or offset in the int columns below (real ones are >= 0)


NONE_TS = np.iinfo(np.int64).min  # a missing time


NO_ID = np.iinfo(np.int64).max  # a missing holder id
# Status codes: 0 for a value that is no status, else 1 + its index in STATUSES; the highest
# code of a message's acked rows is its status (an indeterminate retry outranks an ok).


CODE = {status: code for code, status in enumerate(STATUSES, start=1)}


# The columns of acked.parquet and readback.parquet the checker reads.
ACKED_COLUMNS = ("msg_id", "status", "partition", "offset", "error", "send_ts_us", "ack_ts_us")
READBACK_COLUMNS = ("msg_id", "key", "key_seq", "partition", "offset")


def ints(column: pa.ChunkedArray, fill: int) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as fill, validity) of an integer column, as int64 numpy arrays."""
    return filled_ints(column, fill), pc.is_valid(column).to_numpy(zero_copy_only=False)


def located(column: pa.ChunkedArray) -> np.ndarray:
    """A partition or offset column with unknown ones as NULL: librdkafka reports offset -1001
    under acks=0 and partition -1 when unassigned."""
    values, valid = ints(column, NULL)
    return np.where(valid & (values >= 0), values, NULL)


@dataclass
class Acked:
    """acked.parquet as arrays: one entry per row (per send), msg_id NO_ID where null."""

    msg_id: np.ndarray
    identified: np.ndarray
    status: np.ndarray  # CODE, 0 for an unknown status
    partition: np.ndarray  # NULL where unknown
    offset: np.ndarray  # NULL where unknown
    send_ts: np.ndarray  # NONE_TS where null
    ack_ts: np.ndarray  # NONE_TS where null
    reported: np.ndarray  # a delivery report arrived (error is not NO_REPORT)

    @classmethod
    def read(cls, path: Path) -> Acked:
        """The columns the checker uses, cast to the harness's types."""
        return cls.of(pq.read_table(path, columns=list(ACKED_COLUMNS)))

    @classmethod
    def of(cls, table: pa.Table) -> Acked:
        """The arrays of a table holding ACKED_COLUMNS (rows in any order)."""
        msg_id, identified = ints(table["msg_id"], NO_ID)
        index = pc.index_in(table["status"].cast(pa.string()), value_set=pa.array(STATUSES))
        error = table["error"].cast(pa.string())
        reported = pc.or_kleene(pc.is_null(error), pc.not_equal(error, NO_REPORT))
        return cls(
            msg_id=msg_id,
            identified=identified,
            status=pc.fill_null(pc.add(index, 1), 0).to_numpy(zero_copy_only=False),
            partition=located(table["partition"]),
            offset=located(table["offset"]),
            send_ts=ints(table["send_ts_us"], NONE_TS)[0],
            ack_ts=ints(table["ack_ts_us"], NONE_TS)[0],
            reported=reported.to_numpy(zero_copy_only=False),
        )


@dataclass
class Reads:
    """readback.parquet as arrays, one entry per distinct record, in slot order (then msg_id).

    A record is one message at one slot: rows repeating a slot and a msg_id are one retried
    fetch, never a Kafka duplicate, whatever their row order. Two messages at one slot are two
    records, both read: the read-back contradicts itself there (`contradicted`), and neither
    is called lost or resolved by row order.
    """

    msg_id: np.ndarray  # NO_ID where the value was not ours
    identified: np.ndarray
    partition: np.ndarray
    offset: np.ndarray
    slot: np.ndarray  # sorted ascending; repeated where the read-back contradicts itself
    key: pa.Array
    key_seq: np.ndarray
    has_seq: np.ndarray

    @property
    def n(self) -> int:
        """Distinct records read."""
        return len(self.slot)

    def contradicted(self) -> np.ndarray:
        """The index of the first record of each slot that holds more than one message."""
        again = self.slot[1:] == self.slot[:-1]
        first: np.ndarray = np.flatnonzero(again & np.r_[True, ~again[:-1]])
        return first

    def contradiction_rows(self, limit: int) -> list[dict[str, int | None]]:
        """The first `limit` offsets holding more than one message (slot order): the lowest two
        msg_ids read there (None: not the producer's) and how many messages."""
        first = self.contradicted()[:limit]
        ends = np.searchsorted(self.slot, self.slot[first], "right")
        return [
            {
                "partition": int(self.partition[i]),
                "offset": int(self.offset[i]),
                "msg_id": self._id(i),
                "readback_msg_id_at_offset": self._id(i + 1),
                "reads": int(end - i),
            }
            for i, end in zip(first.tolist(), ends.tolist(), strict=True)
        ]

    def _id(self, record: int) -> int | None:
        """The msg_id of a record, None for one that is not the producer's."""
        return int(self.msg_id[record]) if self.identified[record] else None

    @classmethod
    def read(cls, path: Path) -> Reads:
        """The records of readback.parquet (see the class docstring)."""
        return cls.of(pq.read_table(path, columns=list(READBACK_COLUMNS)))

    @classmethod
    def of(cls, table: pa.Table) -> Reads:
        """The distinct records of a table holding READBACK_COLUMNS (rows in any order): of
        rows repeating a slot and a msg_id, the one with the lowest (key_seq, key), nulls
        first, is kept."""
        partition, _ = ints(table["partition"], NULL)
        offset, _ = ints(table["offset"], NULL)
        msg_id, identified = ints(table["msg_id"], NO_ID)
        key_seq, has_seq = ints(table["key_seq"], 0)
        key = table["key"].cast(pa.string()).combine_chunks()
        slot = slot_of(partition, offset)
        order = _record_order(slot, np.where(identified, msg_id, NO_ID), has_seq, key_seq, key)
        ident = np.where(identified, msg_id, NO_ID)[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (slot[order][1:] != slot[order][:-1]) | (ident[1:] != ident[:-1])
        keep = order[first]
        return cls(
            msg_id=msg_id[keep],
            identified=identified[keep],
            partition=partition[keep],
            offset=offset[keep],
            slot=slot[keep],
            key=key.take(pa.array(keep)),
            key_seq=key_seq[keep],
            has_seq=has_seq[keep],
        )


def _record_order(
    slot: np.ndarray, ident: np.ndarray, has_seq: np.ndarray, key_seq: np.ndarray, key: pa.Array
) -> np.ndarray:
    """The rows by slot, then msg_id, then key_seq and key (nulls first): a total order of
    their contents, so the records kept never depend on row order. Only the rows of a slot
    read more than once are sorted past the slot (a plain sort of millions is far cheaper)."""
    order = np.argsort(slot, kind="stable")
    same = slot[order][1:] == slot[order][:-1]
    repeated = np.r_[same, False] | np.r_[False, same]
    if not repeated.any():
        return order
    rows = order[repeated]
    keys = key.take(pa.array(rows))
    _, key_rank = np.unique(np.array(pc.fill_null(keys, "").to_pylist()), return_inverse=True)
    keyed = pc.is_valid(keys).to_numpy(zero_copy_only=False)
    by = (key_rank, keyed, key_seq[rows], has_seq[rows], ident[rows], slot[rows])
    order[repeated] = rows[np.lexsort(by)]
    return order


def distinct(ordered: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array (np.unique's hashing is far slower on millions)."""
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def max_of(values: np.ndarray) -> int:
    """The largest value, -1 for none."""
    return int(values.max()) if len(values) else -1
