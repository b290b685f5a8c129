"""What one send became (Status) and the Arrow schemas of the run directory's tables."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

import pyarrow as pa

# ---------------------------------------------------------------------------------------------
# Send statuses


class Status(StrEnum):
    """The status of one send, as the producer learnt it."""

    OK = "ok"  # a delivery report without error: acknowledged
    FAILED = "failed"  # a definite error: the write was refused
    INDETERMINATE = "indeterminate"  # unknown: may or may not be in the log, never a loss


STATUSES: Final = tuple(s.value for s in Status)
# The `error` of an acked.parquet row whose send never got a delivery report.
NO_REPORT: Final = "no delivery report"

# ---------------------------------------------------------------------------------------------
# Several producers (workload.producers > 1)

# Producer p's msg_ids are p * PRODUCER_ID_STRIDE + i (i counting its own sends from 0), so ids
# never collide and producer p = msg_id // PRODUCER_ID_STRIDE. 10^12 exceeds the most sends
# a run allows (limits.MAX_RATE * MAX_DURATION_S), and 15 digits leave room for 1,000 producers.
PRODUCER_ID_STRIDE: Final = 10**12
# acked.parquet of a run with several producers carries this extra column (int32) after
# ACKED_SCHEMA's: the producer that sent the row. A one-producer run's file has no such column.
PRODUCER_COLUMN: Final = "producer"


# ---------------------------------------------------------------------------------------------
# Arrow schemas (all timestamps int64 epoch microseconds: Spark cannot read ns Parquet stamps)

CHECKPOINT_SCHEMA: Final = pa.schema([("sent_upto", pa.int64()), ("ts_us", pa.int64())])
ACK_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("status", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("error", pa.string()), ("ack_ts_us", pa.int64()),
    ("latency_us", pa.int64()),
])  # fmt: skip
ACKED_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("key", pa.string()), ("key_seq", pa.int64()), ("status", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("error", pa.string()),
    ("send_ts_us", pa.int64()), ("ack_ts_us", pa.int64()),
])  # fmt: skip
READBACK_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("key", pa.string()), ("key_seq", pa.int64()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("ts_us", pa.int64()),
])  # fmt: skip

# A group consumer's journals (workload.consumers > 0): what it processed, and every offset
# commit it attempted (`outcome` is COMMIT_OK or the error's name; offset is the next to read).
PROCESSED_SCHEMA: Final = pa.schema([
    ("msg_id", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("consumer", pa.int32()), ("ts_us", pa.int64()),
])  # fmt: skip
COMMIT_SCHEMA: Final = pa.schema([
    ("partition", pa.int32()), ("offset", pa.int64()), ("consumer", pa.int32()),
    ("ts_us", pa.int64()), ("outcome", pa.string()),
])  # fmt: skip
COMMIT_OK: Final = "ok"
# A member start's assignment history: every partition the group gave it (`assigned`), took
# back (`revoked`) or that it lost without a clean revocation (`lost`: its session expired),
# stamped when the member's rebalance callback ran, so a jump in its offsets can be told from
# a change of assignment.
ASSIGNMENT_SCHEMA: Final = pa.schema([
    ("consumer", pa.int32()), ("partition", pa.int32()), ("kind", pa.string()),
    ("ts_us", pa.int64()),
])  # fmt: skip
# The liveness bound's default (workload.consumer_stuck_s): a group that makes no progress for
# longer than this, outside every fault, while records it could read exist, is `stuck`. Five of
# the members' 6 s session timeouts: a dead member is noticed within one and its partitions
# reassigned by one rebalance; five leave room for a second rebalance and a coordinator that
# moved with a broker fault, and stay below the catch-up window's default (60 s), so a group
# stuck after the final heal is still seen within it.
CONSUMER_STUCK_S: Final = 30.0


class CommitMode(StrEnum):
    """When a group consumer commits its offsets (`workload.consumer_commit`)."""

    AUTO = "auto"  # enable.auto.commit=true with librdkafka's defaults
    AFTER_PROCESS = "after-process"  # commit (sync) after processing each batch: at-least-once
    BEFORE_PROCESS = "before-process"  # commit (sync) before processing: at-most-once


class AssignmentKind(StrEnum):
    """What a row of a member's assignment journal (ASSIGNMENT_SCHEMA) records."""

    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"
