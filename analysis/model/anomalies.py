"""The anomaly registry: every class the reconciliation counts, defined once.

Reconcile, verdicts, report, pipeline and the CLI table all derive their names, labels,
meanings and example fields from ANOMALIES; nothing else lists them. The one loss figure is
the sum of the classes whose `counts_as_loss` is true (they are disjoint by construction):
the distinct acknowledged messages absent from the complete final read-back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANOMALIES",
    "ANOMALY_NAMES",
    "AT_ACKED_OFFSET",
    "COUNT_NAMES",
    "EXAMPLE_FIELDS",
    "LOSS_CLASSES",
    "SEND_COUNTS",
    "Anomaly",
    "anomaly",
    "loss_of",
]

# Where an example row says a message was acked, and what the read-back holds there.
ACKED_LOCATION: Final = ("msg_id", "partition", "offset", "readback_msg_id_at_offset")
# Where an example row says a message was read, and how many distinct records hold it.
READ_LOCATION: Final = ("msg_id", "partition", "offset", "reads")
# A transactional example: where a message was read, or where its transaction's first missing
# message was acked, and the transaction number.
TXN_READ_LOCATION: Final = (*READ_LOCATION, "txn")
TXN_ACKED_LOCATION: Final = ("msg_id", "partition", "offset", "txn")


@dataclass(frozen=True)
class Anomaly:
    """One anomaly class: its name in results.json, a short label, what it means."""

    name: str
    label: str
    meaning: str
    counts_as_loss: bool = False
    serious: bool = False  # drawn in red in the matrix when non-zero
    at_acked_offset: bool = True  # examples show the acked location (else where it was read)
    example_fields: tuple[str, ...] = ACKED_LOCATION


ANOMALIES: Final[tuple[Anomaly, ...]] = (
    Anomaly(
        "lost",
        "lost",
        "acked, absent from the read-back, and its partition was read past its offset (proof)",
        counts_as_loss=True,
        serious=True,
    ),
    Anomaly(
        "unseen",
        "unseen",
        "acked, absent from the read-back, beyond the last offset read of its partition",
        counts_as_loss=True,
        serious=True,
    ),
    Anomaly(
        "offset_divergent",
        "diverged",
        "the acked offset now holds another message (the log was truncated and rewritten)",
        serious=True,
    ),
    Anomaly(
        "expired",
        "expired",
        "acked below its partition's log-start offset: deleted by retention, never loss",
    ),
    Anomaly(
        "duplicated",
        "dup",
        "an acknowledged message id held by more than one log record",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        "duplicated_unacked",
        "dup unacked",
        "a failed or indeterminate send held by more than one log record (allowed)",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        "moved",
        "moved",
        "acked, and read at another offset than acknowledged (not a loss)",
    ),
    Anomaly(
        "failed_present",
        "failed present",
        "the send failed, yet the message is in the log (legal)",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        "indeterminate_present",
        "indet. present",
        "the outcome was unknown, and the message is in the log (legal)",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    Anomaly(
        "reordered",
        "reordered",
        "in one partition, a key's record read after a later send of the same key",
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset", "key", "key_seq", "max_key_seq_before"),
    ),
    Anomaly(
        "phantom",
        "phantom",
        "log records never sent by the producer, or whose value cannot be parsed",
        at_acked_offset=False,
        example_fields=READ_LOCATION,
    ),
    # The consumer group's classes (workload.consumers; analysis.checks.consumers): 0 without one.
    Anomaly(
        "consumer_unprocessed",
        "unprocessed",
        "acked and in the log below the group's committed offset, yet never processed by any "
        "consumer of the group",
        serious=True,
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset"),
    ),
    Anomaly(
        "consumer_reprocessed",
        "reprocessed",
        "a log record the consumer group processed more than once (counted by message)",
        at_acked_offset=False,
        example_fields=("msg_id", "partition", "offset", "processed"),
    ),
    # Transactional runs only (analysis.checks.transactions); 0 elsewhere. Their loss is in
    # lost/unseen already (a committed message missing), so none counts as loss again.
    Anomaly(
        "aborted_read",
        "aborted read",
        "a message of an aborted transaction returned by the read_committed read-back",
        serious=True,
        at_acked_offset=False,
        example_fields=TXN_READ_LOCATION,
    ),
    Anomaly(
        "committed_lost",
        "txn lost",
        "a committed transaction with a message missing from the read_committed read-back "
        "(transactions, each counted once)",
        serious=True,
        example_fields=TXN_ACKED_LOCATION,
    ),
    Anomaly(
        "torn_transaction",
        "torn txn",
        "a committed transaction only partly visible to read_committed (transactions)",
        serious=True,
        example_fields=TXN_ACKED_LOCATION,
    ),
)

ANOMALY_NAMES: Final = tuple(a.name for a in ANOMALIES)
LOSS_CLASSES: Final = tuple(a.name for a in ANOMALIES if a.counts_as_loss)
AT_ACKED_OFFSET: Final = tuple(a.name for a in ANOMALIES if a.at_acked_offset)
EXAMPLE_FIELDS: Final = {a.name: a.example_fields for a in ANOMALIES}
# The send outcomes counted beside the anomalies, and `read`: distinct records read back.
SEND_COUNTS: Final = ("sent", "acked", "failed", "indeterminate")
COUNT_NAMES: Final = (*SEND_COUNTS, "read", *ANOMALY_NAMES)
_BY_NAME: Final = {a.name: a for a in ANOMALIES}


def anomaly(name: str) -> Anomaly:
    """The registry entry of `name`; KeyError for a name that is not an anomaly class."""
    return _BY_NAME[name]


def loss_of(counts: Mapping[str, int]) -> int:
    """The one loss figure of a repetition's counts: distinct acked messages missing."""
    return sum(counts[name] for name in LOSS_CLASSES)
