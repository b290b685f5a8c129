"""The transactional checks of one run: what read_committed showed of each transaction.

A transactional run (harness.rundir.transactions) sends transaction t as the msg_ids
[first_msg_id, first_msg_id + messages). The checker asks this module twice:

- `statuses`: a message is acknowledged only when its transaction committed. A message of an
  aborted transaction counts as failed (its write was undone on purpose), and one of a
  transaction with an unknown outcome, or with no journalled outcome at all, as indeterminate:
  never judged as loss, never as an aborted read.
- `check`: over the messages as read with read_committed (readback.parquet), the anomaly
  classes of analysis.model.anomalies: `aborted_read` (messages: an aborted message in the
  read-back, or one a consumer of the group processed while the run went on, its consumers
  reading with read_committed too), `committed_lost` and
  `torn_transaction` (transactions); and the facts beside them (`txn_*` counts), which use the
  read_uncommitted read-back: a committed message missing from read_committed but in the log is
  `txn_committed_hidden` (held back by the last stable offset, not lost from the log); an
  aborted message in the log is `txn_aborted_in_log` (the aborts did reach the log, so
  read_committed had something to filter).

Its own sensitivity probe: hide one message of some fully visible committed transactions and
show some aborted messages that are in the log; the checks must report exactly those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.checks.arrays import filled_ints, gather
from analysis.checks.check import RunFacts
from analysis.checks.consumers import processed_table
from analysis.checks.messages.columns import NO_ID, NULL
from analysis.model.anomalies import TXN_COUNTS, AnomalyName, Check, CountName, classes_of
from analysis.model.results import ExampleRow, ExampleRows, Sensitivity
from harness.rundir import layout
from harness.rundir.records import Status
from harness.rundir.transactions import TxnOutcome, commit_never_requested, read_transactions

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = [
    "TXN_CLASSES",
    "TXN_FACTS",
    "TransactionCheck",
    "Transactions",
    "TxnFacts",
    "read_uncommitted_ids",
]

# The classes this check decides: aborted_read, committed_lost and torn_transaction.
TXN_CLASSES: Final = classes_of(Check.TRANSACTIONS)
TXN_FACTS: Final = TXN_COUNTS  # the facts beside the classes, named in the registry
MAX_EXAMPLES = 20
PROBE_ONE_IN = 101  # besides the last one, about one committed transaction in 101
COMMITTED, ABORTED, UNKNOWN = 0, 1, 2
_CODES: Final = {TxnOutcome.COMMITTED.value: COMMITTED, TxnOutcome.ABORTED.value: ABORTED}


@dataclass(frozen=True)
class Transactions:
    """transactions.parquet as arrays, ordered by first msg_id."""

    txn: np.ndarray
    first: np.ndarray
    size: np.ndarray
    outcome: np.ndarray  # COMMITTED, ABORTED or UNKNOWN
    # The producer never asked to commit it (it meant to abort, and no commit call failed):
    # its messages must never be visible, even when its abort failed (outcome UNKNOWN).
    uncommitted: np.ndarray
    began: np.ndarray  # epoch microseconds (begin_ts_us), -1 where unknown
    ended: np.ndarray  # epoch microseconds (end_ts_us), -1 where unknown
    errors: tuple[str | None, ...]  # each transaction's journalled error, clauses by "; "

    @classmethod
    def read(cls, run_dir: Path) -> Transactions | None:
        """The run's transactions; None for a run without transactions."""
        table = read_transactions(run_dir)
        return None if table is None else cls.of_table(table)

    @classmethod
    def of_table(cls, table: pa.Table) -> Transactions:
        """The transactions of a table of TRANSACTION_SCHEMA, in its row order."""
        codes = [_CODES.get(o, UNKNOWN) for o in table["outcome"].to_pylist()]
        intents, errors = table["intent"].to_pylist(), table["error"].to_pylist()
        uncommitted = [commit_never_requested(i, e) for i, e in zip(intents, errors, strict=True)]
        return cls(
            txn=table["txn"].to_numpy().astype(np.int64),
            first=table["first_msg_id"].to_numpy().astype(np.int64),
            size=table["messages"].to_numpy().astype(np.int64),
            outcome=np.asarray(codes, dtype=np.int8),
            uncommitted=np.asarray(uncommitted, dtype=bool),
            began=filled_ints(table["begin_ts_us"], -1),
            ended=filled_ints(table["end_ts_us"], -1),
            errors=tuple(errors),
        )

    def of(self, msg_id: np.ndarray) -> np.ndarray:
        """The index of each msg_id's transaction, -1 for none."""
        at = np.searchsorted(self.first, msg_id, "right") - 1
        end = gather(self.first, at, 0) + gather(self.size, at, 0)
        return np.where((at >= 0) & (msg_id < end), at, -1)

    def outcome_of(self, msg_id: np.ndarray) -> np.ndarray:
        """Each msg_id's transaction outcome; UNKNOWN for a send in no journalled transaction."""
        return gather(self.outcome, self.of(msg_id), UNKNOWN)

    def statuses(
        self, msg_id: np.ndarray, identified: np.ndarray, status: np.ndarray, code: dict[str, int]
    ) -> np.ndarray:
        """Send status codes as transactions decide them: committed keeps the delivery
        report's, aborted is failed, unknown is indeterminate (rows without a msg_id keep
        theirs)."""
        outcome = self.outcome_of(msg_id)
        remapped = np.where(outcome == ABORTED, code[Status.FAILED], code[Status.INDETERMINATE])
        return np.where(~identified | (outcome == COMMITTED), status, remapped).astype(status.dtype)


