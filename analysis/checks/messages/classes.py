"""The anomaly classes of analysis.model.anomalies decided per message: one table of rules over
named facts (RULES), evaluated here over numpy arrays and by analysis/spark over columns; and
the per-partition order check (reordered)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import partial, reduce
from typing import Final, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.checks.messages.columns import CODE, NO_ID, NONE_TS, NULL, Reads, distinct
from analysis.checks.messages.index import Messages, Progress
from analysis.model.anomalies import LOSS_CLASSES, AnomalyName
from harness.rundir.records import Status

# A mask over the run's messages per anomaly class.
Masks = dict[AnomalyName, np.ndarray]
V = TypeVar("V")  # one value per message: a numpy array here, a Spark column in analysis/spark


class Fact(StrEnum):
    """A yes/no fact of one message, the terms RULES decides the per-message classes by.
    Every engine computes each of them for each message; nothing else states the rules."""

    JOURNALLED = "journalled"  # a producer's journal holds its send (acked.parquet has a row)
    OK = "ok"  # its send was acknowledged
    FAILED = "failed"  # its send ended in a definite error
    INDETERMINATE = "indeterminate"  # its send's outcome is unknown
    READ = "read"  # the read-back holds it
    READ_TWICE = "read_twice"  # in two or more distinct records
    EXPIRED = "expired"  # its acked offset lies below its partition's log-start offset
    PROVEN = "proven"  # the read-back got past it: its slot, or a later offset (or send)
    LOCATED = "located"  # acknowledged at a known partition and offset
    SLOT_READ = "slot_read"  # a record was read at its acked slot
    ELSEWHERE = "elsewhere"  # the record at its acked slot is not this message (or none is)


class Not(NamedTuple):
    """A term's fact that must not hold."""

    fact: Fact


# The classes of Check.MESSAGE, each as the terms of which one must hold (a term: facts that
# all hold). An acknowledged message never read is expired below its partition's log start;
# otherwise lost when the read-back proves it got past it, else unseen: lost and unseen are
# disjoint, so their sum counts each missing acknowledged message once.
_MISSING: Final = (Fact.JOURNALLED, Fact.OK, Not(Fact.READ), Not(Fact.EXPIRED))
RULES: Final[dict[AnomalyName, tuple[tuple[Fact | Not, ...], ...]]] = {
    AnomalyName.LOST: ((*_MISSING, Fact.PROVEN),),
    AnomalyName.UNSEEN: ((*_MISSING, Not(Fact.PROVEN)),),
    AnomalyName.OFFSET_DIVERGENT: ((Fact.OK, Fact.LOCATED, Fact.SLOT_READ, Fact.ELSEWHERE),),
    AnomalyName.EXPIRED: ((Fact.JOURNALLED, Fact.OK, Not(Fact.READ), Fact.EXPIRED),),
    AnomalyName.DUPLICATED: ((Fact.OK, Fact.READ_TWICE),),
    AnomalyName.DUPLICATED_UNACKED: (
        (Fact.FAILED, Fact.READ_TWICE),
        (Fact.INDETERMINATE, Fact.READ_TWICE),
    ),
    AnomalyName.MOVED: ((Fact.OK, Fact.LOCATED, Fact.READ, Fact.ELSEWHERE),),
    AnomalyName.FAILED_PRESENT: ((Fact.FAILED, Fact.READ),),
    AnomalyName.INDETERMINATE_PRESENT: ((Fact.INDETERMINATE, Fact.READ),),
    AnomalyName.PHANTOM: ((Not(Fact.JOURNALLED), Fact.READ),),
}


def decide(facts: Mapping[Fact, V], names: Iterable[AnomalyName] = RULES) -> dict[AnomalyName, V]:
    """Each class of `names` (all of RULES by default) over an engine's `facts`: the terms'
    facts and-ed, the terms or-ed. Numpy arrays and Spark columns both take & and |."""
    decided: dict[AnomalyName, V] = {}
    for name in names:
        terms = [reduce(operator.and_, map(partial(_value, facts), term)) for term in RULES[name]]
        decided[name] = reduce(operator.or_, terms)
    return decided


def _value(facts: Mapping[Fact, V], literal: Fact | Not) -> V:
    """A term's literal over the engine's facts: the fact, or its negation (~)."""
    if isinstance(literal, Not):
        negated: V = ~facts[literal.fact]  # type: ignore[operator]
        return negated
    return facts[literal]


def loss_mask(classes: Mapping[AnomalyName, V]) -> V:
    """The messages that count as loss (acknowledged and missing): the loss classes or-ed."""
    loss: V = reduce(operator.or_, (classes[AnomalyName(name)] for name in LOSS_CLASSES))
    return loss


def classify(messages: Messages, progress: Progress, log_start: dict[int, int]) -> Masks:
    """A mask over the messages per class of RULES (exactly the registry's Check.MESSAGE
    classes, in its order); a message may be in several."""
    return decide(facts_of(messages, progress, log_start))


def facts_of(m: Messages, progress: Progress, log_start: dict[int, int]) -> dict[Fact, np.ndarray]:
    """Every Fact of every message, from the message table and the read-back's progress."""
    located = m.offset != NULL
    expired = located & (m.offset < _per_partition(log_start, m.partition, 0))
    read_past = m.offset < _per_partition(progress.max_read_offset, m.partition, NULL)
    later_read = m.send_ts < _per_partition(progress.max_read_send_ts, m.partition, NONE_TS)
    proven = np.where(located, m.slot_read | read_past, later_read & (m.send_ts != NONE_TS))
    return {
        Fact.JOURNALLED: m.in_acked,
        Fact.OK: m.status == CODE[Status.OK],
        Fact.FAILED: m.status == CODE[Status.FAILED],
        Fact.INDETERMINATE: m.status == CODE[Status.INDETERMINATE],
        Fact.READ: m.reads > 0,
        Fact.READ_TWICE: m.reads > 1,
        Fact.EXPIRED: expired,
        Fact.PROVEN: proven,
        Fact.LOCATED: located & (m.partition != NULL),
        Fact.SLOT_READ: m.slot_read,
        Fact.ELSEWHERE: ~m.holds_self,
    }


def _per_partition(values: dict[int, int], partition: np.ndarray, default: int) -> np.ndarray:
    """values looked up by each entry's partition, default where absent (or partition NULL)."""
    out = np.full(len(partition), default, dtype=np.int64)
    for p, value in values.items():
        out[partition == p] = value
    return out


def weight(name: AnomalyName, mask: np.ndarray, messages: Messages) -> int:
    """A class's count: messages, except phantom, which counts the records holding them."""
    if name == AnomalyName.PHANTOM:
        return int(messages.reads[mask].sum())
    return int(np.count_nonzero(mask))


def first_reads(reads: Reads) -> np.ndarray:
    """A mask over the records: each message's first read (its lowest slot), and every record
    that is not the producer's (each its own)."""
    first = ~reads.identified
    ours = np.flatnonzero(reads.identified)
    _, at = np.unique(reads.msg_id[ours], return_index=True)  # records are in slot order
    first[ours[at]] = True
    return first


def reordered(reads: Reads) -> dict[str, np.ndarray]:
    """Records read after a higher key_seq of their key in the same partition (offset order),
    each message judged by its first read.

    Order is judged per partition only: a key's records in another partition say nothing. A
    message read again later (a duplicate: a send written twice) is counted as duplicated, not
    as late: its later copies follow the sends after it by construction, so counting them
    here would count one anomaly twice.
    """
    chosen = np.flatnonzero(reads.has_seq & first_reads(reads))
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
