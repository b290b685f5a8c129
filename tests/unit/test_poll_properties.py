"""The poll check (analysis/checks/polls.py) on generated member histories, against an oracle
written here that reads the rows one by one: for each processed row, the row before it of the
same partition in the same start, any change of assignment stamped between them, and the
read-back's offsets counted one by one. Histories of members that read as Kafka documents are
clean; a planted skip and a planted step backwards are found with their witness. A step one of whose
records the read-back does not hold (another message there, or none) is counted apart, as taken
on a log since rewritten. Member starts as the run directory holds them (Arrow streams) are read
back to the same steps."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analysis.checks.polls import FinalLog, MemberStart, member_starts, poll_facts
from analysis.judge.liveness import judge_liveness
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.evidence import RunEvidence
from analysis.model.polls import PollStep
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.records import (
    ASSIGNMENT_SCHEMA,
    COMMIT_SCHEMA,
    PROCESSED_SCHEMA,
    CommitMode,
)
from harness.rundir.streams import StreamWriter
from tests.examples import examples


@dataclass(frozen=True)
class History:
    """One member start: processed rows (partition, offset, ts) in journal order, changes of
    assignment (partition, ts), and the read-back's offsets per partition; the rows in
    `stale` read another message than the read-back's at their offset (a log since rewritten).
    The read-back's message at an offset is message(partition, offset)."""

    rows: tuple[tuple[int, int, int], ...]
    changes: tuple[tuple[int, int], ...]
    records: dict[int, frozenset[int]]
    stale: frozenset[int] = frozenset()

    def start(self, consumer: int = 0) -> MemberStart:
        """The checker's input of this history."""
        column = [np.array([r[i] for r in self.rows], dtype=np.int64) for i in range(3)]
        breaks = {
            p: np.array(sorted(t for q, t in self.changes if q == p), dtype=np.int64)
            for p in {p for p, _ in self.changes}
        }
        ids = [message(p, o) + (i in self.stale) for i, (p, o, _) in enumerate(self.rows)]
        return MemberStart(consumer, *column, breaks, msg_id=np.array(ids, dtype=np.int64))

    def held(self) -> FinalLog:
        read = [(p, o) for p, offsets in self.records.items() for o in sorted(offsets)]
        partition, offset = (np.array([r[i] for r in read], dtype=np.int64) for i in (0, 1))
        ids = np.array([message(p, o) for p, o in read], dtype=np.int64)
        return FinalLog.of(partition, offset, ids)

    def read_back(self, i: int) -> bool:
        """Whether the read-back holds row i's message at its offset."""
        p, offset, _ = self.rows[i]
        return i not in self.stale and offset in self.records.get(p, ())


def message(partition: int, offset: int) -> int:
    """The read-back's message at an offset (even: a stale read is the next odd number)."""
    return 2 * (partition * 1000 + offset)


def oracle(history: History, consumer: int = 0) -> tuple[list[PollStep], int]:
    """The steps the module docstring defines, read row by row, and how many were taken on a
    rewritten log."""
    steps, rewritten = [], 0
    for i, (p, offset, ts) in enumerate(history.rows):
        before = [j for j in range(i) if history.rows[j][0] == p]
        if not before:
            continue
        _, last, last_ts = history.rows[before[-1]]
        if any(q == p and last_ts <= t <= ts for q, t in history.changes):
            continue
        skipped = sum(1 for o in history.records.get(p, ()) if last < o < offset)
        if offset > last and not skipped:
            continue
        if not (history.read_back(before[-1]) and history.read_back(i)):
            rewritten += 1
            continue
        steps.append(PollStep(p, consumer, ts, last, offset, 0 if offset <= last else skipped))
    return steps, rewritten


def found(history: History) -> list[PollStep]:
    facts = poll_facts([history.start()], history.held())
    return sorted([*facts.skips, *facts.backwards], key=_order)


def rewritten(history: History) -> int:
    return poll_facts([history.start()], history.held()).rewritten


def _order(step: PollStep) -> tuple[int, int]:
    return step.at_us, step.partition


