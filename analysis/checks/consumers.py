"""What the consumer group processed, against the final read-back (runs with workload.consumers).

Two anomaly classes of analysis.model.anomalies, decided from the members' journals (every start of
every member: layout.CONSUMER_PROCESSED_GLOB) and the group's final committed offsets (the
`consumers` event):

- consumer_unprocessed: an acknowledged message in the final read-back, at an offset below its
  partition's final committed offset (the group moved past it), that no member ever processed;
- consumer_reprocessed: a message one of whose log records (partition, offset) the group
  processed more than once. Counted by msg_id and by record, so a producer's duplicate (two
  records of one id, each processed once) is the `duplicated` class's, not this one's.

Whether the group caught up, and so whether its committed offsets reached the end, is the
judge's concern (analysis.judge.verdicts); these counts are exact either way.

Its own sensitivity probe: the two classes again, with a seeded sample of healthy messages
(acknowledged, present, processed once, below the committed offset) taken out of the processed
journals, and another sample processed twice: each must come back, as unprocessed and as
reprocessed, and nothing else may change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.checks.arrays import SLOT_BITS, filled_ints, slot_of
from analysis.checks.check import RunFacts
from analysis.checks.messages.columns import CODE, NO_ID, NONE_TS, NULL
from analysis.model.anomalies import AnomalyName
from analysis.model.evidence import RunEvidence
from analysis.model.results import ExampleRow, ExampleRows, Sensitivity
from harness.rundir import layout
from harness.rundir.records import COMMIT_OK, COMMIT_SCHEMA, PROCESSED_SCHEMA, Status
from harness.rundir.streams import read_stream

if TYPE_CHECKING:
    from analysis.checks.history import RunHistory

__all__ = [
    "TIMELINE_COUNTS",
    "TIMELINE_LAG",
    "AckedOffsets",
    "ConsumerCheck",
    "ConsumerFacts",
    "consumer_facts",
    "group_lag",
    "has_consumer_journals",
]

# Per epoch second, in the timeline: records the group processed, commits it saw refused.
TIMELINE_COUNTS = ("processed", "commits_failed")
# Per epoch second too, a level rather than a count: the group's lag at the second's end.
TIMELINE_LAG = "group_lag"
MAX_EXAMPLES = 20
SENSITIVITY_SEED = 20261122
SENSITIVITY_SHARE = 100  # each sample: about one healthy message in 100, at least one


@dataclass(frozen=True)
class AckedOffsets:
    """The acknowledged sends that carry an offset: where each landed and when it was acked."""

    partition: np.ndarray
    offset: np.ndarray
    ack_ts_us: np.ndarray


@dataclass(frozen=True)
class ConsumerFacts:
    """The two counts, their examples, the timeline's seconds and the probe."""

    counts: dict[str, int]  # the registry's Check.CONSUMERS classes
    examples: ExampleRows = field(default_factory=dict)
    seconds: dict[int, dict[str, int]] = field(default_factory=dict)  # TIMELINE_COUNTS
    sensitivity: Sensitivity | None = None  # the probe of the module docstring


def has_consumer_journals(run_dir: Path) -> bool:
    """True when the run had a consumer group (some member started a journal)."""
    return any(run_dir.glob(layout.CONSUMER_PROCESSED_GLOB))


def processed_table(run_dir: Path) -> pa.Table:
    """Every row every member start processed (a torn tail of a killed one is left out)."""
    return _journals(run_dir, layout.CONSUMER_PROCESSED_GLOB, PROCESSED_SCHEMA)


def commits_table(run_dir: Path) -> pa.Table:
    """Every commit outcome every member start journalled."""
    return _journals(run_dir, layout.CONSUMER_COMMITS_GLOB, COMMIT_SCHEMA)


def _journals(run_dir: Path, pattern: str, schema: pa.Schema) -> pa.Table:
    tables = [read_stream(path, schema) for path in sorted(run_dir.glob(pattern))]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def final_committed(run: RunEvidence) -> dict[int, int]:
    """Partition → the group's committed offset after every member left ({}: not recorded,
    then every never-processed message counts)."""
    committed = run.consumers.committed if run.consumers else {}
    return {int(p): int(o) for p, o in committed.items()}