@dataclass
class TxnFacts:
    """The transactional counts and examples of one run, and its probe."""

    counts: dict[str, int]  # TXN_CLASSES and TXN_FACTS
    examples: ExampleRows = field(default_factory=dict)
    sensitivity: Sensitivity | None = None


@dataclass(frozen=True)
class MessageView:
    """What the checks read of the checker's messages (analysis.checks.messages.index.Messages)."""

    msg_id: np.ndarray  # ascending; the message without a msg_id last (int64 max)
    sent: np.ndarray  # a send of the producer with a msg_id (in acked.parquet)
    reads: np.ndarray  # distinct read_committed records holding it
    partition: np.ndarray  # acked partition, -1 if none
    offset: np.ndarray  # acked offset, -1 if none
    read_partition: np.ndarray  # where it was first read, -1 if never
    read_offset: np.ndarray
    expired: np.ndarray  # acked below its partition's log-start offset (never loss)
    # times the consumer group processed it during the run (all 0 in a run without a group)
    consumed: np.ndarray


def read_uncommitted_ids(run_dir: Path) -> np.ndarray | None:
    """The distinct msg_ids of the read_uncommitted read-back, sorted; None without one."""
    path = Path(run_dir) / layout.READBACK_UNCOMMITTED
    if not path.is_file():
        return None
    ids = pq.read_table(path, columns=["msg_id"])["msg_id"]
    return np.unique(pc.drop_null(ids).to_numpy().astype(np.int64))


def check(txns: Transactions, m: MessageView, uncommitted: np.ndarray | None) -> TxnFacts:
    """The anomaly classes and facts of the transactions, with examples and the probe."""
    at = txns.of(m.msg_id)
    counts, examples = _classes(txns, m, at, m.reads)
    in_log = _in(m.msg_id, uncommitted) if uncommitted is not None else m.reads > 0
    mine = at >= 0
    outcome = gather(txns.outcome, at, UNKNOWN)
    counts |= {
        CountName.TXN_COMMITTED: int(np.count_nonzero(txns.outcome == COMMITTED)),
        CountName.TXN_ABORTED: int(np.count_nonzero(txns.outcome == ABORTED)),
        CountName.TXN_UNKNOWN: int(np.count_nonzero(txns.outcome == UNKNOWN)),
        CountName.TXN_UNJOURNALLED_SENDS: int(np.count_nonzero(~mine & m.sent)),
        CountName.TXN_COMMITTED_HIDDEN: int(
            np.count_nonzero((outcome == COMMITTED) & (m.reads == 0) & in_log)
        ),
        CountName.TXN_ABORTED_IN_LOG: int(np.count_nonzero((outcome == ABORTED) & in_log)),
    }
    return TxnFacts(counts, examples, _probe(txns, m, at, counts, in_log))


