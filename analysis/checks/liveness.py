"""Whether the consumer group kept making progress, and resumed where it had committed (runs with
workload.consumers): the `stuck` and `reset` classes of analysis.model.anomalies.

From the members' journals (each start of each member apart: layout.consumer_journal), the
sampler's partition ends (`sample` events' `ends`), the faults and the `consumers` event:

- the group's **position** on a partition at time t is 1 + the highest offset any member
  processed there at or before t (0 before the first): a paused member that finishes an old
  batch after another took the partition over does not move it back, and a group that reads
  again after a reset is `reset`, not behind; every processed record is progress;
- the **readable end** at t is the last stable offset of the latest sample at or before t (the
  members read read_committed); where the last stable offset has stood still below the high
  watermark for longer than the producers' transaction.timeout.ms (the coordinator aborts an
  open transaction then), the high watermark: the records past a held last stable offset are
  ones the group should have read. No sample yet, or a sample without the offset: unknown;
- **stuck**: a window [from, to) without progress in which records the group could read lay
  between its position and the readable end throughout (records of the final read-back, which
  reads as the members do: a transaction marker or an aborted record past the position is
  nothing to read), lasting longer than the bound (the `consumers` event's stuck_s) counted
  outside every fault (from its injection to its heal; a fault never healed lasts until the
  final heal; a crash until the cluster could notice it: analysis.checks.windows). A stall
  the harness caused (a paused or killed member, a partition without a leader) is thereby
  judged only by the time after the fault healed. Observed from the group's
  `consumers-ready` to the end of its catch-up after the final heal;
- **reset**: a member start that resumes a partition (its first record there, or a record at
  or below the one it processed before) at an offset below the group's committed offset then:
  the highest successful commit journalled before it by the other starts, or by this start
  before it (before its previous record in before-process and auto modes, where the commit of
  the batch in hand precedes its processing). A rewind to the committed offset after a crash
  or rebalance is at-least-once's normal path, never a reset. Each start is read apart, so a
  paused member finishing its batch after another took its partition over is no rewind.

The counts are exact for what the files hold; the judge (analysis.judge.liveness) decides which
are allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.checks.arrays import filled_ints
from analysis.checks.check import RunFacts
from analysis.checks.consumers import MAX_EXAMPLES
from analysis.checks.windows import failure_detection_us, fault_free_us, fault_windows
from analysis.model.evidence import RunEvidence
from analysis.model.liveness import LivenessFacts, Reset, StuckWindow
from harness.rundir import layout
from harness.rundir.events import Sample
from harness.rundir.records import (
    COMMIT_OK,
    COMMIT_SCHEMA,
    CONSUMER_STUCK_S,
    PROCESSED_SCHEMA,
    CommitMode,
)
from harness.rundir.streams import read_stream

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = [
    "TIMELINE_LIVENESS",
    "Ends",
    "GroupHistory",
    "Journal",
    "LivenessCheck",
    "group_history",
    "liveness_facts",
    "records_by_partition",
    "resets",
    "stuck_windows",
]

# Per epoch second, in the timeline: partitions in a stuck window, offsets read again by resets.
TIMELINE_LIVENESS = ("stuck", "reset")
UNKNOWN = -1  # an end a sample did not give
START_STRIDE = 1_000_000  # a member start's number: member * START_STRIDE + start
US = 1_000_000


@dataclass(frozen=True)
class Journal:
    """Rows of one partition, each with the member start that wrote it, in time order."""

    ts_us: np.ndarray
    offset: np.ndarray
    start: np.ndarray

    @classmethod
    def empty(cls) -> Journal:
        none = np.zeros(0, dtype=np.int64)
        return cls(none, none, none)


@dataclass(frozen=True)
class Ends:
    """One partition's sampled ends in time order (UNKNOWN where a sample did not give one)."""

    ts_us: np.ndarray
    high_watermark: np.ndarray
    last_stable: np.ndarray


@dataclass(frozen=True)
class GroupHistory:
    """Everything the two classes are decided from, per partition."""

    processed: dict[int, Journal]
    commits: dict[int, Journal]  # successful commits only
    ends: dict[int, Ends]
    faults: tuple[tuple[int, int], ...]  # (injected, healed) epoch µs
    leader_changes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # their ts_us
    observed: tuple[int, int] = (0, 0)  # from the group's readiness to its catch-up's end
    stuck_us: int = int(CONSUMER_STUCK_S * US)
    lso_hold_us: int | None = None  # transaction.timeout.ms; None: no transactions
    # A batch's commit may precede its processing (before-process; auto, whose offsets are
    # stored as messages are handed over): a start's own commits after its previous record may
    # be of the batch in hand. False (after-process): each commit follows what it covers.
    commits_first: bool = True
    # Partition → the offsets of the records the final read-back holds, ascending (the records
    # a member could read); a partition not here: every offset below the end is a record.
    records: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def ends_recorded(self) -> bool:
        """Whether any sample held ends (else `stuck` cannot be decided)."""
        return any(len(e.ts_us) for e in self.ends.values())