def consumer_facts(
    run: RunEvidence,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    acked: AckedOffsets,
) -> ConsumerFacts:
    """The consumer classes of a run whose acknowledged messages present in the read-back are
    `msg_id`, each read at (`partition`, `offset`); `acked` gives the timeline's group lag."""
    run_dir = run.run_dir
    processed = processed_table(run_dir)
    ids = filled_ints(processed["msg_id"], -1)
    slots = slot_of(filled_ints(processed["partition"], 0), filled_ints(processed["offset"], 0))
    committed = final_committed(run)
    unprocessed = _unprocessed(ids, msg_id, partition, offset, committed)
    reprocessed_slots, reprocessed_ids, times = _repeated(slots[ids >= 0], ids[ids >= 0])
    counts: dict[str, int] = {
        AnomalyName.CONSUMER_UNPROCESSED: int(np.count_nonzero(unprocessed)),
        AnomalyName.CONSUMER_REPROCESSED: len(np.unique(reprocessed_ids)),
    }
    order = np.argsort(msg_id[unprocessed], kind="stable")[:MAX_EXAMPLES]
    examples: ExampleRows = {
        AnomalyName.CONSUMER_UNPROCESSED: [
            {"msg_id": int(i), "partition": int(p), "offset": int(o)}
            for i, p, o in zip(
                msg_id[unprocessed][order].tolist(),
                partition[unprocessed][order].tolist(),
                offset[unprocessed][order].tolist(),
                strict=True,
            )
        ],
        AnomalyName.CONSUMER_REPROCESSED: _reprocessed_examples(
            reprocessed_ids, reprocessed_slots, times
        ),
    }
    commits = commits_table(run_dir)
    seconds = _seconds(processed, commits)
    for second, lag in group_lag(acked, commits).items():
        seconds.setdefault(second, {})[TIMELINE_LAG] = lag
    probe = _probe(ids, slots, msg_id, partition, offset, committed)
    return ConsumerFacts(counts, examples, seconds, probe)