def _classes(
    txns: Transactions, m: MessageView, at: np.ndarray, reads: np.ndarray
) -> tuple[dict[str, int], ExampleRows]:
    """aborted_read over messages; committed_lost and torn_transaction over transactions."""
    mine = at >= 0
    outcome = gather(txns.outcome, at, UNKNOWN)
    visible = mine & (reads > 0)
    missing = mine & (reads == 0) & ~m.expired
    n = len(txns.first)
    shown = np.bincount(at[visible], minlength=n)
    absent = np.bincount(at[missing], minlength=n)
    committed = txns.outcome == COMMITTED
    lost = committed & (absent > 0)
    torn = committed & (shown > 0) & (absent > 0)
    # Seen at the end (the read-back) or while the transaction was open (a consumer).
    never_committed = (outcome == ABORTED) | gather(txns.uncommitted, at, False)
    aborted_read = never_committed & mine & ((reads > 0) | (m.consumed > 0))
    counts: dict[str, int] = {
        AnomalyName.ABORTED_READ: int(np.count_nonzero(aborted_read)),
        AnomalyName.COMMITTED_LOST: int(np.count_nonzero(lost)),
        AnomalyName.TORN_TRANSACTION: int(np.count_nonzero(torn)),
    }
    examples: ExampleRows = {
        AnomalyName.ABORTED_READ: [
            _example(m, i, txns, int(at[i]), read=True)
            for i in np.flatnonzero(aborted_read)[:MAX_EXAMPLES].tolist()
        ],
        AnomalyName.COMMITTED_LOST: _first_missing(txns, m, at, missing, lost),
        AnomalyName.TORN_TRANSACTION: _first_missing(txns, m, at, missing, torn),
    }
    return counts, examples


def _first_missing(
    txns: Transactions, m: MessageView, at: np.ndarray, missing: np.ndarray, chosen: np.ndarray
) -> list[ExampleRow]:
    """Per chosen transaction (up to MAX_EXAMPLES), its lowest missing message where acked."""
    rows, seen = [], set()
    for i in np.flatnonzero(missing & gather(chosen, at, False)).tolist():
        t = int(at[i])
        if t in seen:
            continue
        seen.add(t)
        rows.append(_example(m, i, txns, t, read=False))
        if len(rows) == MAX_EXAMPLES:
            break
    return rows


def _example(m: MessageView, i: int, txns: Transactions, t: int, *, read: bool) -> ExampleRow:
    """Message i of transaction t: where it was first read (read, and the read-back holds
    it), else where acked; with the times the read-back and the consumers held it, and when
    the transaction began and ended (from_us, to_us)."""
    read &= bool(m.reads[i] > 0)
    partition = m.read_partition[i] if read else m.partition[i]
    offset = m.read_offset[i] if read else m.offset[i]
    return {
        "msg_id": int(m.msg_id[i]),
        "partition": None if partition < 0 else int(partition),
        "offset": None if offset < 0 else int(offset),
        "reads": int(m.reads[i]),
        "consumed": int(m.consumed[i]),
        "txn": int(txns.txn[t]),
        "from_us": int(txns.began[t]) if txns.began[t] >= 0 else None,
        "to_us": int(txns.ended[t]) if txns.ended[t] >= 0 else None,
    }


