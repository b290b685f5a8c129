"""Whether each group member's position moved as Kafka documents it (runs with
workload.consumers): the `poll_skip` and `nonmonotonic_poll` classes of
analysis.model.anomalies, Jepsen's poll skip and nonmonotonic poll.

The consumer's position is "the offset of the next record that will be given out", advancing
as records are returned. So within one member start, between two consecutive records it
processed from one partition, with no change of that partition's assignment to it in between
(its assignment journal: assigned, revoked or lost, stamped when the rebalance callback ran;
the stamps are compared inclusively, so a change stamped with either record breaks the pair):

- **nonmonotonic_poll**: the second record's offset is not above the first's;
- **poll_skip**: a record the complete final read-back holds lies strictly between the two
  (the read-back reads as the members do, read_committed, so aborted records and transaction
  markers, which the members are never given, are not there to skip).

The transactions' reader (workload.transactions.reads) is judged the same way as one more
member, READER: its records are those read by committed transactions, in transaction order,
and a transaction of unknown outcome breaks every pair around it (it may have committed its
reads). A skip there is a record no committed transaction read although a later one read past
it; each such step also counts the skipped records an aborted transaction of the reader read
(`read_by_aborted`, KAFKA-17582's evidence: a reader that was not rewound after the abort).

A step one of whose two records the read-back no longer holds at its offset (another record
there, or none) was taken on a log since rewritten under the member, by an unclean election
or a lost tail: the read-back cannot say what that log held between the two, so the step is
counted apart (`poll_steps_rewritten`) and belongs to neither class. The rewrite itself is
`inconsistent_reads` (analysis.checks.offset_reads), judged by the loss rule.

In before-process mode a batch whose commit failed is never processed (at-most-once), so a
failed commit of the partition between the two records breaks the pair as well. Rebalances,
resets and restarts are what the consumer_reprocessed/unprocessed and `reset` checks judge:
no pair spans them. A member start that processed records but journalled no change of
assignment (a harness before that journal) cannot tell a jump from a rebalance: its steps are
not counted, the start is (UNJOURNALLED_STARTS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.checks.arrays import filled_ints, slot_of
from analysis.checks.check import RunFacts
from analysis.checks.liveness import records_by_partition
from analysis.checks.messages.columns import NO_ID, Reads
from analysis.checks.transactions import (
    ABORTED,
    COMMITTED,
    MAX_EXAMPLES,
    UNKNOWN,
    Transactions,
)
from analysis.model.polls import READER, PollFacts, PollStep
from harness.rundir import layout
from harness.rundir.records import (
    ASSIGNMENT_SCHEMA,
    COMMIT_OK,
    COMMIT_SCHEMA,
    PROCESSED_SCHEMA,
    CommitMode,
)
from harness.rundir.streams import read_stream

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = [
    "FinalLog",
    "MemberStart",
    "PollCheck",
    "member_starts",
    "poll_facts",
    "reader_start",
    "steps_of",
]


@dataclass(frozen=True)
class MemberStart:
    """One start of one member: what it processed (journal order) and when its partitions'
    assignment changed (None: it journalled no change at all)."""

    consumer: int
    partition: np.ndarray
    offset: np.ndarray
    ts_us: np.ndarray
    breaks: dict[int, np.ndarray] | None  # partition → stamps that break a pair, ascending
    # partition → the offsets aborted transactions read there, ascending (the reader only)
    aborted: dict[int, np.ndarray] | None = None
    msg_id: np.ndarray | None = None  # the message of each record (NO_ID: not ours); None: unread


@dataclass(frozen=True)
class FinalLog:
    """The final read-back: by partition its records' distinct offsets, ascending, and every
    record read as its slot (ascending, repeated where it contradicts itself) with its msg_id:
    `messages.columns.Reads`' own order, so the run's reads need no copy."""

    offsets: dict[int, np.ndarray]
    slot: np.ndarray
    msg_id: np.ndarray

    @classmethod
    def of(cls, partition: np.ndarray, offset: np.ndarray, msg_id: np.ndarray) -> FinalLog:
        """The read-back's records given as three aligned arrays in any order (msg_id NO_ID:
        not ours)."""
        slot = slot_of(partition.astype(np.int64), offset.astype(np.int64))
        order = np.argsort(slot, kind="stable")
        return cls(records_by_partition(partition, offset), slot[order], msg_id[order])

    @classmethod
    def of_reads(cls, reads: Reads) -> FinalLog:
        """The run's read-back, already in slot order."""
        return cls(records_by_partition(reads.partition, reads.offset), reads.slot, reads.msg_id)

    def holds(self, partition: int, offset: int, msg_id: int) -> bool:
        """Whether the read-back holds message `msg_id` at the partition's `offset`."""
        slot = int(slot_of(np.asarray(partition, np.int64), np.asarray(offset, np.int64)))
        low, high = np.searchsorted(self.slot, [slot, slot + 1])
        return bool(np.any(self.msg_id[low:high] == msg_id))