def liveness_facts(
    run: RunEvidence, partition: np.ndarray, offset: np.ndarray, detection_us: int = 0
) -> LivenessFacts:
    """The liveness classes of a run with a consumer group whose final read-back holds records
    at (`partition`, `offset`) (see the module docstring); a crash acts at least `detection_us`
    (analysis.checks.windows)."""
    history = group_history(run, detection_us)
    records = records_by_partition(partition, offset)
    none = np.zeros(0, dtype=np.int64)  # a partition the read-back holds nothing of
    history = replace(history, records={p: records.get(p, none) for p in history.ends})
    stuck = tuple(stuck_windows(history))
    found = tuple(resets(history))
    return LivenessFacts(stuck, found, _seconds(stuck, found), history.ends_recorded)


# ---------------------------------------------------------------------------------------------
# stuck


def stuck_windows(history: GroupHistory) -> Iterable[StuckWindow]:
    """Every stuck window of every partition, in partition then time order."""
    begin, finish = history.observed
    for partition, ends in sorted(history.ends.items()):
        progress = history.processed.get(partition, Journal.empty())
        stamps, positions = _positions(progress, begin, finish)
        readable, held = readable_ends(ends, history.lso_hold_us)
        bounds = np.append(stamps[1:], finish).tolist()
        for at, until, position in zip(stamps.tolist(), bounds, positions.tolist(), strict=True):
            if until - at <= history.stuck_us:
                continue  # too short to be stuck even without any fault
            behind = _Behind(ends.ts_us, readable, held, history.records.get(partition))
            for window in behind.windows(at, until, position):
                if fault_free_us(window.from_us, window.to_us, history.faults) > history.stuck_us:
                    yield StuckWindow(partition, *_fields(window))


@dataclass(frozen=True)
class _Window:
    from_us: int
    to_us: int
    position: int
    end: int
    lso_held: bool


def _fields(window: _Window) -> tuple[int, int, int, int, bool]:
    return window.from_us, window.to_us, window.position, window.end, window.lso_held


def _positions(progress: Journal, begin: int, finish: int) -> tuple[np.ndarray, np.ndarray]:
    """The times of progress within (begin, finish), begin itself first, and the position from
    each: 1 + the highest offset processed at or before it (0 before any)."""
    order = np.argsort(progress.ts_us, kind="stable")
    ts = progress.ts_us[order]
    reached = np.maximum.accumulate(progress.offset[order] + 1) if len(ts) else ts
    before = ts <= begin
    first = int(reached[before][-1]) if before.any() else 0
    inside = (ts > begin) & (ts < finish)
    ts, reached = ts[inside], reached[inside]
    last_of_time = np.append(ts[1:] != ts[:-1], True)[: len(ts)]  # the latest stamped alike
    stamps = np.concatenate(([begin], ts[last_of_time])).astype(np.int64)
    positions = np.concatenate(([first], reached[last_of_time])).astype(np.int64)
    return stamps, positions


