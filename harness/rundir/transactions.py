"""What a transaction of a transactional run became, and the schema of its journal.

A transactional run (`workload.transactions`) sends its messages in transactions of consecutive
msg_ids: transaction t holds `messages` sends from `first_msg_id` on. The producer journals one
row per transaction when it ends (layout.TRANSACTIONS_JOURNAL), finalized to
layout.TRANSACTIONS. A send whose transaction has no row (the producer stopped or crashed
inside it) has an unknown outcome, like a row whose outcome is `unknown`. With
`workload.transactions.reads`, each transaction first reads records of the topic
(read_committed): one row each (layout.TXN_READS_JOURNAL, finalized to layout.TXN_READS).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

from harness.rundir import layout

__all__ = [
    "COMMIT_CLAUSE",
    "TIMEOUT_ANSWERED",
    "TRANSACTION_SCHEMA",
    "TXN_READ_SCHEMA",
    "Intent",
    "OnTimeout",
    "TxnOutcome",
    "commit_never_requested",
    "read_transactions",
    "read_txn_reads",
]


class Intent(StrEnum):
    """What the producer meant to do with a transaction (aborts are on purpose)."""

    COMMIT = "commit"
    ABORT = "abort"


class TxnOutcome(StrEnum):
    """What a transaction became, as the producer learnt it."""

    COMMITTED = "committed"  # commit_transaction returned: every message is committed
    ABORTED = "aborted"  # abort_transaction returned: no message may ever be read committed
    # commit or abort raised a fatal error, timed out for good, or never ran: the transaction
    # may have committed or not; never judged as loss nor as an aborted read.
    UNKNOWN = "unknown"


class OnTimeout(StrEnum):
    """How the transactional client answers a commit, abort or offer that timed out (or
    failed with another retriable error): workload.transactions.on_timeout."""

    # The same call again, as KafkaProducer's contract says: the one path on which a late
    # EndTxn is harmless.
    RETRY = "retry"
    # Abort and go on to the next transaction (an abort that times out too: a new client), as
    # Jepsen's client and most applications do: a late EndTxn or produce may then land on
    # the next transaction (KAFKA-17754).
    ABORT = "abort"
    # Close the client and start a new one on the same transactional.id (initTransactions
    # fences the old epoch): the defence Jepsen's author proposed.
    REINIT = "reinit"


# The clause a transaction's `error` carries when a timeout was answered otherwise than by
# retrying: "on timeout: abort" or "on timeout: reinit" (the journal's record of the path).
TIMEOUT_ANSWERED: Final = "on timeout: {}"


# Each clause of a transaction's `error` ("; " between them) opens with the call that failed:
# "commit: ..." (the offer of offsets before a commit counts as the commit's), "abort: ...", or
# is a TIMEOUT_ANSWERED clause.
COMMIT_CLAUSE: Final = "commit: "


def commit_never_requested(intent: str, error: str | None) -> bool:
    """The producer never asked to commit the transaction: it meant to abort it and no clause
    of its error is a commit's. Its messages must never be read committed, whatever its abort
    became (KAFKA-17754: a late EndTxn of an earlier transaction can commit it)."""
    clauses = (error or "").split("; ")
    return intent == Intent.ABORT and not any(c.startswith(COMMIT_CLAUSE) for c in clauses)


TRANSACTION_SCHEMA: Final = pa.schema([
    ("txn", pa.int64()), ("first_msg_id", pa.int64()), ("messages", pa.int32()),
    ("intent", pa.string()), ("outcome", pa.string()), ("error", pa.string()),
    ("begin_ts_us", pa.int64()), ("end_ts_us", pa.int64()),
])  # fmt: skip


def read_transactions(run_dir: Path) -> pa.Table | None:
    """transactions.parquet of a transactional run, ordered by first_msg_id; None otherwise."""
    table = _read(run_dir, layout.TRANSACTIONS, TRANSACTION_SCHEMA)
    return None if table is None else table.sort_by("first_msg_id")


def _read(run_dir: Path, name: str, schema: pa.Schema) -> pa.Table | None:
    """The columns of `schema` from the Parquet file `name` of the run; None without it."""
    path = Path(run_dir) / name
    if not path.is_file():
        return None
    return pq.read_table(path, columns=[field.name for field in schema])


# One row per record a transaction read before its sends (workload.transactions.reads): the
# transaction's number, the msg_id the record's value names (null: not one of ours), where it
# was read and when the consumer returned it (epoch microseconds, the harness's clock).
TXN_READ_SCHEMA: Final = pa.schema([
    ("txn", pa.int64()), ("msg_id", pa.int64()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("ts_us", pa.int64()),
])  # fmt: skip


def read_txn_reads(run_dir: Path) -> pa.Table | None:
    """txn-reads.parquet of a run whose transactions read, in journal order; None otherwise."""
    return _read(run_dir, layout.TXN_READS, TXN_READ_SCHEMA)