partitions = st.integers(min_value=0, max_value=2)
offsets = st.integers(min_value=0, max_value=12)
stamps = st.integers(min_value=0, max_value=40)
records = st.dictionaries(partitions, st.frozensets(offsets, max_size=12), max_size=3)


@st.composite
def any_history(draw: st.DrawFn) -> History:
    """Rows in time order (stamps may repeat), changes anywhere, any read-back."""
    rows = draw(st.lists(st.tuples(partitions, offsets, stamps), max_size=14))
    rows = sorted(rows, key=lambda r: r[2])
    changes = draw(st.lists(st.tuples(partitions, stamps), max_size=4))
    stale = draw(st.frozensets(st.integers(min_value=0, max_value=max(len(rows) - 1, 0))))
    return History(tuple(rows), tuple(changes), draw(records), stale)


@st.composite
def clean_history(draw: st.DrawFn) -> History:
    """A member as Kafka documents it: each assignment of a partition (a change stamped at its
    start) resumes anywhere in the read-back's records and is given them one after the other;
    the records have gaps (markers, aborted records) the member never sees."""
    held = draw(st.dictionaries(partitions, st.frozensets(offsets, min_size=1), min_size=1))
    rows: list[tuple[int, int, int]] = []
    changes: list[tuple[int, int]] = []
    ts = 0
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        p = draw(st.sampled_from(sorted(held)))
        log = sorted(held[p])
        ts += draw(st.integers(min_value=0, max_value=2))
        changes.append((p, ts))
        first = draw(st.integers(min_value=0, max_value=len(log) - 1))
        for offset in log[first : first + draw(st.integers(min_value=0, max_value=len(log)))]:
            ts += draw(st.integers(min_value=0, max_value=2))
            rows.append((p, offset, ts))
    return History(tuple(rows), tuple(changes), held)


@settings(max_examples=examples(1.0))
@given(any_history())
@example(History(((0, 3, 1), (0, 3, 2)), (), {0: frozenset({3})}))  # one record twice: backwards
@example(History(((0, 3, 1), (0, 3, 2)), (), {}))  # ... and one the read-back lost
@example(History(((0, 3, 1), (0, 5, 2)), ((0, 2),), {0: frozenset({4})}))  # a change at the step
@example(History(((0, 3, 1), (0, 5, 1)), ((0, 1),), {0: frozenset({4})}))  # stamped alike
@example(History(((0, 3, 1), (0, 5, 2)), (), {0: frozenset({3, 4, 5})}, frozenset({0})))
def test_the_steps_are_the_oracles(history: History) -> None:
    steps, on_rewritten_log = oracle(history)
    assert found(history) == sorted(steps, key=_order)
    assert rewritten(history) == on_rewritten_log


@settings(max_examples=examples(1.0))
@given(clean_history())
def test_a_member_that_reads_as_documented_has_no_step(history: History) -> None:
    assert found(history) == []


@settings(max_examples=examples(1.0))
@given(clean_history(), st.data())
def test_a_planted_skip_is_found_with_its_witness(history: History, data: st.DataObject) -> None:
    inner = [
        i
        for i in range(1, len(history.rows) - 1)
        if history.rows[i - 1][0] == history.rows[i][0] == history.rows[i + 1][0]
        and history.rows[i - 1][1] < history.rows[i][1] < history.rows[i + 1][1]
        and not _changed(
            history, history.rows[i][0], history.rows[i - 1][2], history.rows[i + 1][2]
        )
    ]
    if not inner:
        return
    i = data.draw(st.sampled_from(inner))
    planted = History(history.rows[:i] + history.rows[i + 1 :], history.changes, history.records)
    (p, low, _), (_, high, ts) = history.rows[i - 1], history.rows[i + 1]
    assert found(planted) == [PollStep(p, 0, ts, low, high, 1)]


