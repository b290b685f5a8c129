"""The joins of a complete run: every message key with the facts its classes are decided on,
and how far the read-back got in each partition."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.checks.arrays import gather, slot_of
from analysis.checks.messages.columns import (
    NO_ID,
    NONE_TS,
    NULL,
    Acked,
    Reads,
    distinct,
    max_of,
)
from analysis.checks.messages.facts import RunInput


@dataclass
class Index:
    """The joins of a complete run, computed once and shared by the run and its probe.

    `keys` are the run's message keys (msg_ids, plus `unidentified` for every record and send
    without one), sorted; acked rows and records are sorted by key and point into `keys`.
    """

    keys: np.ndarray
    unidentified: int  # the key of the message without a msg_id (sorts last)
    acked_order: np.ndarray  # acked row indices sorted by key
    acked_key: np.ndarray  # the key index of each sorted acked row
    acked_holder: np.ndarray  # per sorted acked row: index of the record at its slot here, or -1
    acked_held: np.ndarray  # per sorted acked row: a record of the run is at its acked slot
    acked_held_by: np.ndarray  # per sorted acked row: that record's msg_id, NO_ID if none
    read_order: np.ndarray  # record indices sorted by key, then slot
    read_key: np.ndarray  # the key index of each sorted record
    acked: Acked
    reads: Reads

    @classmethod
    def build(cls, acked: Acked, reads: Reads) -> Index:
        """Sort both sides by message key and find the record at each acked slot."""
        highest = max(
            max_of(acked.msg_id[acked.identified]), max_of(reads.msg_id[reads.identified])
        )
        unidentified = highest + 1
        acked_ids = np.where(acked.identified, acked.msg_id, unidentified)
        read_ids = np.where(reads.identified, reads.msg_id, unidentified)
        keys = distinct(np.sort(np.concatenate((acked_ids, read_ids))))
        acked_order = np.argsort(acked_ids, kind="stable")
        read_order = np.argsort(read_ids, kind="stable")  # stable: slot order within a message
        holder = _holders(acked, reads, acked_ids, read_ids)
        return cls(
            keys=keys,
            unidentified=unidentified,
            acked_order=acked_order,
            acked_key=np.searchsorted(keys, acked_ids[acked_order]),
            acked_holder=holder[acked_order],
            acked_held=(holder >= 0)[acked_order],
            acked_held_by=_ids_at(reads, holder)[acked_order],
            read_order=read_order,
            read_key=np.searchsorted(keys, read_ids[read_order]),
            acked=acked,
            reads=reads,
        )


@dataclass
class Messages:
    """One entry per message key (see Index), the facts each anomaly class is decided on."""

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


def messages_of(index: Index, hidden: np.ndarray | None) -> Messages:
    """The message table of the run, with the records flagged in hidden left out of the
    read-back (None: none hidden)."""
    acked, n = index.acked, len(index.keys)
    order, key = index.acked_order, index.acked_key
    held, holder_id = index.acked_held, index.acked_held_by
    if hidden is not None:  # a hidden record holds no slot
        masked = gather(hidden, index.acked_holder, False)
        held, holder_id = held & ~masked, np.where(masked, NO_ID, holder_id)
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
        slot_read=_reduce(np.maximum, held.astype(np.int8), key, n, 0) > 0,
        holder=holder,
        holds_self=np.where(holder == NO_ID, msg_id == NO_ID, holder == msg_id),
        reads=reads_of,
        first_read=first_read,
    )


def _holders(acked: Acked, reads: Reads, acked_ids: np.ndarray, read_ids: np.ndarray) -> np.ndarray:
    """Per acked row, the record at its acked slot (-1 for none): where the read-back holds
    several there, the one holding the row's own message, else the lowest msg_id's."""
    located = (acked.partition != NULL) & (acked.offset != NULL)
    slot = slot_of(acked.partition, acked.offset)
    if not reads.n:
        return np.full(len(slot), -1, dtype=np.int64)
    low = np.searchsorted(reads.slot, slot, "left")
    high = np.where(located, np.searchsorted(reads.slot, slot, "right"), low)
    holder = np.where(high > low, low, -1)
    for step in range(1, int((high - low).max(initial=0))):
        at = np.minimum(low + step, reads.n - 1)
        own = (low + step < high) & (read_ids[at] == acked_ids) & reads.identified[at]
        holder[own] = at[own]
    return holder


def _ids_at(reads: Reads, record: np.ndarray) -> np.ndarray:
    """The msg_id of each record index (NO_ID for a record without one, or for index -1)."""
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
class Progress:
    """Per partition, how far the read-back got: the proof a missing message needs."""

    max_read_offset: dict[int, int]
    max_read_send_ts: dict[int, int]  # latest send of a message read there without an offset

    @classmethod
    def of(cls, index: Index, run: RunInput) -> Progress:
        """The progress of the run's read-back."""
        reads = index.reads
        highest = {}
        if reads.n:
            last = np.flatnonzero(np.r_[reads.partition[1:] != reads.partition[:-1], True])
            highest = dict(
                zip(reads.partition[last].tolist(), reads.offset[last].tolist(), strict=True)
            )
        later = _later_sends_read(index) if run.unlocated_acks else {}
        return cls(highest, later)


def _later_sends_read(index: Index) -> dict[int, int]:
    """Per partition read: the latest send time of an acked row with no offset whose message was
    read there. Only runs whose acks allow that (acks=0) need it: under acks 1 and all every
    success carries its offset."""
    acked, reads = index.acked, index.reads
    rows = (acked.offset[index.acked_order] == NULL) & (acked.send_ts[index.acked_order] != NONE_TS)
    rows &= index.keys[index.acked_key] != index.unidentified
    read_key, read_order = index.read_key, index.read_order
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