def poll_facts(starts: Iterable[MemberStart], final: FinalLog) -> PollFacts:
    """The two classes over every member start against the final read-back, and the steps
    taken on a log since rewritten (module docstring)."""
    skips: list[PollStep] = []
    backwards: list[PollStep] = []
    unjournalled = rewritten = 0
    for start in starts:
        if start.breaks is None:
            unjournalled += len(start.offset) > 0
            continue
        for step, rows in _steps(start, final.offsets):
            if _rewritten(step, rows, start, final):
                rewritten += 1
            elif step.backwards:
                backwards.append(step)
            elif step.skipped:
                skips.append(step)
    return PollFacts(tuple(skips), tuple(backwards), unjournalled, rewritten)


def _rewritten(step: PollStep, rows: tuple[int, int], start: MemberStart, final: FinalLog) -> bool:
    """Whether the read-back no longer holds the message the member read at one of the step's
    two offsets (`rows`: the two records' rows in the start's journal)."""
    if start.msg_id is None:
        return False
    ends = zip((step.from_offset, step.to_offset), start.msg_id[list(rows)].tolist(), strict=True)
    return not all(final.holds(step.partition, offset, msg) for offset, msg in ends)


def steps_of(start: MemberStart, records: dict[int, np.ndarray]) -> Iterable[PollStep]:
    """Every step of a start that no break interrupts, backwards or skipping a record (a step
    to the next record the read-back holds is neither, and is left out); `records`: partition
    → the read-back's offsets there, ascending."""
    return (step for step, _ in _steps(start, records))


def _steps(
    start: MemberStart, records: dict[int, np.ndarray]
) -> Iterable[tuple[PollStep, tuple[int, int]]]:
    """steps_of's steps, each with its two records' rows in the start's journal."""
    breaks = start.breaks or {}
    none = np.zeros(0, dtype=np.int64)
    for partition in np.unique(start.partition).tolist():
        mine = np.flatnonzero(start.partition == partition)  # journal order
        offset, ts = start.offset[mine], start.ts_us[mine]
        stamps = breaks.get(partition, none)
        first, second = offset[:-1], offset[1:]
        broken = np.searchsorted(stamps, ts[1:], "right") > np.searchsorted(stamps, ts[:-1], "left")
        held = records.get(partition, none)
        between = np.searchsorted(held, second, "left") - np.searchsorted(held, first, "right")
        odd = ~broken & ((second <= first) | (between > 0))
        aborted = None if start.aborted is None else start.aborted.get(partition, none)
        for i in np.flatnonzero(odd).tolist():
            skipped = max(int(between[i]), 0)
            at, low, high = int(ts[i + 1]), int(first[i]), int(second[i])
            by_aborted = None if aborted is None else _strictly_between(aborted, low, high)
            step = PollStep(partition, start.consumer, at, low, high, skipped, by_aborted)
            yield step, (int(mine[i]), int(mine[i + 1]))


def _strictly_between(sorted_offsets: np.ndarray, low: int, high: int) -> int:
    """How many distinct offsets of an ascending array lie strictly between low and high."""
    inside = sorted_offsets[
        np.searchsorted(sorted_offsets, low, "right") : np.searchsorted(sorted_offsets, high)
    ]
    return len(np.unique(inside))


