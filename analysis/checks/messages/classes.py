"""The anomaly classes of analysis.model.anomalies, decided per message from its facts, and the
per-partition order check (reordered)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.checks.messages.columns import CODE, NO_ID, NONE_TS, NULL, Reads, distinct
from analysis.checks.messages.index import Messages, Progress
from analysis.model.anomalies import LOSS_CLASSES, AnomalyName
from harness.rundir.records import Status

# A mask over the run's messages per anomaly class.
Masks = dict[AnomalyName, np.ndarray]


def classify(messages: Messages, progress: Progress, log_start: dict[int, int]) -> Masks:
    """A mask over the messages per anomaly class decided by a message's own facts: exactly the
    registry's Check.MESSAGE classes, in its order; a message may be in several.

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
        AnomalyName.LOST: missing & proven,
        AnomalyName.UNSEEN: missing & ~proven,
        AnomalyName.OFFSET_DIVERGENT: located_ok & m.slot_read & elsewhere,
        AnomalyName.EXPIRED: never_read & expired,
        AnomalyName.DUPLICATED: ok & (reads > 1),
        AnomalyName.DUPLICATED_UNACKED: unacked & (reads > 1),
        AnomalyName.MOVED: located_ok & (reads > 0) & elsewhere,
        AnomalyName.FAILED_PRESENT: (m.status == CODE[Status.FAILED]) & (reads > 0),
        AnomalyName.INDETERMINATE_PRESENT: (m.status == CODE[Status.INDETERMINATE]) & (reads > 0),
        AnomalyName.PHANTOM: ~m.in_acked & (reads > 0),
    }


def _per_partition(values: dict[int, int], partition: np.ndarray, default: int) -> np.ndarray:
    """values looked up by each entry's partition, default where absent (or partition NULL)."""
    out = np.full(len(partition), default, dtype=np.int64)
    for p, value in values.items():
        out[partition == p] = value
    return out


def loss_mask(classes: Masks) -> np.ndarray:
    """The messages that count as loss: acknowledged and missing."""
    loss: np.ndarray = np.logical_or.reduce([classes[name] for name in LOSS_CLASSES])
    return loss


def weight(name: AnomalyName, mask: np.ndarray, messages: Messages) -> int:
    """A class's count: messages, except phantom, which counts the records holding them."""
    if name == AnomalyName.PHANTOM:
        return int(messages.reads[mask].sum())
    return int(np.count_nonzero(mask))


def reordered(reads: Reads) -> dict[str, np.ndarray]:
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
    seqs = distinct(np.sort(seq))
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
