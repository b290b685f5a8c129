"""The checker: reconcile one run's acked.parquet against its readback.parquet, in one process.

A run is the unit of reconciliation (every question is asked within a run), so analysis.reconcile
hands each run to a Spark task and this module answers all of them with Arrow and numpy: sorts,
binary searches and segment reductions over columns, no per-row Python. The anomaly classes are
those of analysis.anomalies, decided as docs/kafka-reliability.md says:

- a *message* is a msg_id sent or read (all records without a msg_id are one message);
- a *record* is one (partition, offset) of the read-back: one record read twice is one record;
- a message's acked location is its acked row's (partition, offset); its holder is the record
  now at that location.

The sensitivity probe is the same reconciliation again, with a seeded set of healthy records
hidden from the read-back: every hidden record must come back as a missing message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis import transaction_check
from analysis.anomalies import ANOMALY_NAMES, AT_ACKED_OFFSET, EXAMPLE_FIELDS, LOSS_CLASSES
from analysis.arrays import gather
from analysis.consumer_check import (
    AckedOffsets,
    ConsumerFacts,
    consumer_facts,
    has_consumer_journals,
)
from analysis.results import Sensitivity
from analysis.transaction_check import MessageView, Transactions, TxnFacts, read_uncommitted_ids
from harness.rundir import layout
from harness.rundir.records import NO_REPORT, STATUSES, Status

MAX_EXAMPLES = 20
MAX_MISSING = 100_000  # missing messages per run handed to the attribution (the rest: counted)
SLOT_BITS = 40  # a record's slot is partition << 40 | offset (offsets stay far below 2^40)
SENSITIVITY_SEED = 20261122
SENSITIVITY_ONE_IN = 997  # besides each partition's tail, about one healthy record in 997
LATENCY_PERCENTILES = {"ack_latency_p50_ms": 0.5, "ack_latency_p99_ms": 0.99}

NULL = -1  # a missing partition or offset in the int columns below (real ones are >= 0)
NONE_TS = np.iinfo(np.int64).min  # a missing time
NO_ID = np.iinfo(np.int64).max  # a missing holder id
# Status codes: 0 for a value that is no status, else 1 + its index in STATUSES; the highest
# code of a message's acked rows is its status (an indeterminate retry outranks an ok).
CODE = {status: code for code, status in enumerate(STATUSES, start=1)}


@dataclass(frozen=True)
class RunInput:
    """What the checker needs of one run directory besides its two Parquet files."""

    run_dir: Path
    complete: bool  # readback.parquet exists: without it only the send timeline is computed
    unlocated_acks: bool  # acks allow an ok without an offset (acks=0): the send-time proof
    log_start: dict[int, int] = field(default_factory=dict)  # partition → log-start offset


@dataclass(frozen=True)
class RunFacts:
    """Everything the reconciliation learnt of one run; counts and examples only when complete."""

    seconds: dict[int, dict[str, Any]]  # epoch second of send → timeline entry
    counts: dict[str, int]  # the send counts always; read and every anomaly class when complete
    contract: dict[str, int]  # analysis.results.CONTRACT_KEYS
    loss_by_partition: dict[str, int] = field(default_factory=dict)  # "unknown": no partition
    divergence_by_partition: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    missing: list[tuple[int | None, int | None, int | None]] = field(default_factory=list)
    sensitivity: Sensitivity | None = None  # the probe's outcome


def check_run(run: RunInput) -> RunFacts:
    """The facts of one run, read from its directory (see the module docstring)."""
    acked = _Acked.read(run.run_dir / layout.ACKED)
    seconds, counts, contract = _send_facts(acked)
    if (txns := Transactions.read(run.run_dir)) is not None:
        # Acknowledged means committed: the contract above compared the delivery reports.
        acked.status = txns.statuses(acked.msg_id, acked.identified, acked.status, CODE)
        counts |= _status_counts(acked)
    if not run.complete:
        return RunFacts(seconds, counts, contract)
    reads = _Reads.read(run.run_dir / layout.READBACK)
    index = _Index.build(acked, reads)
    progress = _Progress.of(index, run, hidden=None)
    messages = _messages(index, hidden=None)
    classes = classify(messages, progress, run.log_start)
    reordered = _reordered(reads)
    counts |= {"read": reads.n} | {
        name: _weight(name, mask, messages) for name, mask in classes.items()
    }
    counts["reordered"] = len(reordered["offset"])
    contract |= _identity_facts(messages)
    _add_anomaly_seconds(seconds, classes, messages)
    examples = _examples(classes, messages, reads, reordered)
    sensitivity = _probe(index, run, messages, _loss(classes))
    if txns is not None:
        txn = _transaction_facts(run, txns, messages, reads, classes["expired"])
        counts |= txn.counts
        examples |= txn.examples
        sensitivity = sensitivity & txn.sensitivity
    if has_consumer_journals(run.run_dir):
        group = _consumer_facts(run.run_dir, messages, reads, acked)
        counts |= group.counts
        examples |= group.examples
        for second, row in group.seconds.items():
            seconds.setdefault(second, {}).update(row)
        sensitivity = sensitivity & group.sensitivity
    return RunFacts(
        seconds=seconds,
        counts=counts,
        contract=contract,
        loss_by_partition=_by_partition(_loss(classes), messages.partition),
        divergence_by_partition=_by_partition(classes["offset_divergent"], messages.partition),
        examples=examples,
        missing=_missing(_loss(classes), messages),
        sensitivity=sensitivity,
    )


def _transaction_facts(
    run: RunInput, txns: Transactions, m: Messages, reads: _Reads, expired: np.ndarray
) -> TxnFacts:
    """analysis.transaction_check over this run's messages as read with read_committed."""
    view = MessageView(
        msg_id=m.msg_id,
        sent=m.in_acked & (m.msg_id != NO_ID),
        reads=m.reads,
        partition=m.partition,
        offset=m.offset,
        read_partition=_at_first_read(reads.partition, m.first_read),
        read_offset=_at_first_read(reads.offset, m.first_read),
        expired=expired,
    )
    return transaction_check.check(txns, view, read_uncommitted_ids(run.run_dir))