@settings(max_examples=examples(1.0))
@given(clean_history(), st.data())
def test_a_planted_step_backwards_is_found_with_its_witness(
    history: History, data: st.DataObject
) -> None:
    steady = [i for i, (p, _, ts) in enumerate(history.rows) if not _changed(history, p, ts, ts)]
    if not steady:
        return
    i = data.draw(st.sampled_from(steady))
    p, offset, ts = history.rows[i]
    again = (p, offset, ts)  # the same record given again at once, within the assignment
    planted = History(
        (*history.rows[: i + 1], again, *history.rows[i + 1 :]), history.changes, history.records
    )
    assert PollStep(p, 0, ts, offset, offset, 0) in found(planted)
    assert all(s.backwards for s in found(planted))


def _changed(history: History, partition: int, since: int, until: int) -> bool:
    """Whether the partition's assignment changed at a stamp within [since, until]."""
    return any(q == partition and since <= t <= until for q, t in history.changes)


def _stream(path: Path, schema: pa.Schema, rows: list[dict]) -> None:
    writer = StreamWriter(path, schema)
    writer.write(pa.RecordBatch.from_pylist(rows, schema=schema))
    writer.close()


def test_member_starts_read_the_journals_and_failed_commits_break_before_process(tmp_path) -> None:
    run = layout.consumer_journal(1, 0)
    processed = [
        {"msg_id": o, "partition": 0, "offset": o, "consumer": 1, "ts_us": t}
        for o, t in ((0, 10), (1, 11), (5, 30), (4, 40))
    ]
    _stream(tmp_path / run.processed, PROCESSED_SCHEMA, processed)
    assigned = [{"consumer": 1, "partition": 0, "kind": "assigned", "ts_us": 5}]
    _stream(tmp_path / run.assignments, ASSIGNMENT_SCHEMA, assigned)
    failed = [{"partition": 0, "offset": 5, "consumer": 1, "ts_us": 20, "outcome": "X"}]
    _stream(tmp_path / run.commits, COMMIT_SCHEMA, failed)
    old = layout.consumer_journal(2, 0)  # a start of a harness before the assignment journal
    _stream(tmp_path / old.processed, PROCESSED_SCHEMA, [{**processed[0], "consumer": 2}])
    offsets = np.arange(6, dtype=np.int64)
    held = FinalLog.of(np.zeros(6, dtype=np.int64), offsets, offsets)  # msg_id = offset
    after = poll_facts(member_starts(tmp_path, CommitMode.AFTER_PROCESS), held)
    assert after.skips == (PollStep(0, 1, 30, 1, 5, 3),)
    assert after.backwards == (PollStep(0, 1, 40, 5, 4, 0),)
    assert after.unjournalled_starts == 1
    before = poll_facts(member_starts(tmp_path, CommitMode.BEFORE_PROCESS), held)
    assert before.skips == () and before.backwards == after.backwards


def test_a_step_on_the_log_an_unclean_election_rewrote_is_counted_apart_and_not_judged() -> None:
    # A KAFKA-20716 run's numbers: the member read msg 10099 at 10300 and msg 10100 at 10302
    # (10301 a marker in the log it read); after the unclean election the read-back holds
    # msgs 10838 to 10840 at 10300 to 10302, so the step seems to pass over 10839.
    offsets = np.arange(10300, 10303, dtype=np.int64)
    final = FinalLog.of(np.zeros(3, dtype=np.int64), offsets, offsets + 538)
    member = MemberStart(
        0, np.zeros(2, dtype=np.int64), np.array([10300, 10302]), np.array([10, 20]), {},
        msg_id=np.array([10099, 10100]),
    )  # fmt: skip
    facts = poll_facts([member], final)
    assert facts.skips == () and facts.rewritten == 1
    config = CellConfig(kafka_version="4.3.1", consumers=1, unclean_leader_election=True)
    findings = judge_liveness(facts.counts, {}, config, None, RunEvidence(Path()), 0.0)
    (finding,) = [f for f in findings if f.anomaly == AnomalyName.POLL_SKIP]
    assert finding.verdict == Verdict.PASS and "1 poll steps not judged" in finding.detail
    # The same step read from the log the read-back holds is a skip.
    same = replace(member, msg_id=np.array([10838, 10840]))
    assert poll_facts([same], final).skips == (PollStep(0, 0, 20, 10300, 10302, 1),)
