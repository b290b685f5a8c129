"""The checker: reconcile one run's acked.parquet against its readback.parquet, in one process.

A run is the unit of reconciliation (every question is asked within a run), so
analysis.spark.reconcile hands each run to a Spark task and this module answers all of them
with Arrow and numpy: sorts,
binary searches and segment reductions over columns, no per-row Python. The anomaly classes are
those of analysis.model.anomalies, decided as docs/kafka-reliability.md says:

- a *message* is a msg_id sent or read (all records without a msg_id are one message);
- a *record* is one (partition, offset) of the read-back: one record read twice is one record;
- a message's acked location is its acked row's (partition, offset); its holder is the record
  now at that location.

The sensitivity probe is the same reconciliation again, with a seeded set of healthy records
hidden from the read-back: every hidden record must come back as a missing message.
"""

from __future__ import annotations

import numpy as np

from analysis.checks import transactions
from analysis.checks.arrays import gather
from analysis.checks.consumers import (
    MAX_EXAMPLES,
    AckedOffsets,
    ConsumerFacts,
    consumer_facts,
    has_consumer_journals,
    processed_table,
)
from analysis.checks.cycles import cycle_facts, reads_of
from analysis.checks.liveness import liveness_facts, records_by_partition
from analysis.checks.messages import classes
from analysis.checks.messages.columns import CODE, NO_ID, NONE_TS, NULL, Acked, Reads
from analysis.checks.messages.examples import by_partition, examples_of, identity_facts, missing_of
from analysis.checks.messages.facts import RunFacts, RunInput
from analysis.checks.messages.index import Index, Messages, Progress, messages_of
from analysis.checks.messages.probe import run_probe
from analysis.checks.messages.timeline import (
    add_anomaly_seconds,
    anomaly_seconds,
    send_facts,
    status_counts,
)
from analysis.checks.polls import MemberStart, member_starts, poll_facts, reader_start
from analysis.checks.transactions import MessageView, Transactions, TxnFacts, read_uncommitted_ids
from analysis.model.anomalies import AnomalyName, CountName
from analysis.model.evidence import RunEvidence
from harness.rundir import layout
from harness.rundir.records import CommitMode, Status
from harness.rundir.transactions import read_txn_reads

__all__ = ["RunFacts", "RunInput", "check_run"]


def check_run(run: RunInput) -> RunFacts:
    """The facts of one run, read from its directory (see the module docstring)."""
    acked = Acked.read(run.run_dir / layout.ACKED)
    seconds, counts, contract = send_facts(acked)
    if (txns := Transactions.read(run.run_dir)) is not None:
        # Acknowledged means committed: the contract above compared the delivery reports.
        acked.status = txns.statuses(acked.msg_id, acked.identified, acked.status, CODE)
        counts |= status_counts(acked)
    if not run.complete:
        return RunFacts(seconds, counts, contract)
    reads = Reads.read(run.run_dir / layout.READBACK)
    index = Index.build(acked, reads)
    progress = Progress.of(index, run)
    messages = messages_of(index, hidden=None)
    found = classes.classify(messages, progress, run.log_start)
    loss = classes.loss_mask(found)
    reordered = classes.reordered(reads)
    counts |= {CountName.READ: reads.n} | {
        name: classes.weight(name, mask, messages) for name, mask in found.items()
    }
    counts[AnomalyName.REORDERED] = len(reordered["offset"])
    counts[AnomalyName.INCONSISTENT_OFFSETS] = len(reads.contradicted())
    contract |= identity_facts(messages)
    add_anomaly_seconds(seconds, anomaly_seconds(found, messages))
    examples = examples_of(found, messages, reads, reordered)
    examples[AnomalyName.INCONSISTENT_OFFSETS] = reads.contradiction_rows(MAX_EXAMPLES)
    sensitivity = run_probe(index, run, messages, loss, progress)
    reader = None  # the transactions' reader, as a member start, when they read
    if txns is not None:
        txn_reads = read_txn_reads(run.run_dir)
        reader = reader_start(txns, txn_reads)
        txn = _transaction_facts(run, txns, messages, reads, found[AnomalyName.EXPIRED])
        counts |= txn.counts
        examples |= txn.examples
        sensitivity = sensitivity & txn.sensitivity
        ours = np.where(reads.identified, reads.msg_id, -1)
        cycles = cycle_facts(txns, ours, reads.partition, reads.offset, reads_of(txn_reads))
        counts |= cycles.counts
        examples |= cycles.examples(MAX_EXAMPLES)
    if has_consumer_journals(run.run_dir):
        group = _consumer_facts(run.evidence, messages, reads, acked)
        counts |= group.counts
        examples |= group.examples
        for second, row in group.seconds.items():
            seconds.setdefault(second, {}).update(row)
        sensitivity = sensitivity & group.sensitivity
        live = liveness_facts(run.evidence, reads.partition, reads.offset)
        counts |= live.counts
        examples |= live.examples(MAX_EXAMPLES)
        for second, row in live.seconds.items():
            seconds.setdefault(second, {}).update(row)
    if (starts := _poll_starts(run, reader)) is not None:
        polls = poll_facts(starts, records_by_partition(reads.partition, reads.offset))
        counts |= polls.counts
        examples |= polls.examples(MAX_EXAMPLES)
    return RunFacts(
        seconds=seconds,
        counts=counts,
        contract=contract,
        loss_by_partition=by_partition(loss, messages.partition),
        divergence_by_partition=by_partition(
            found[AnomalyName.OFFSET_DIVERGENT], messages.partition
        ),
        examples=examples,
        missing=missing_of(loss, messages),
        sensitivity=sensitivity,
    )