def _at_first_read(column: np.ndarray, first_read: np.ndarray) -> np.ndarray:
    """A record column at each message's first read, NULL for a message never read."""
    return gather(column, first_read, NULL)


def _consumer_facts(
    run_dir: Path, messages: Messages, reads: _Reads, acked: _Acked
) -> ConsumerFacts:
    """The consumer group's classes over the acknowledged messages the read-back holds, each
    at the record it was first read from; its lag against the acknowledged offsets."""
    present = (messages.status == CODE[Status.OK]) & (messages.reads > 0)
    present &= messages.msg_id != NO_ID
    record = messages.first_read[present]
    landed = (acked.status == CODE[Status.OK]) & (acked.offset != NULL) & (acked.ack_ts != NONE_TS)
    landed &= acked.partition != NULL
    offsets = AckedOffsets(acked.partition[landed], acked.offset[landed], acked.ack_ts[landed])
    return consumer_facts(
        run_dir, messages.msg_id[present], reads.partition[record], reads.offset[record], offsets
    )


# ---------------------------------------------------------------------------------------------
# Columns


def _ints(column: pa.ChunkedArray, fill: int) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as fill, validity) of an integer column, as int64 numpy arrays."""
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
    values = pc.fill_null(column.cast(pa.int64()), fill).to_numpy(zero_copy_only=False)
    return values.astype(np.int64, copy=False), valid


def _located(column: pa.ChunkedArray) -> np.ndarray:
    """A partition or offset column with unknown ones as NULL: librdkafka reports offset -1001
    under acks=0 and partition -1 when unassigned."""
    values, valid = _ints(column, NULL)
    return np.where(valid & (values >= 0), values, NULL)


def _slot(partition: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """partition << SLOT_BITS | offset, one int64 per record location."""
    return (partition << SLOT_BITS) + offset


@dataclass
class _Acked:
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
    def read(cls, path: Path) -> _Acked:
        """The columns the checker uses, cast to the harness's types."""
        columns = ["msg_id", "status", "partition", "offset", "error", "send_ts_us", "ack_ts_us"]
        table = pq.read_table(path, columns=columns)
        msg_id, identified = _ints(table["msg_id"], NO_ID)
        index = pc.index_in(table["status"].cast(pa.string()), value_set=pa.array(STATUSES))
        error = table["error"].cast(pa.string())
        reported = pc.or_kleene(pc.is_null(error), pc.not_equal(error, NO_REPORT))
        return cls(
            msg_id=msg_id,
            identified=identified,
            status=pc.fill_null(pc.add(index, 1), 0).to_numpy(zero_copy_only=False),
            partition=_located(table["partition"]),
            offset=_located(table["offset"]),
            send_ts=_ints(table["send_ts_us"], NONE_TS)[0],
            ack_ts=_ints(table["ack_ts_us"], NONE_TS)[0],
            reported=reported.to_numpy(zero_copy_only=False),
        )


