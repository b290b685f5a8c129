"""The anomaly registry: every class the reconciliation counts, defined once.

Reconcile, verdicts, report, pipeline and the CLI table all derive their names, labels,
meanings and example fields from ANOMALIES; nothing else lists them. The one loss figure is
the sum of the classes whose `counts_as_loss` is true (they are disjoint by construction):
the distinct acknowledged messages absent from the complete final read-back.

The names are typed: AnomalyName for the classes (one member per ANOMALIES entry, in its
order), CountName for the counts beside them. Both are StrEnums, so a dict keyed by them
serialises to exactly results.json's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from harness.rundir.records import Status

__all__ = [
    "ANOMALIES",
    "ANOMALY_NAMES",
    "AT_ACKED_OFFSET",
    "COUNT_LABELS",
    "COUNT_NAMES",
    "EXAMPLE_FIELDS",
    "LOSS_CLASSES",
    "SEND_COUNTS",
    "STATUS_COUNTS",
    "TXN_COUNTS",
    "Anomaly",
    "AnomalyName",
    "Check",
    "CountKey",
    "CountName",
    "Counts",
    "anomaly",
    "classes_of",
    "loss_of",
]


class AnomalyName(StrEnum):
    """An anomaly class's name, as results.json spells it; ANOMALIES has one entry per member,
    in this order (a new class is a member here and its entry there: tests/unit/test_anomalies.py
    holds the two in step)."""

    LOST = "lost"
    UNSEEN = "unseen"
    OFFSET_DIVERGENT = "offset_divergent"
    EXPIRED = "expired"
    DUPLICATED = "duplicated"
    DUPLICATED_UNACKED = "duplicated_unacked"
    MOVED = "moved"
    FAILED_PRESENT = "failed_present"
    INDETERMINATE_PRESENT = "indeterminate_present"
    REORDERED = "reordered"
    NONMONOTONIC_SEND = "nonmonotonic_send"
    PHANTOM = "phantom"
    MISPLACED = "misplaced"
    INCONSISTENT_OFFSETS = "inconsistent_offsets"
    INCONSISTENT_READS = "inconsistent_reads"
    CONSUMER_UNPROCESSED = "consumer_unprocessed"
    CONSUMER_REPROCESSED = "consumer_reprocessed"
    COMMIT_LOST = "commit_lost"
    ABORTED_READ = "aborted_read"
    COMMITTED_LOST = "committed_lost"
    TORN_TRANSACTION = "torn_transaction"
    COMMIT_INVALID_STATE = "commit_invalid_state"
    TXN_HANGING = "txn_hanging"
    STUCK = "stuck"
    RESET = "reset"
    POLL_SKIP = "poll_skip"
    NONMONOTONIC_POLL = "nonmonotonic_poll"
    G0 = "g0"
    G1C = "g1c"


class CountName(StrEnum):
    """The counts beside the anomaly classes: the send outcomes, the records read, and the one
    loss figure (a repetition's `loss`, beside results.json's counts rather than in them)."""

    SENT = "sent"  # messages the producer tried to send
    ACKED = "acked"  # sends whose delivery report was a success (status ok)
    FAILED = "failed"
    INDETERMINATE = "indeterminate"
    READ = "read"  # distinct records the final read-back holds
    LOSS = "loss"  # distinct acknowledged messages missing: the sum of the LOSS_CLASSES
    # A transactional run's facts beside its classes (analysis/checks/transactions.py):
    TXN_COMMITTED = "txn_committed"  # transactions journalled committed
    TXN_ABORTED = "txn_aborted"
    TXN_UNKNOWN = "txn_unknown"  # the commit's outcome never came back
    TXN_UNJOURNALLED_SENDS = "txn_unjournalled_sends"  # sends of no journalled transaction
    TXN_COMMITTED_HIDDEN = "txn_committed_hidden"  # committed, held back by the stable offset
    TXN_ABORTED_IN_LOG = "txn_aborted_in_log"  # aborted messages the log holds (as aborted)


class Check(StrEnum):
    """Which check of analysis/checks decides a class."""

    MESSAGE = "message"  # from one message's own facts: RULES (checks/messages/classes.py)
    ORDER = "order"  # from the read order of each partition: reordered (same module)
    RECORDS = "records"  # from the read-back's records at each offset (checks/messages/columns.py)
    CONSUMERS = "consumers"  # from the consumer group's journals (checks/consumers.py)
    TRANSACTIONS = "transactions"  # from the transaction journal (checks/transactions.py)
    LIVENESS = "liveness"  # from the group's journals and the sampled ends (checks/liveness.py)
    POLLS = "polls"  # from each member start's journals and the read-back (checks/polls.py)
    CYCLES = "cycles"  # from the committed transactions' order in the log (checks/cycles.py)
    SENDS = "sends"  # from each producer's acknowledged offsets in send order (checks/sends.py)
    # From each record's place and key against its producer's sends (checks/placement.py).
    PLACEMENT = "placement"
    COMMITS = "commits"  # from the group's commit journals and final offsets (checks/commits.py)
    # From every read of an offset besides the read-back's own (checks/offset_reads.py).
    OFFSET_READS = "offset_reads"
    # From the transaction journal's commit errors and times (checks/timed_out_commits.py).
    TIMED_OUT_COMMITS = "timed_out_commits"
    # From the sampled last stable offsets and the transaction timeout (checks/hanging.py).
    HANGING = "hanging"


# The transactional facts, in the order a run's counts list them.
TXN_COUNTS: Final = (
    CountName.TXN_COMMITTED,
    CountName.TXN_ABORTED,
    CountName.TXN_UNKNOWN,
    CountName.TXN_UNJOURNALLED_SENDS,
    CountName.TXN_COMMITTED_HIDDEN,
    CountName.TXN_ABORTED_IN_LOG,
)

CountKey = CountName | AnomalyName
# A repetition's counts: CountKey → count (results.json's `counts`: every COUNT_NAMES entry;
# read back from JSON its keys are plain strings, which look the members up all the same).
Counts = Mapping[str, int]

# Where an example row says a message was acked, and what the read-back holds there.
ACKED_LOCATION: Final = ("msg_id", "partition", "offset", "readback_msg_id_at_offset")
# Where an example row says a message was read, and how many distinct records hold it.
READ_LOCATION: Final = ("msg_id", "partition", "offset", "reads")
# A transactional example: where a message was read, or where its transaction's first missing
# message was acked, the transaction number and when it began and ended (epoch µs).
TXN_READ_LOCATION: Final = (*READ_LOCATION, "txn", "from_us", "to_us")
TXN_ACKED_LOCATION: Final = ("msg_id", "partition", "offset", "txn", "from_us", "to_us")
# A stuck window: the partition, when it began and ended (epoch µs), the group's position then,
# the end it should have reached, and whether that end is the high watermark above a held last
# stable offset (read_committed).
STUCK_WINDOW: Final = ("partition", "from_us", "to_us", "position", "end", "lso_held")
# A reset: where and when the group resumed, below which committed offset, how many offsets it
# read again, and the evidence its judgement needs.
RESET_POINT: Final = (
    *("partition", "at_us", "reset_to", "committed", "reprocessed"),
    *("leader_changed", "end_below"),
)

# Two consecutive records one member start processed from a partition it held throughout: when
# the second was processed, the offsets, and the read-back's records strictly between them.
POLL_STEP: Final = (
    *("partition", "consumer", "at_us", "from_offset", "to_offset", "skipped", "read_by_aborted"),
)
# A cyclic component of committed transactions: its lowest transaction, how many it holds, and
# one cycle through it ("T12 -ww p0@345-> T13 -ww p1@120-> T12").
CYCLE_WITNESS: Final = ("txn", "transactions", "cycle")
# One offset read with two messages: where, the lowest and the next msg_id read there (None for
# a record that is not the producer's), and how many messages were read there.
OFFSET_READS: Final = ("partition", "offset", "msg_id", "readback_msg_id_at_offset", "reads")
# One offset two readers read with different messages: where, one reader's message and its name
# ("consumer 2", "transaction 7", "read_uncommitted read-back"), the other's and its name.
READ_PAIR: Final = ("partition", "offset", "msg_id", "read_by", "other_msg_id", "other_read_by")


@dataclass(frozen=True)
class Anomaly:
    """One anomaly class: its name in results.json, a short label, what it means."""

    name: AnomalyName
    label: str
    meaning: str
    counts_as_loss: bool = False
    serious: bool = False  # drawn in red in the matrix when non-zero
    at_acked_offset: bool = True  # examples show the acked location (else where it was read)
    example_fields: tuple[str, ...] = ACKED_LOCATION
    check: Check = Check.MESSAGE  # the check that decides it


ANOMALIES: Final[tuple[Anomaly, ...]] = (
    Anomaly(
        AnomalyName.LOST,
        "lost",
        "acked, absent from the read-back, and its partition was read past its offset (proof)",
        counts_as_loss=True,
        serious=True,
    ),
    Anomaly(
        AnomalyName.UNSEEN,
        "unseen",
        "acked, absent from the read-back, beyond the last offset read of its partition",
        counts_as_loss=True,
        serious=True,
    ),
    Anomaly(
        AnomalyName.OFFSET_DIVERGENT,
        "diverged",
        "the acked offset now holds another message (the log was truncated and rewritten)",
        serious=True,
    ),
    Anomaly(
        AnomalyName.EXPIRED,
        "expired",
        "acked below its partition's log-start offset: deleted by retention, never loss",
    ),
    Anomaly(
        AnomalyName.DUPLICATED,
        "dup",
        "an acknowledged message id held by more than one log record",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        AnomalyName.DUPLICATED_UNACKED,
        "dup unacked",
        "a failed or indeterminate send held by more than one log record (allowed)",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        AnomalyName.MOVED,
        "moved",
        "acked, and read at another offset than acknowledged (not a loss)",
    ),
    Anomaly(
        AnomalyName.FAILED_PRESENT,
        "failed present",
        "the send failed, yet the message is in the log (legal)",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        AnomalyName.INDETERMINATE_PRESENT,
        "indet. present",
        "the outcome was unknown, and the message is in the log (legal)",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        AnomalyName.REORDERED,
        "reordered",
        "in one partition, a key's record read after a later send of the same key",
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset", "key", "key_seq", "max_key_seq_before"),
        check=Check.ORDER,
    ),
    Anomaly(
        AnomalyName.NONMONOTONIC_SEND,
        "send backwards",
        "a producer's send acknowledged at or below the offset of its previous acknowledged "
        "send to the same partition, whatever their keys (sends)",
        example_fields=("msg_id", "partition", "offset", "from_offset"),
        check=Check.SENDS,
    ),
    Anomaly(
        AnomalyName.PHANTOM,
        "phantom",
        "log records never sent by the producer, or whose value cannot be parsed",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        AnomalyName.MISPLACED,
        "misplaced",
        "a record where its producer did not put it: on another partition than its send went "
        "to, or with another key or key sequence than its message's (records)",
        serious=True,
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset", "sent_partition", "mismatch"),
        check=Check.PLACEMENT,
    ),
    Anomaly(
        AnomalyName.INCONSISTENT_OFFSETS,
        "inconsistent offsets",
        "an offset the read-back read holding two different messages (the log rewritten under "
        "it; offsets, never loss)",
        serious=True,
        at_acked_offset=False,
        example_fields=OFFSET_READS,
        check=Check.RECORDS,
    ),
    Anomaly(
        AnomalyName.INCONSISTENT_READS,
        "reads disagree",
        "an offset two reads returned different messages at, one of them not the read_committed "
        "read-back's: the read_uncommitted read-back, a transaction's reads, a consumer's "
        "processed records (the log rewritten between the reads; offsets, never loss)",
        serious=True,
        at_acked_offset=False,
        example_fields=READ_PAIR,
        check=Check.OFFSET_READS,
    ),
    # The consumer group's classes (workload.consumers; analysis.checks.consumers): 0 without one.
    Anomaly(
        AnomalyName.CONSUMER_UNPROCESSED,
        "unprocessed",
        "acked and in the log below the group's committed offset, yet never processed by any "
        "consumer of the group",
        serious=True,
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset"),
        check=Check.CONSUMERS,
    ),
    Anomaly(
        AnomalyName.CONSUMER_REPROCESSED,
        "reprocessed",
        "a log record the consumer group processed more than once (counted by message)",
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset", "processed"),
        check=Check.CONSUMERS,
    ),
    Anomaly(
        AnomalyName.COMMIT_LOST,
        "commit lost",
        "an offset commit acknowledged with success, yet a later read of the group's "
        "committed offsets (while the run goes on, or at the end) lies below it and no other "
        "commit explains it (partitions)",
        serious=True,
        at_acked_offset=False,
        example_fields=("partition", "consumer", "at_us", "offset", "committed", "seen_us"),
        check=Check.COMMITS,
    ),
    # Transactional runs only (analysis.checks.transactions); 0 elsewhere. Their loss is in
    # lost/unseen already (a committed message missing), so none counts as loss again.
    Anomaly(
        AnomalyName.ABORTED_READ,
        "aborted read",
        "a message of an aborted transaction, or of one its producer never asked to commit "
        "(its abort failed), returned by the read_committed read-back, or processed during "
        "the run by a consumer of the group (read_committed too)",
        serious=True,
        at_acked_offset=False,
        example_fields=(*TXN_READ_LOCATION, "consumed"),
        check=Check.TRANSACTIONS,
    ),
    Anomaly(
        AnomalyName.COMMITTED_LOST,
        "txn lost",
        "a committed transaction with a message missing from the read_committed read-back "
        "(transactions, each counted once)",
        serious=True,
        example_fields=TXN_ACKED_LOCATION,
        check=Check.TRANSACTIONS,
    ),
    Anomaly(
        AnomalyName.TORN_TRANSACTION,
        "torn txn",
        "a committed transaction only partly visible to read_committed (transactions)",
        serious=True,
        example_fields=TXN_ACKED_LOCATION,
        check=Check.TRANSACTIONS,
    ),
    Anomaly(
        AnomalyName.COMMIT_INVALID_STATE,
        "commit refused",
        "a commit refused with INVALID_TXN_STATE, fatal to the producer, after its transaction "
        "outlived transaction.timeout.ms, where a commit the coordinator's timeout abort fenced "
        "is answered PRODUCER_FENCED (transactions)",
        serious=True,
        at_acked_offset=False,
        example_fields=("txn", "from_us", "to_us"),
        check=Check.TIMED_OUT_COMMITS,
    ),
    Anomaly(
        AnomalyName.TXN_HANGING,
        "hanging txn",
        "a partition whose last stable offset stood below its high watermark for longer than "
        "transaction.timeout.ms and the coordinator's timeout sweep, outside every fault: a "
        "transaction left open, which Kafka aborts by then (partitions, at their longest hold)",
        serious=True,
        at_acked_offset=False,
        example_fields=("partition", "offset", "from_us", "to_us"),
        check=Check.HANGING,
    ),
    # The group's liveness (workload.consumers; analysis.checks.liveness): 0 without a group.
    Anomaly(
        AnomalyName.STUCK,
        "stuck",
        "the consumer group made no progress on a partition for longer than its bound, outside "
        "every fault, while records it could read lay past its position (windows)",
        serious=True,
        at_acked_offset=False,
        example_fields=STUCK_WINDOW,
        check=Check.LIVENESS,
    ),
    Anomaly(
        AnomalyName.RESET,
        "reset",
        "the consumer group resumed a partition below the offset it had committed (e.g. at the "
        "earliest), reading those offsets again (resets)",
        serious=True,
        at_acked_offset=False,
        example_fields=RESET_POINT,
        check=Check.LIVENESS,
    ),
    # One member's position (analysis.checks.polls): 0 without a group, and for a member start
    # that journalled no assignment (a harness before the assignment journal: not decided).
    Anomaly(
        AnomalyName.POLL_SKIP,
        "poll skip",
        "a member, holding the partition throughout, processed two records with records the "
        "read-back holds between them that it never processed (steps)",
        serious=True,
        at_acked_offset=False,
        example_fields=POLL_STEP,
        check=Check.POLLS,
    ),
    Anomaly(
        AnomalyName.NONMONOTONIC_POLL,
        "poll backwards",
        "a member, holding the partition throughout, processed a record at or below the offset "
        "of the one before it (steps)",
        serious=True,
        at_acked_offset=False,
        example_fields=POLL_STEP,
        check=Check.POLLS,
    ),
    # Transactional runs (analysis.checks.cycles): committed transactions ordered by the log.
    Anomaly(
        AnomalyName.G0,
        "G0 write cycle",
        "committed transactions whose writes follow one another in a cycle across partitions "
        "(ww edges only; transactions in cyclic components)",
        serious=True,
        at_acked_offset=False,
        example_fields=CYCLE_WITNESS,
        check=Check.CYCLES,
    ),
    Anomaly(
        AnomalyName.G1C,
        "G1c info cycle",
        "committed transactions in a cycle of write order and reads, with at least one read "
        "(transactions in cyclic components)",
        serious=True,
        at_acked_offset=False,
        example_fields=CYCLE_WITNESS,
        check=Check.CYCLES,
    ),
)

ANOMALY_NAMES: Final[tuple[AnomalyName, ...]] = tuple(a.name for a in ANOMALIES)
LOSS_CLASSES: Final = tuple(a.name for a in ANOMALIES if a.counts_as_loss)
AT_ACKED_OFFSET: Final = tuple(a.name for a in ANOMALIES if a.at_acked_offset)
# Keyed by name: a member or the plain string results.json holds.
EXAMPLE_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {a.name: a.example_fields for a in ANOMALIES}
# The count of the sends of each status (acked: a delivery report without error).
STATUS_COUNTS: Final[Mapping[Status, CountName]] = {
    Status.OK: CountName.ACKED,
    Status.FAILED: CountName.FAILED,
    Status.INDETERMINATE: CountName.INDETERMINATE,
}
# The send outcomes counted beside the anomalies: `sent`, then one count per send status.
SEND_COUNTS: Final[tuple[CountName, ...]] = (CountName.SENT, *STATUS_COUNTS.values())
# results.json's counts, in its order: the send counts, `read`, every anomaly class.
COUNT_NAMES: Final[tuple[CountKey, ...]] = (*SEND_COUNTS, CountName.READ, *ANOMALY_NAMES)
_BY_NAME: Final[Mapping[str, Anomaly]] = {a.name: a for a in ANOMALIES}
# Every count's (label, meaning) as the reports show them: the counts beside the classes, then
# each class's own from the registry.
COUNT_LABELS: Final[Mapping[str, tuple[str, str]]] = {
    CountName.SENT: ("sent", "messages the producer tried to send"),
    CountName.ACKED: ("acked", "sends that ended in a successful delivery report"),
    CountName.FAILED: ("failed", "sends refused with a definite error"),
    CountName.INDETERMINATE: ("indeterminate", "sends whose outcome is unknown (never a loss)"),
    CountName.READ: ("read", "distinct records the final read-back holds"),
    CountName.LOSS: ("loss", "distinct acknowledged messages missing from the final read-back"),
    **{a.name: (a.label, a.meaning) for a in ANOMALIES},
}


def anomaly(name: str) -> Anomaly:
    """The registry entry of `name`; KeyError for a name that is not an anomaly class."""
    return _BY_NAME[name]


def classes_of(check: Check) -> tuple[AnomalyName, ...]:
    """The classes `check` decides, in registry order."""
    return tuple(a.name for a in ANOMALIES if a.check == check)


def loss_of(counts: Counts) -> int:
    """The one loss figure of a repetition's counts: distinct acked messages missing."""
    return sum(counts[name] for name in LOSS_CLASSES)