def readable_ends(ends: Ends, lso_hold_us: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the end a read_committed group can read to (UNKNOWN without a last stable
    offset), and whether it is the high watermark above a last stable offset held past
    `lso_hold_us` (only with transactions: elsewhere the two are one offset)."""
    lso, hw = ends.last_stable, ends.high_watermark
    readable, held = lso.copy(), np.zeros(len(lso), dtype=bool)
    since = None  # when the last stable offset began to stand still below the high watermark
    for i in range(len(lso)):
        below = lso[i] != UNKNOWN and hw[i] != UNKNOWN and lso[i] < hw[i]
        if not below or lso_hold_us is None:
            since = None
            continue
        if since is None or lso[i] != lso[i - 1] or lso[i - 1] == UNKNOWN:
            since = int(ends.ts_us[i])
        if int(ends.ts_us[i]) - since > lso_hold_us:
            readable[i], held[i] = hw[i], True
    return readable, held


@dataclass(frozen=True)
class _Behind:
    """One partition's readable end as a step function of its samples (each sample's value
    from its time to the next's), and the records there are to read (None: every offset)."""

    stamps: np.ndarray
    readable: np.ndarray
    held: np.ndarray
    records: np.ndarray | None

    def windows(self, at: int, until: int, position: int) -> Iterable[_Window]:
        """The maximal windows within [at, until) in which a record lay between `position` and
        the readable end."""
        in_force = int(np.searchsorted(self.stamps, at, side="right")) - 1  # -1: none yet
        later = range(in_force + 1, int(np.searchsorted(self.stamps, until, side="left")))
        start: int | None = None
        end, lso_held = 0, False
        for t, i in [(at, in_force), *((int(self.stamps[i]), i) for i in later)]:
            if i >= 0 and self._to_read(position, int(self.readable[i])):
                if start is None:
                    start, end, lso_held = t, 0, False
                end, lso_held = max(end, int(self.readable[i])), lso_held or bool(self.held[i])
            elif start is not None:
                if t > start:
                    yield _Window(start, t, position, end, lso_held)
                start = None
        if start is not None:
            yield _Window(start, until, position, end, lso_held)

    def _to_read(self, position: int, end: int) -> bool:
        """Whether a record lies in [position, end) (an UNKNOWN end has none)."""
        if end == UNKNOWN or end <= position:
            return False
        if self.records is None:
            return True
        below = np.searchsorted(self.records, [position, end], side="left")
        return bool(below[1] > below[0])


def records_by_partition(partition: np.ndarray, offset: np.ndarray) -> dict[int, np.ndarray]:
    """Partition → its records' offsets, ascending and each once."""
    return {
        int(p): np.unique(offset[partition == p]).astype(np.int64)
        for p in np.unique(partition).tolist()
    }


# ---------------------------------------------------------------------------------------------
# reset


def resets(history: GroupHistory) -> Iterable[Reset]:
    """Every resume below the committed offset, in partition then time order."""
    for partition, progress in sorted(history.processed.items()):
        commits = history.commits.get(partition, Journal.empty())
        ends = history.ends.get(partition)
        changes = np.asarray(history.leader_changes.get(partition, ()), dtype=np.int64)
        for at, offset, previous_at, start in _resumes(progress):
            own_until = previous_at if history.commits_first else at
            committed, since = _committed_before(commits, at, own_until, start)
            if offset < committed:
                yield Reset(
                    partition,
                    at,
                    offset,
                    committed,
                    leader_changed=bool(((changes > since) & (changes <= at)).any()),
                    end_below=_end_below(ends, committed, since, at),
                )


def _resumes(progress: Journal) -> Iterable[tuple[int, int, int | None, int]]:
    """(time, offset, the start's previous record's time or None, start) of every record that
    resumes its start's reading: its first, or one at or below the record before it."""
    if not len(progress.ts_us):
        return
    order = np.lexsort((progress.ts_us, progress.start))  # by start, then time (stable)
    ts, offset, start = progress.ts_us[order], progress.offset[order], progress.start[order]
    same = np.append(False, start[1:] == start[:-1])
    back = np.append(False, offset[1:] <= offset[:-1])
    for i in np.flatnonzero(~same | (same & back)).tolist():
        previous = int(ts[i - 1]) if same[i] else None
        yield int(ts[i]), int(offset[i]), previous, int(start[i])


def _committed_before(
    commits: Journal, at: int, own_until: int | None, start: int
) -> tuple[int, int]:
    """(the group's committed offset a start resuming at `at` should have read, when it was
    first journalled; (-1, at) for none): the other starts' commits before `at`, and this
    start's own before `own_until` (None: none of its own counts)."""
    own = commits.start == start
    if own_until is None:
        mine_before = np.zeros(len(own), dtype=bool)
    else:
        mine_before = own & (commits.ts_us < own_until)
    usable = (~own & (commits.ts_us < at)) | mine_before
    if not usable.any():
        return -1, at
    committed = int(commits.offset[usable].max())
    first = int(commits.ts_us[usable & (commits.offset == committed)].min())
    return committed, first


def _end_below(ends: Ends | None, committed: int, since: int, at: int) -> bool:
    """Whether a sample in [since, at] saw the high watermark below `committed`."""
    if ends is None:
        return False
    inside = (ends.ts_us >= since) & (ends.ts_us <= at) & (ends.high_watermark != UNKNOWN)
    return bool((ends.high_watermark[inside] < committed).any())


# ---------------------------------------------------------------------------------------------
# the timeline


def _seconds(stuck: tuple[StuckWindow, ...], found: tuple[Reset, ...]) -> dict[int, dict[str, int]]:
    """Per epoch second: partitions in a stuck window, offsets read again by resets."""
    seconds: dict[int, dict[str, int]] = {}
    for window in stuck:
        for second in range(window.from_us // US, (window.to_us - 1) // US + 1):
            row = seconds.setdefault(second, {})
            row["stuck"] = row.get("stuck", 0) + 1
    for reset in found:
        row = seconds.setdefault(reset.at_us // US, {})
        row["reset"] = row.get("reset", 0) + reset.reprocessed
    return seconds


# ---------------------------------------------------------------------------------------------
# reading a run


def group_history(run: RunEvidence, detection_us: int = 0) -> GroupHistory:
    """The history of a run's consumer group, from its journals and events (a crash acting
    at least `detection_us`)."""
    group = run.consumers
    faults = fault_windows(run, detection_us)
    return GroupHistory(
        processed=_journals(run.run_dir, layout.CONSUMER_PROCESSED_GLOB, PROCESSED_SCHEMA),
        commits=_journals(run.run_dir, layout.CONSUMER_COMMITS_GLOB, COMMIT_SCHEMA),
        ends=sampled_ends(run.samples),
        faults=faults,
        leader_changes=_leader_changes(run.samples),
        observed=_observed(run),
        stuck_us=int((group.stuck_s if group and group.stuck_s else CONSUMER_STUCK_S) * US),
        lso_hold_us=(
            group.transaction_timeout_ms * 1000
            if group and group.transaction_timeout_ms is not None
            else None
        ),
        commits_first=group is None or group.commit != CommitMode.AFTER_PROCESS,
    )


def _journals(run_dir: Path, pattern: str, schema: pa.Schema) -> dict[int, Journal]:
    """Partition → the rows of every member start's journals of `pattern` (commits: only the
    successful ones), each row tagged with its start."""
    partition, ts, offset, start = [], [], [], []
    for path in sorted(run_dir.glob(pattern)):
        table = read_stream(path, schema)
        if "outcome" in table.column_names:
            table = table.filter(pc.equal(table["outcome"], COMMIT_OK))
        partition.append(filled_ints(table["partition"], -1))
        ts.append(filled_ints(table["ts_us"], -1))
        offset.append(filled_ints(table["offset"], -1))
        start.append(np.full(table.num_rows, _start_of(path), dtype=np.int64))
    if not partition:
        return {}
    p_all, ts_all, o_all, s_all = (np.concatenate(c) for c in (partition, ts, offset, start))
    return {
        int(p): Journal(ts_all[p_all == p], o_all[p_all == p], s_all[p_all == p])
        for p in np.unique(p_all).tolist()
    }


def _start_of(path: Path) -> int:
    """The member start a journal file belongs to (consumer-c<m>-r<s>-...: both of its files
    give the same number), as one int."""
    member, start = (int(part[1:]) for part in path.name.split("-")[1:3])
    return member * START_STRIDE + start


def sampled_ends(samples: list[Sample]) -> dict[int, Ends]:
    """Partition → its sampled ends, in time order (samples without ends left out)."""
    rows: dict[int, list[tuple[int, int, int]]] = {}
    for sample in sorted(samples, key=lambda s: s.ends_us or s.ts_us or 0):
        stamp = sample.ends_us or sample.ts_us
        for end in sample.ends or ():
            hw = UNKNOWN if end.high_watermark is None else end.high_watermark
            lso = UNKNOWN if end.last_stable is None else end.last_stable
            rows.setdefault(end.partition, []).append((stamp or 0, hw, lso))
    return {
        p: Ends(*(np.asarray(column, dtype=np.int64) for column in zip(*r, strict=True)))
        for p, r in rows.items()
    }


def _leader_changes(samples: list[Sample]) -> dict[int, tuple[int, ...]]:
    """Partition → when a sample showed another leader than the one before."""
    last: dict[int, object] = {}
    changes: dict[int, list[int]] = {}
    for sample in sorted(samples, key=lambda s: s.ts_us or 0):
        for state in sample.partitions:
            p, leader = int(state["partition"]), state.get("leader")
            if p in last and last[p] != leader:
                changes.setdefault(p, []).append(sample.ts_us or 0)
            last[p] = leader
    return {p: tuple(c) for p, c in changes.items()}


def _observed(run: RunEvidence) -> tuple[int, int]:
    """From the group's readiness to the end of its catch-up (the `consumers` event when the
    catch-up's end is not known)."""
    ready = run.phase_stamps("consumers-ready")
    heal = run.phase_stamps("heal")
    group = run.consumers
    begin = ready[0] if ready else 0
    if heal and group is not None and group.waited_s is not None:
        return begin, heal[-1] + int(group.waited_s * US)
    finish = group.ts_us if group is not None and group.ts_us else None
    last = max((e.ts_us or 0 for e in run.events.events), default=0)
    return begin, finish or last


@dataclass(frozen=True)
class LivenessCheck:
    """The consumer group's liveness: stuck windows and resets."""

    name: str = "liveness"

    def applies(self, run: RunHistory) -> bool:
        """A complete run with a consumer group."""
        return run.complete and run.has_group

    def facts(self, run: RunHistory) -> RunFacts:
        """`liveness_facts` against the final read-back's records."""
        detection_us = failure_detection_us(run.spec)
        live = liveness_facts(run.evidence, run.reads.partition, run.reads.offset, detection_us)
        return RunFacts(
            seconds=dict(live.seconds), counts=live.counts, examples=live.examples(MAX_EXAMPLES)
        )