def reader_start(txns: Transactions, reads: pa.Table | None) -> MemberStart | None:
    """The transactions' reader as one member start (see the module docstring), from the
    run's transactions and its txn-reads table; None for a run whose transactions did not
    read."""
    if reads is None:
        return None
    committed = txns.txn[txns.outcome == COMMITTED]
    unknown_begins = np.sort(txns.began[txns.outcome == UNKNOWN])
    txn = filled_ints(reads["txn"], -1)
    partition = filled_ints(reads["partition"], -1)
    offset = filled_ints(reads["offset"], -1)
    order = np.argsort(txn, kind="stable")  # transaction order, journal order within
    kept = order[np.isin(txn[order], committed)]
    by_aborted = np.isin(txn, txns.txn[txns.outcome == ABORTED])
    partitions = np.unique(partition).tolist()
    return MemberStart(
        READER,
        partition[kept],
        offset[kept],
        filled_ints(reads["ts_us"], -1)[kept],
        {p: unknown_begins for p in partitions},
        {p: np.sort(offset[by_aborted & (partition == p)]) for p in partitions},
        filled_ints(reads["msg_id"], NO_ID)[kept],
    )


def member_starts(run_dir: Path, commit: CommitMode | None) -> Iterable[MemberStart]:
    """Every member start of a run, read from its journals; in before-process mode its failed
    commits break its pairs too."""
    for path in sorted(run_dir.glob(layout.CONSUMER_PROCESSED_GLOB)):
        member, start = layout.java_consumer_start(path.name)
        files = layout.consumer_journal(member, start)
        processed = read_stream(path, PROCESSED_SCHEMA)
        changes = read_stream(run_dir / files.assignments, ASSIGNMENT_SCHEMA)
        stamps = [(changes["partition"], changes["ts_us"])]
        if commit == CommitMode.BEFORE_PROCESS:
            commits = read_stream(run_dir / files.commits, COMMIT_SCHEMA)
            failed = commits.filter(pc.not_equal(commits["outcome"], COMMIT_OK))
            stamps.append((failed["partition"], failed["ts_us"]))
        yield MemberStart(
            member,
            filled_ints(processed["partition"], -1),
            filled_ints(processed["offset"], -1),
            filled_ints(processed["ts_us"], -1),
            _breaks(stamps) if changes.num_rows else None,
            msg_id=filled_ints(processed["msg_id"], NO_ID),
        )


def _breaks(stamps: list[tuple[pa.ChunkedArray, pa.ChunkedArray]]) -> dict[int, np.ndarray]:
    """Partition → the sorted stamps of (partition, ts_us) column pairs."""
    partition = np.concatenate([filled_ints(p, -1) for p, _ in stamps])
    ts = np.concatenate([filled_ints(t, -1) for _, t in stamps])
    return {int(p): np.sort(ts[partition == p]) for p in np.unique(partition).tolist()}


@dataclass(frozen=True)
class PollCheck:
    """Each member start's steps (the group's members, and the transactions' reader)."""

    name: str = "polls"

    def applies(self, run: RunHistory) -> bool:
        """A complete run with a consumer group, or whose transactions read."""
        return run.complete and (run.has_group or _reader(run) is not None)

    def facts(self, run: RunHistory) -> RunFacts:
        """`poll_facts` over the member starts against the final read-back's records."""
        starts: list[MemberStart] = []
        if run.has_group:
            group_mode = run.evidence.consumers.commit if run.evidence.consumers else None
            commit = CommitMode(group_mode) if group_mode in tuple(CommitMode) else None
            starts += member_starts(run.run_dir, commit)
        if (reader := _reader(run)) is not None:
            starts.append(reader)
        polls = poll_facts(starts, FinalLog.of_reads(run.reads))
        return RunFacts(counts=polls.counts, examples=polls.examples(MAX_EXAMPLES))


def _reader(run: RunHistory) -> MemberStart | None:
    """The transactions' reader as a member start; None when the run's transactions did not
    read, or it ran none."""
    return None if run.txns is None else reader_start(run.txns, run.txn_reads)