def _probe(
    ids: np.ndarray,
    slots: np.ndarray,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    committed: dict[int, int],
) -> Sensitivity:
    """Hide one seeded sample of healthy messages from the processed rows and process another
    twice; passed when the classes find exactly those on top of the run's own."""
    healthy = _healthy(ids, slots, msg_id, partition, offset, committed)
    rng = np.random.default_rng(SENSITIVITY_SEED)
    size = min(len(healthy) // 2, max(1, len(healthy) // SENSITIVITY_SHARE))
    sample = rng.choice(healthy, size=2 * size, replace=False) if size else healthy[:0]
    hidden, doubled = sample[:size], sample[size:]
    shown = ~np.isin(ids, hidden)
    before = _unprocessed(ids, msg_id, partition, offset, committed)
    after = _unprocessed(ids[shown], msg_id, partition, offset, committed)
    found_hidden = int(np.count_nonzero(after & np.isin(msg_id, hidden)))
    again = np.isin(ids, doubled)
    known = ids >= 0
    _, base_ids, _ = _repeated(slots[known], ids[known])
    probe_slots = np.concatenate((slots[known], slots[again]))
    _, probe_ids, _ = _repeated(probe_slots, np.concatenate((ids[known], ids[again])))
    found_doubled = int(np.count_nonzero(np.isin(doubled, probe_ids)))
    extra = int(np.count_nonzero(after)) - int(np.count_nonzero(before)) - found_hidden
    extra += len(np.unique(probe_ids)) - len(np.unique(base_ids)) - found_doubled
    removed, found = 2 * size, found_hidden + found_doubled
    return Sensitivity.of(removed, found, clean=extra == 0)


def _healthy(
    ids: np.ndarray,
    slots: np.ndarray,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    committed: dict[int, int],
) -> np.ndarray:
    """The present acknowledged msg_ids the group processed exactly once, at a log position
    (`slots`) where it processed no other record, below the committed offset of their
    partition (every one when it was not recorded), in ascending order. After an unclean
    election the group may have processed two messages at one offset: that position already
    counts as reprocessed, so processing one of them again would show nothing new."""
    known = ids >= 0
    values, counts = np.unique(ids[known], return_counts=True)
    positions, times = np.unique(slots[known], return_counts=True)
    alone = ids[known][np.isin(slots[known], positions[times == 1])]
    once = np.isin(msg_id, values[counts == 1]) & np.isin(msg_id, alone)
    below = _below_committed(partition, offset, committed)
    return np.sort(msg_id[once & below])


def _seconds(processed: pa.Table, commits: pa.Table) -> dict[int, dict[str, int]]:
    """Per epoch second: records processed, and commit attempts refused."""
    failed = commits.filter(pc.not_equal(commits["outcome"], COMMIT_OK))
    seconds: dict[int, dict[str, int]] = {}
    for name, table in (("processed", processed), ("commits_failed", failed)):
        stamps = filled_ints(table["ts_us"], -1)
        values, counts = np.unique(stamps[stamps >= 0] // 1_000_000, return_counts=True)
        for second, count in zip(values.tolist(), counts.tolist(), strict=True):
            seconds.setdefault(second, {})[name] = count
    return seconds


def group_lag(acked: AckedOffsets, commits: pa.Table) -> dict[int, int]:
    """Per epoch second, from the first acknowledgement to the last one or commit: the group's lag
    at the second's end, in records, as Kafka's tools define it: over the partitions, the log
    end the producers had been acknowledged (1 + the highest acked offset by then) minus the
    group's committed offset then (its latest successful commit; 0 before any, as the group
    reads from the earliest offset), never below 0."""
    ok = commits.filter(pc.equal(commits["outcome"], COMMIT_OK))
    commit_p, commit_o, commit_ts = (
        filled_ints(ok[n], 0) for n in ("partition", "offset", "ts_us")
    )
    if len(acked.ack_ts_us) == 0:
        return {}
    first = int(acked.ack_ts_us.min()) // 1_000_000
    last = int(max(acked.ack_ts_us.max(), commit_ts.max(initial=0))) // 1_000_000
    ends = (np.arange(first, last + 1, dtype=np.int64) + 1) * 1_000_000
    lag = np.zeros(len(ends), dtype=np.int64)
    for p in np.union1d(acked.partition, commit_p).tolist():
        mine = acked.partition == p
        log_end = _level_at(ends, acked.ack_ts_us[mine], acked.offset[mine] + 1, running_max=True)
        theirs = commit_p == p
        committed = _level_at(ends, commit_ts[theirs], commit_o[theirs], running_max=False)
        lag += np.maximum(log_end - committed, 0)
    return dict(zip(range(first, last + 1), lag.tolist(), strict=True))


def _level_at(
    ends: np.ndarray, stamps: np.ndarray, values: np.ndarray, running_max: bool
) -> np.ndarray:
    """For each time in `ends`: the value of the latest stamp before it (the highest so far
    when `running_max`), 0 before the first stamp."""
    order = np.argsort(stamps, kind="stable")
    stamps, values = stamps[order], values[order]
    if running_max and len(values):
        values = np.maximum.accumulate(values)
    taken = np.searchsorted(stamps, ends, side="left")
    padded = np.concatenate([np.zeros(1, dtype=np.int64), values.astype(np.int64)])
    return padded[taken]


def _unprocessed(
    processed_ids: np.ndarray,
    msg_id: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    committed: dict[int, int],
) -> np.ndarray:
    """A mask over the present acknowledged messages: never processed, and below the group's
    final committed offset of their partition (every one when it was not recorded)."""
    never = ~np.isin(msg_id, processed_ids)
    unprocessed: np.ndarray = never & _below_committed(partition, offset, committed)
    return unprocessed


def _below_committed(
    partition: np.ndarray, offset: np.ndarray, committed: dict[int, int]
) -> np.ndarray:
    """A mask: each (partition, offset) lies below its partition's final committed offset
    (all of them when none was recorded)."""
    if not committed:
        return np.ones(len(partition), dtype=bool)
    bound = np.full(len(partition), -1, dtype=np.int64)
    for p, value in committed.items():
        bound[partition == p] = value
    return offset < bound


def _repeated(slots: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slots processed more than once, the msg_id each holds, how many times each)."""
    values, first, counts = np.unique(slots, return_index=True, return_counts=True)
    again = counts > 1
    return values[again], ids[first[again]], counts[again]


def _reprocessed_examples(
    ids: np.ndarray, slots: np.ndarray, times: np.ndarray
) -> list[ExampleRow]:
    """Up to MAX_EXAMPLES records processed more than once, lowest msg_id first."""
    order = np.argsort(ids, kind="stable")[:MAX_EXAMPLES]
    mask = (1 << SLOT_BITS) - 1
    return [
        {
            "msg_id": int(ids[i]),
            "partition": int(slots[i] >> SLOT_BITS),
            "offset": int(slots[i] & mask),
            "processed": int(times[i]),
        }
        for i in order.tolist()
    ]


@dataclass(frozen=True)
class ConsumerCheck:
    """The consumer group's classes over the acknowledged messages the read-back holds."""

    name: str = "consumers"

    def applies(self, run: RunHistory) -> bool:
        """A complete run with a consumer group."""
        return run.complete and run.has_group

    def facts(self, run: RunHistory) -> RunFacts:
        """`consumer_facts` over each present acknowledged message at the record it was first
        read from, and the group's lag against the acknowledged offsets."""
        messages, reads, acked = run.messages, run.reads, run.acked
        present = (messages.status == CODE[Status.OK]) & (messages.reads > 0)
        present &= messages.msg_id != NO_ID
        record = messages.first_read[present]
        landed = (acked.status == CODE[Status.OK]) & (acked.offset != NULL)
        landed &= (acked.ack_ts != NONE_TS) & (acked.partition != NULL)
        offsets = AckedOffsets(acked.partition[landed], acked.offset[landed], acked.ack_ts[landed])
        group = consumer_facts(
            run.evidence,
            messages.msg_id[present],
            reads.partition[record],
            reads.offset[record],
            offsets,
        )
        return RunFacts(
            seconds=dict(group.seconds),
            counts=group.counts,
            examples=group.examples,
            sensitivity=group.sensitivity,
        )