def _poll_starts(run: RunInput, reader: MemberStart | None) -> list[MemberStart] | None:
    """The member starts whose steps the poll check judges: the group's members (a run with
    consumer journals) and the transactions' `reader` (a run whose transactions read); None
    for a run with neither."""
    starts: list[MemberStart] = []
    if has_consumer_journals(run.run_dir):
        group_mode = run.evidence.consumers.commit if run.evidence.consumers else None
        commit = CommitMode(group_mode) if group_mode in tuple(CommitMode) else None
        starts += member_starts(run.run_dir, commit)
    if reader is not None:
        starts.append(reader)
    return starts if starts or has_consumer_journals(run.run_dir) else None


def _transaction_facts(
    run: RunInput, txns: Transactions, m: Messages, reads: Reads, expired: np.ndarray
) -> TxnFacts:
    """analysis.checks.transactions over this run's messages as read with read_committed."""
    view = MessageView(
        msg_id=m.msg_id,
        sent=m.in_acked & (m.msg_id != NO_ID),
        reads=m.reads,
        partition=m.partition,
        offset=m.offset,
        read_partition=_at_first_read(reads.partition, m.first_read),
        read_offset=_at_first_read(reads.offset, m.first_read),
        expired=expired,
        consumed=_times_consumed(run, m.msg_id),
    )
    return transactions.check(txns, view, read_uncommitted_ids(run.run_dir))


def _times_consumed(run: RunInput, msg_id: np.ndarray) -> np.ndarray:
    """How many times the run's consumer group processed each message (ascending msg_id), 0
    for all in a run without consumers; processed ids not among the messages are left out."""
    consumed = np.zeros(len(msg_id), dtype=np.int64)
    if not has_consumer_journals(run.run_dir) or not len(msg_id):
        return consumed
    ids = processed_table(run.run_dir)["msg_id"].drop_null().to_numpy().astype(np.int64)
    at = np.minimum(np.searchsorted(msg_id, ids), len(msg_id) - 1)
    np.add.at(consumed, at[msg_id[at] == ids], 1)
    return consumed


def _at_first_read(column: np.ndarray, first_read: np.ndarray) -> np.ndarray:
    """A record column at each message's first read, NULL for a message never read."""
    return gather(column, first_read, NULL)


def _consumer_facts(
    run: RunEvidence, messages: Messages, reads: Reads, acked: Acked
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
        run, messages.msg_id[present], reads.partition[record], reads.offset[record], offsets
    )