def _in(values: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Whether each value is in the sorted array."""
    if not len(sorted_ids):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, values), len(sorted_ids) - 1)
    found: np.ndarray = sorted_ids[at] == values
    return found


def _probe(
    txns: Transactions, m: MessageView, at: np.ndarray, counts: dict[str, int], in_log: np.ndarray
) -> Sensitivity:
    """Hide the first message of sampled fully visible committed transactions and show sampled
    aborted messages that are in the log; torn_transaction, committed_lost and aborted_read must
    each rise by exactly what was done."""
    mine = at >= 0
    n = len(txns.first)
    # Whole: every message of the transaction is in the run and read (a transaction some of
    # whose sends never reached the journal has nothing to hide at its first msg_id).
    shown_of = np.bincount(at[mine & (m.reads > 0)], minlength=n)
    whole = (txns.outcome == COMMITTED) & (shown_of == txns.size) & (txns.size >= 2)
    candidates = np.flatnonzero(whole)
    picked = candidates[
        (candidates % PROBE_ONE_IN == 0) | (candidates == candidates.max(initial=-1))
    ]
    first_of = np.searchsorted(m.msg_id, txns.first[picked])  # messages are in msg_id order
    reads = m.reads.copy()
    reads[first_of] = 0
    outcome = gather(txns.outcome, at, UNKNOWN)
    shown = np.flatnonzero((outcome == ABORTED) & in_log & (m.reads == 0) & (m.consumed == 0))
    shown = shown[(shown % PROBE_ONE_IN == 0) | (shown == shown.max(initial=-1))]
    reads[shown] = 1
    probed, _ = _classes(txns, m, at, reads)
    torn, lost, aborted = (
        AnomalyName.TORN_TRANSACTION,
        AnomalyName.COMMITTED_LOST,
        AnomalyName.ABORTED_READ,
    )
    torn_found = probed[torn] - counts[torn]
    lost_found = probed[lost] - counts[lost]
    aborted_found = probed[aborted] - counts[aborted]
    removed = len(picked) + len(shown)
    found = min(torn_found, lost_found) + aborted_found
    exact = torn_found == lost_found == len(picked) and aborted_found == len(shown)
    return Sensitivity.of(removed, found, clean=exact)


@dataclass(frozen=True)
class TransactionCheck:
    """The transactions' classes over the run's messages as read with read_committed."""

    name: str = "transactions"

    def applies(self, run: RunHistory) -> bool:
        """A complete run whose workload ran transactions."""
        return run.complete and run.txns is not None

    def facts(self, run: RunHistory) -> RunFacts:
        """`check` over the message check's messages, each at its first read."""
        assert run.txns is not None, "applies() holds: the run has transactions"
        m, reads = run.messages, run.reads
        view = MessageView(
            msg_id=m.msg_id,
            sent=m.in_acked & (m.msg_id != NO_ID),
            reads=m.reads,
            partition=m.partition,
            offset=m.offset,
            read_partition=gather(reads.partition, m.first_read, NULL),
            read_offset=gather(reads.offset, m.first_read, NULL),
            expired=run.found[AnomalyName.EXPIRED],
            consumed=_times_consumed(run, m.msg_id),
        )
        txn = check(run.txns, view, read_uncommitted_ids(run.run_dir))
        return RunFacts(counts=txn.counts, examples=txn.examples, sensitivity=txn.sensitivity)


def _times_consumed(run: RunHistory, msg_id: np.ndarray) -> np.ndarray:
    """How many times the run's consumer group processed each message (ascending msg_id), 0
    for all in a run without consumers; processed ids not among the messages are left out."""
    consumed = np.zeros(len(msg_id), dtype=np.int64)
    if not run.has_group or not len(msg_id):
        return consumed
    ids = processed_table(run.run_dir)["msg_id"].drop_null().to_numpy().astype(np.int64)
    at = np.minimum(np.searchsorted(msg_id, ids), len(msg_id) - 1)
    np.add.at(consumed, at[msg_id[at] == ids], 1)
    return consumed
