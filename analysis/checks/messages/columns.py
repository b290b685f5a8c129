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
    """readback.parquet as arrays, one entry per distinct record, in slot order."""

    msg_id: np.ndarray  # NO_ID where the value was not ours
    identified: np.ndarray
    partition: np.ndarray
    offset: np.ndarray
    slot: np.ndarray  # sorted ascending, unique
    key: pa.Array
    key_seq: np.ndarray
    has_seq: np.ndarray

    @property
    def n(self) -> int:
        """Distinct records read."""
        return len(self.slot)

    @classmethod
    def read(cls, path: Path) -> Reads:
        """The records of readback.parquet, each (partition, offset) once: the consumer may read
        one record twice (a retried fetch), and that is one record, never a Kafka duplicate."""
        return cls.of(pq.read_table(path, columns=list(READBACK_COLUMNS)))

    @classmethod
    def of(cls, table: pa.Table) -> Reads:
        """The distinct records of a table holding READBACK_COLUMNS (rows in any order)."""
        partition, _ = ints(table["partition"], NULL)
        offset, _ = ints(table["offset"], NULL)
        slot = slot_of(partition, offset)
        order = np.argsort(slot, kind="stable")
        first = np.ones(len(order), dtype=bool)
        first[1:] = slot[order][1:] != slot[order][:-1]
        keep = order[first]
        msg_id, identified = ints(table["msg_id"], NO_ID)
        key_seq, has_seq = ints(table["key_seq"], 0)
        return cls(
            msg_id=msg_id[keep],
            identified=identified[keep],
            partition=partition[keep],
            offset=offset[keep],
            slot=slot[keep],
            key=table["key"].cast(pa.string()).take(pa.array(keep)).combine_chunks(),
            key_seq=key_seq[keep],
            has_seq=has_seq[keep],
        )


def distinct(ordered: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array (np.unique's hashing is far slower on millions)."""
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def max_of(values: np.ndarray) -> int:
    """The largest value, -1 for none."""
    return int(values.max()) if len(values) else -1