@dataclass
class _Reads:
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
    def read(cls, path: Path) -> _Reads:
        """The records of readback.parquet, each (partition, offset) once: the consumer may read
        one record twice (a retried fetch), and that is one record, never a Kafka duplicate."""
        columns = ["msg_id", "key", "key_seq", "partition", "offset"]
        table = pq.read_table(path, columns=columns)
        partition, _ = _ints(table["partition"], NULL)
        offset, _ = _ints(table["offset"], NULL)
        slot = _slot(partition, offset)
        order = np.argsort(slot, kind="stable")
        first = np.ones(len(order), dtype=bool)
        first[1:] = slot[order][1:] != slot[order][:-1]
        keep = order[first]
        msg_id, identified = _ints(table["msg_id"], NO_ID)
        key_seq, has_seq = _ints(table["key_seq"], 0)
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


# ---------------------------------------------------------------------------------------------
# Sends: the timeline and the counts every run has


def _send_facts(acked: _Acked) -> tuple[dict[int, dict[str, Any]], dict[str, int], dict[str, int]]:
    """Per epoch second of send: sends by status, reported sends by status, unknown statuses and
    ack latency percentiles; and the run's send counts and status contract facts."""
    counts = {"sent": len(acked.status)} | _status_counts(acked)
    contract = {"unknown_statuses": int(np.count_nonzero(acked.status == 0))}
    for status in STATUSES:
        contract[f"reported_{status}"] = int(
            np.count_nonzero((acked.status == CODE[status]) & acked.reported)
        )
    return _seconds(acked), counts, contract


def _status_counts(acked: _Acked) -> dict[str, int]:
    """acked, failed and indeterminate: the rows of each status."""
    return {
        name: int(np.count_nonzero(acked.status == CODE[status]))
        for name, status in (
            ("acked", Status.OK),
            ("failed", Status.FAILED),
            ("indeterminate", Status.INDETERMINATE),
        )
    }


def _seconds(acked: _Acked) -> dict[int, dict[str, Any]]:
    """The timeline entries of the seconds that had sends (sends without a time are counted
    in the run's totals, never charted)."""
    timed = acked.send_ts != NONE_TS
    if not timed.any():
        return {}
    second = acked.send_ts[timed] // 1_000_000
    first = int(second.min())
    bins = second - first
    width = int(bins.max()) + 1
    status = acked.status[timed]

    def per_second(mask: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(bins if mask is None else bins[mask], minlength=width)

    columns = {"sent": per_second()}
    for name, code in CODE.items():
        columns[name] = per_second(status == code)
        columns[f"reported_{name}"] = per_second((status == code) & acked.reported[timed])
    columns["unknown_statuses"] = per_second(status == 0)
    latency = _latency_percentiles(acked, width, first)
    return {
        int(first + b): {name: int(values[b]) for name, values in columns.items()}
        | {name: latency[name][b] for name in LATENCY_PERCENTILES}
        for b in np.flatnonzero(columns["sent"])
    }


def _latency_percentiles(acked: _Acked, width: int, first: int) -> dict[str, list[float | None]]:
    """Per second bin: the nearest-rank percentiles of ok sends' ack latency, in ms (None when
    the second had no acknowledged send with both times)."""
    ok = (acked.status == CODE[Status.OK]) & (acked.send_ts != NONE_TS) & (acked.ack_ts != NONE_TS)
    bins = acked.send_ts[ok] // 1_000_000 - first
    latency_us = acked.ack_ts[ok] - acked.send_ts[ok]
    if not len(latency_us):
        return {name: [None] * width for name in LATENCY_PERCENTILES}
    lowest = int(latency_us.min())
    if int(latency_us.max()) - lowest < 1 << SLOT_BITS:  # one int64 per send: a fast plain sort
        packed = np.sort((bins << SLOT_BITS) + (latency_us - lowest))
        bins, latency_us = packed >> SLOT_BITS, (packed & ((1 << SLOT_BITS) - 1)) + lowest
    else:
        order = np.lexsort((latency_us, bins))
        bins, latency_us = bins[order], latency_us[order]
    sizes = np.bincount(bins, minlength=width)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    result: dict[str, list[float | None]] = {}
    for name, p in LATENCY_PERCENTILES.items():
        rank = np.maximum(np.ceil(p * sizes).astype(np.int64), 1) - 1
        picked = latency_us[np.minimum(starts + rank, len(latency_us) - 1)] / 1000.0
        result[name] = [float(v) if n else None for v, n in zip(picked, sizes, strict=True)]
    return result


# ---------------------------------------------------------------------------------------------
# Messages


@dataclass
class _Index:
    """The joins of a complete run, computed once and shared by the run and its probe.

    `keys` are the run's message keys (msg_ids, plus `unidentified` for every record and send
    without one), sorted; acked rows and records are sorted by key and point into `keys`.
    """

    keys: np.ndarray
    unidentified: int  # the key of the message without a msg_id (sorts last)
    acked_order: np.ndarray  # acked row indices sorted by key
    acked_key: np.ndarray  # the key index of each sorted acked row
    acked_holder: np.ndarray  # per sorted acked row: record index at its acked slot, or -1
    read_order: np.ndarray  # record indices sorted by key, then slot
    read_key: np.ndarray  # the key index of each sorted record
    acked: _Acked
    reads: _Reads

    @classmethod
    def build(cls, acked: _Acked, reads: _Reads) -> _Index:
        """Sort both sides by message key and find the record at each acked slot."""
        highest = max(
            _max_of(acked.msg_id[acked.identified]), _max_of(reads.msg_id[reads.identified])
        )
        unidentified = highest + 1
        acked_ids = np.where(acked.identified, acked.msg_id, unidentified)
        read_ids = np.where(reads.identified, reads.msg_id, unidentified)
        keys = _distinct(np.sort(np.concatenate((acked_ids, read_ids))))
        acked_order = np.argsort(acked_ids, kind="stable")
        read_order = np.argsort(read_ids, kind="stable")  # stable: slot order within a message
        located = (acked.partition != NULL) & (acked.offset != NULL)
        slot = _slot(acked.partition, acked.offset)
        at = np.minimum(np.searchsorted(reads.slot, slot), max(reads.n - 1, 0))
        found = located & (reads.slot[at] == slot) if reads.n else np.zeros(len(slot), bool)
        holder = np.where(found, at, -1)
        return cls(
            keys=keys,
            unidentified=unidentified,
            acked_order=acked_order,
            acked_key=np.searchsorted(keys, acked_ids[acked_order]),
            acked_holder=holder[acked_order],
            read_order=read_order,
            read_key=np.searchsorted(keys, read_ids[read_order]),
            acked=acked,
            reads=reads,
        )


def _distinct(ordered: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array (np.unique's hashing is far slower on millions)."""
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def _max_of(values: np.ndarray) -> int:
    """The largest value, -1 for none."""
    return int(values.max()) if len(values) else -1


@dataclass
class Messages:
    """One entry per message key (see _Index), the facts each anomaly class is decided on."""

    msg_id: np.ndarray  # NO_ID for the message without a msg_id
    in_acked: np.ndarray
    acked_rows: np.ndarray
    status: np.ndarray  # the highest CODE of its acked rows
    partition: np.ndarray  # the acked partition (highest of its rows), NULL if none
    offset: np.ndarray  # the acked offset (highest of its rows), NULL if none
    send_ts: np.ndarray  # latest send, NONE_TS if none
    slot_read: np.ndarray  # a record was read at one of its acked slots
    holder: np.ndarray  # lowest msg_id of the records at its acked slots, NO_ID if none
    holds_self: np.ndarray  # that holder is the message itself (null-safe: no id, no id)
    reads: np.ndarray  # distinct records holding it
    first_read: np.ndarray  # index into the records of its first read (lowest slot), -1 if none


def _messages(index: _Index, hidden: np.ndarray | None) -> Messages:
    """The message table of the run, with the records flagged in hidden left out of the
    read-back (None: none hidden)."""
    acked, n = index.acked, len(index.keys)
    order, key = index.acked_order, index.acked_key
    holder_at = index.acked_holder
    if hidden is not None:
        holder_at = np.where(gather(hidden, holder_at, True), -1, holder_at)
    holder_id = _record_ids(index, holder_at)
    kept = index.read_order if hidden is None else index.read_order[~hidden[index.read_order]]
    kept_key = index.read_key if hidden is None else index.read_key[~hidden[index.read_order]]
    reads_of = np.bincount(kept_key, minlength=n)
    first_read = np.full(n, -1, dtype=np.int64)
    if len(kept_key):
        starts = np.flatnonzero(np.r_[True, kept_key[1:] != kept_key[:-1]])
        first_read[kept_key[starts]] = kept[starts]
    msg_id = np.where(index.keys == index.unidentified, NO_ID, index.keys)
    holder = _reduce(np.minimum, holder_id, key, n, NO_ID)
    return Messages(
        msg_id=msg_id,
        in_acked=np.bincount(key, minlength=n) > 0,
        acked_rows=np.bincount(key, minlength=n),
        status=_reduce(np.maximum, acked.status[order], key, n, 0),
        partition=_reduce(np.maximum, acked.partition[order], key, n, NULL),
        offset=_reduce(np.maximum, acked.offset[order], key, n, NULL),
        send_ts=_reduce(np.maximum, acked.send_ts[order], key, n, NONE_TS),
        slot_read=_reduce(np.maximum, (holder_at >= 0).astype(np.int8), key, n, 0) > 0,
        holder=holder,
        holds_self=np.where(holder == NO_ID, msg_id == NO_ID, holder == msg_id),
        reads=reads_of,
        first_read=first_read,
    )


def _record_ids(index: _Index, record: np.ndarray) -> np.ndarray:
    """The msg_id of each record index (NO_ID for a record without one, or for index -1)."""
    reads = index.reads
    return np.where(
        gather(reads.identified, record, False), gather(reads.msg_id, record, NO_ID), NO_ID
    )


def _reduce(ufunc: np.ufunc, values: np.ndarray, key: np.ndarray, n: int, empty: int) -> np.ndarray:
    """ufunc over the values of each key (key sorted ascending), `empty` for keys without any."""
    out = np.full(n, empty, dtype=values.dtype if values.dtype != bool else np.int8)
    if len(key):
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        out[key[starts]] = ufunc.reduceat(values, starts)
    return out


@dataclass
class _Progress:
    """Per partition, how far the read-back got: the proof a missing message needs."""

    max_read_offset: dict[int, int]
    max_read_send_ts: dict[int, int]  # latest send of a message read there without an offset

    @classmethod
    def of(cls, index: _Index, run: RunInput, hidden: np.ndarray | None) -> _Progress:
        """The progress of the read-back minus the hidden records."""
        reads = index.reads
        shown = np.ones(reads.n, dtype=bool) if hidden is None else ~hidden
        partition, offset = reads.partition[shown], reads.offset[shown]
        highest = {}
        if len(partition):
            last = np.flatnonzero(np.r_[partition[1:] != partition[:-1], True])  # slot order
            highest = dict(zip(partition[last].tolist(), offset[last].tolist(), strict=True))
        later = _later_sends_read(index, shown) if run.unlocated_acks else {}
        return cls(highest, later)


def _later_sends_read(index: _Index, shown: np.ndarray) -> dict[int, int]:
    """Per partition read: the latest send time of an acked row with no offset whose message was
    read there. Only runs whose acks allow that (acks=0) need it: under acks 1 and all every
    success carries its offset."""
    acked, reads = index.acked, index.reads
    rows = (acked.offset[index.acked_order] == NULL) & (acked.send_ts[index.acked_order] != NONE_TS)
    rows &= index.keys[index.acked_key] != index.unidentified
    visible = shown[index.read_order]
    read_key, read_order = index.read_key[visible], index.read_order[visible]
    key = index.acked_key[rows]
    low, high = np.searchsorted(read_key, key, "left"), np.searchsorted(read_key, key, "right")
    per_row = high - low
    if not per_row.sum():
        return {}
    row = np.repeat(np.arange(len(key)), per_row)
    within = np.arange(len(row)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    partition = reads.partition[read_order[low[row] + within]]
    send_ts = acked.send_ts[index.acked_order][rows][row]
    latest: dict[int, int] = {}
    for p in np.unique(partition).tolist():
        latest[p] = int(send_ts[partition == p].max())
    return latest


# ---------------------------------------------------------------------------------------------
# Anomaly classes


def classify(
    messages: Messages, progress: _Progress, log_start: dict[int, int]
) -> dict[str, np.ndarray]:
    """A mask over the messages per anomaly class decided by a message's own facts (all but
    reordered); a message may be in several.

    An acked message never read is expired below its partition's log-start offset; otherwise it
    is lost when its partition was read at or past its acked offset (or, with no acked offset, a
    later send of its partition was read), else unseen. Lost and unseen are disjoint, so their
    sum counts each missing acknowledged message once.
    """
    m = messages
    ok, reads, located = m.status == CODE[Status.OK], m.reads, m.offset != NULL
    start = _per_partition(log_start, m.partition, 0)
    expired = located & (m.offset < start)
    read_past = m.offset < _per_partition(progress.max_read_offset, m.partition, NULL)
    later_read = m.send_ts < _per_partition(progress.max_read_send_ts, m.partition, NONE_TS)
    proven = np.where(located, m.slot_read | read_past, later_read & (m.send_ts != NONE_TS))
    never_read = m.in_acked & ok & (reads == 0)
    missing = never_read & ~expired
    located_ok = ok & located & (m.partition != NULL)
    elsewhere = ~m.holds_self
    unacked = (m.status == CODE[Status.FAILED]) | (m.status == CODE[Status.INDETERMINATE])
    return {
        "lost": missing & proven,
        "unseen": missing & ~proven,
        "offset_divergent": located_ok & m.slot_read & elsewhere,
        "expired": never_read & expired,
        "duplicated": ok & (reads > 1),
        "duplicated_unacked": unacked & (reads > 1),
        "moved": located_ok & (reads > 0) & elsewhere,
        "failed_present": (m.status == CODE[Status.FAILED]) & (reads > 0),
        "indeterminate_present": (m.status == CODE[Status.INDETERMINATE]) & (reads > 0),
        "phantom": ~m.in_acked & (reads > 0),
    }


def _per_partition(values: dict[int, int], partition: np.ndarray, default: int) -> np.ndarray:
    """values looked up by each entry's partition, default where absent (or partition NULL)."""
    out = np.full(len(partition), default, dtype=np.int64)
    for p, value in values.items():
        out[partition == p] = value
    return out


def _loss(classes: dict[str, np.ndarray]) -> np.ndarray:
    """The messages that count as loss: acknowledged and missing."""
    return np.logical_or.reduce([classes[name] for name in LOSS_CLASSES])


def _weight(name: str, mask: np.ndarray, messages: Messages) -> int:
    """A class's count: messages, except phantom, which counts the records holding them."""
    if name == "phantom":
        return int(messages.reads[mask].sum())
    return int(np.count_nonzero(mask))


def _reordered(reads: _Reads) -> dict[str, np.ndarray]:
    """Records read after a higher key_seq of their key in the same partition (offset order).

    Order is judged per partition only: a key's records in another partition say nothing.
    """
    chosen = np.flatnonzero(reads.has_seq)
    codes = pc.dictionary_encode(reads.key.take(pa.array(chosen))).indices
    code = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    group_key = (reads.partition[chosen] << 32) + code + 1
    by_group = np.argsort(group_key, kind="stable")  # records stay in offset order
    order, sorted_keys = chosen[by_group], group_key[by_group]
    group = np.cumsum(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) - 1
    seq = reads.key_seq[order]
    seqs = _distinct(np.sort(seq))
    rank = np.searchsorted(seqs, seq)
    n = max(len(seqs), 1)
    value = group * n + rank  # a later group's values exceed every earlier one's
    before = np.maximum.accumulate(np.r_[-1, value[:-1]]) if len(value) else value
    late = value < before
    record = order[late]
    return {
        "record": record,
        "msg_id": np.where(reads.identified[record], reads.msg_id[record], NO_ID),
        "partition": reads.partition[record],
        "offset": reads.offset[record],
        "key_seq": reads.key_seq[record],
        "max_key_seq_before": seqs[before[late] - group[late] * n],
    }


# ---------------------------------------------------------------------------------------------
# What the report shows


def _identity_facts(messages: Messages) -> dict[str, int]:
    """The msg_ids acked.parquet holds more than once, and its rows without a msg_id."""
    identified = messages.msg_id != NO_ID
    return {
        "repeated_msg_ids": int(np.count_nonzero(identified & (messages.acked_rows > 1))),
        "unidentified_rows": int(messages.acked_rows[~identified].sum()),
    }


def _add_anomaly_seconds(
    seconds: dict[int, dict[str, Any]], classes: dict[str, np.ndarray], messages: Messages
) -> None:
    """Add to each timeline second the acked messages sent then and later missing or duplicated."""
    for what, mask in (("missing", _loss(classes)), ("duplicated", classes["duplicated"])):
        timed = mask & (messages.send_ts != NONE_TS)
        values, counts = np.unique(messages.send_ts[timed] // 1_000_000, return_counts=True)
        for second, count in zip(values.tolist(), counts.tolist(), strict=True):
            if second in seconds:
                seconds[second][what] = count


def _by_partition(mask: np.ndarray, partition: np.ndarray) -> dict[str, int]:
    """How many masked messages each acked partition holds ("unknown": none)."""
    values, counts = np.unique(partition[mask], return_counts=True)
    return {
        ("unknown" if p == NULL else str(p)): c
        for p, c in zip(values.tolist(), counts.tolist(), strict=True)
    }


def _examples(
    classes: dict[str, np.ndarray],
    messages: Messages,
    reads: _Reads,
    reordered: dict[str, np.ndarray],
) -> dict[str, list[dict[str, Any]]]:
    """Up to MAX_EXAMPLES rows per class, lowest msg_id first (none last), with the fields
    EXAMPLE_FIELDS names: at the acked location or where it was read, as the class says."""
    examples = {name: [] for name in ANOMALY_NAMES}
    for name, mask in classes.items():
        chosen = np.flatnonzero(mask)[:MAX_EXAMPLES]  # messages are in msg_id order
        examples[name] = [_message_example(name, messages, reads, i) for i in chosen.tolist()]
    order = np.lexsort((reordered["offset"], reordered["partition"], reordered["msg_id"]))
    examples["reordered"] = [
        {f: _value(reordered[f][i]) for f in EXAMPLE_FIELDS["reordered"] if f != "key"}
        | {"key": reads.key[int(reordered["record"][i])].as_py()}
        for i in order[:MAX_EXAMPLES].tolist()
    ]
    return examples


def _message_example(name: str, m: Messages, reads: _Reads, i: int) -> dict[str, Any]:
    """The example row of message i in class name: at its acked location, or where it was
    first read."""
    if name in AT_ACKED_OFFSET:
        partition, offset = _value(m.partition[i], NULL), _value(m.offset[i], NULL)
    elif (record := int(m.first_read[i])) >= 0:
        partition, offset = int(reads.partition[record]), int(reads.offset[record])
    else:
        partition = offset = None
    return {
        "msg_id": _value(m.msg_id[i]),
        "partition": partition,
        "offset": offset,
        "readback_msg_id_at_offset": _value(m.holder[i]),
        "reads": int(m.reads[i]),
    }


def _value(value: Any, none: int = NO_ID) -> int | None:
    """value as a Python int, None where it is the none marker."""
    value = int(value)
    return None if value == none else value


def _missing(
    loss: np.ndarray, messages: Messages
) -> list[tuple[int | None, int | None, int | None]]:
    """Up to MAX_MISSING missing acknowledged messages, lowest msg_id first: (msg_id, acked
    partition, acked offset), for the attribution."""
    chosen = np.flatnonzero(loss)[:MAX_MISSING]
    return [
        (
            _value(messages.msg_id[i]),
            _value(messages.partition[i], NULL),
            _value(messages.offset[i], NULL),
        )
        for i in chosen.tolist()
    ]


# ---------------------------------------------------------------------------------------------
# The sensitivity probe


def _probe(index: _Index, run: RunInput, messages: Messages, loss: np.ndarray) -> Sensitivity:
    """Reconcile the run again with a seeded set of healthy acknowledged records (every
    partition's last one, plus a hashed sample) hidden from its read-back. It passes when every
    hidden record's message is reported missing and nothing else is beyond the run's own loss."""
    hidden_messages = _records_to_hide(index, messages)
    hidden = np.zeros(index.reads.n, dtype=bool)
    hidden[messages.first_read[hidden_messages]] = True
    probe = _messages(index, hidden)
    probe_loss = _loss(classify(probe, _Progress.of(index, run, hidden), run.log_start))
    removed = len(hidden_messages)
    found = int(np.count_nonzero(probe_loss[hidden_messages]))
    extra = int(np.count_nonzero(probe_loss)) - int(np.count_nonzero(loss)) - found
    return Sensitivity.of(removed, found, clean=extra == 0)


def _records_to_hide(index: _Index, m: Messages) -> np.ndarray:
    """The messages whose one record to hide: healthy (acknowledged, read exactly once, at the
    acked offset when there is one), each partition's last such record, and a hashed sample."""
    healthy = np.flatnonzero(
        (m.status == CODE[Status.OK]) & (m.reads == 1) & ((m.offset == NULL) | m.holds_self)
    )
    record = m.first_read[healthy]
    partition = index.reads.partition[record]
    order = np.lexsort((record, partition))  # records are in slot order: the last is the tail
    tails = np.zeros(len(healthy), dtype=bool)
    if len(order):
        last = np.r_[partition[order][1:] != partition[order][:-1], True]
        tails[order[last]] = True
    sampled = _seeded_hash(m.msg_id[healthy]) % SENSITIVITY_ONE_IN == 0
    return healthy[tails | sampled]


def _seeded_hash(values: np.ndarray) -> np.ndarray:
    """A well-mixed 64-bit hash of each value and SENSITIVITY_SEED (splitmix64's finaliser)."""
    with np.errstate(over="ignore"):
        x = values.astype(np.uint64) + np.uint64(SENSITIVITY_SEED) * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))
