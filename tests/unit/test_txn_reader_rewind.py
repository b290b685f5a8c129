"""The transactions' reader after an abort (workload.transactions.rewind_on_abort) and the poll
check of what committed transactions read (KAFKA-17582): the reader against a one-partition
log it reads in order, the check against an oracle that walks the committed reads by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.messages.columns import NO_ID
from analysis.checks.polls import FinalLog, poll_facts, reader_start
from analysis.checks.transactions import Transactions
from analysis.judge.liveness import judge_liveness
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from analysis.model.evidence import RunEvidence
from analysis.model.polls import READER, SKIPS_AFTER_ABORT
from analysis.model.results import Example
from harness.rundir import layout
from harness.rundir.config import CellConfig
from harness.rundir.streams import StreamWriter
from harness.rundir.transactions import (
    TRANSACTION_SCHEMA,
    TXN_READ_SCHEMA,
    TxnOutcome,
    read_txn_reads,
)
from harness.workload.transactions.reads import TransactionReader

COMMITTED, ABORTED, UNKNOWN = (o.value for o in TxnOutcome)


class Record:
    def __init__(self, offset: int):
        self._offset = offset

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return None

    def error(self) -> object:
        return None


class Log:
    """Partition 0 holding offsets 0.. without end; a consumer at `position` hands them over
    in order, and a rewinder moves it."""

    def __init__(self) -> None:
        self.position = 0

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        batch = [Record(o) for o in range(self.position, self.position + num_messages)]
        self.position += num_messages
        return batch

    def close(self) -> None:
        pass

    def rewind(self, positions: dict[int, int]) -> None:
        self.position = positions.get(0, 0)


transactions = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from([COMMITTED, ABORTED])), max_size=30
)


@given(transactions, st.booleans())
@settings(deadline=None)
def test_a_rewound_reader_commits_every_record_once_and_a_kept_one_skips_what_aborts_read(
    tmp_path_factory, txns: list[tuple[int, str]], rewind: bool
) -> None:
    log = Log()
    journal = StreamWriter(tmp_path_factory.mktemp("r") / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA)
    reader = TransactionReader(log, 3, journal, rewind=log.rewind if rewind else None)
    committed: list[int] = []
    aborted: set[int] = set()
    for txn, (reads, outcome) in enumerate(txns):
        reader.reads = reads
        got = [r.offset for r in reader.read(txn)] if reads else []
        (committed.extend if outcome == COMMITTED else aborted.update)(got)
        reader.ended(outcome == COMMITTED)
    journal.close()
    if rewind:  # exactly-once: the committed reads are the log's prefix, each record once
        assert committed == list(range(len(committed)))
        assert reader.committed_position == ({0: len(committed)} if committed else {})
    else:  # the position never goes back: what aborted transactions read is passed over
        assert committed == sorted(set(range(log.position)) - aborted)
        assert reader.rewinds == 0


def write_run(run_dir: Path, txns: list[tuple[str, list[int]]]) -> None:
    """transactions.parquet and txn-reads.parquet of one reader on partition 0: transaction i
    began at 10*i + 1 and read its offsets at 10*i + 2.."""
    pq.write_table(
        pa.table(
            {
                "txn": list(range(len(txns))),
                "first_msg_id": list(range(len(txns))),
                "messages": [1] * len(txns),
                "intent": ["commit"] * len(txns),
                "outcome": [outcome for outcome, _ in txns],
                "error": [None] * len(txns),
                "begin_ts_us": [10 * i + 1 for i in range(len(txns))],
                "end_ts_us": [10 * i + 9 for i in range(len(txns))],
            },
            schema=TRANSACTION_SCHEMA,
        ),
        run_dir / layout.TRANSACTIONS,
    )
    rows = [(i, o, 10 * i + 2 + k) for i, (_, offs) in enumerate(txns) for k, o in enumerate(offs)]
    pq.write_table(
        pa.table(
            {
                "txn": [t for t, _, _ in rows],
                "msg_id": [None] * len(rows),
                "partition": [0] * len(rows),
                "offset": [o for _, o, _ in rows],
                "ts_us": [ts for _, _, ts in rows],
            },
            schema=TXN_READ_SCHEMA,
        ),
        run_dir / layout.TXN_READS,
    )


def oracle(txns: list[tuple[str, list[int]]], log: list[int]) -> list[tuple[int, int, int, int]]:
    """(from, to, skipped, read by aborted) of every forward step between consecutive
    committed reads that passes over records of `log`, no unknown transaction between them."""
    steps, last, broken = [], None, False
    aborted = {o for outcome, offs in txns if outcome == ABORTED for o in offs}
    for outcome, offs in txns:
        if outcome == UNKNOWN:
            broken = True
            continue
        if outcome != COMMITTED:
            continue
        for offset in offs:
            if last is not None and not broken and offset > last:
                between = [o for o in log if last < o < offset]
                if between:
                    by_aborted = len({o for o in aborted if last < o < offset})
                    steps.append((last, offset, len(between), by_aborted))
            last, broken = offset, False
    return steps


@given(
    st.lists(
        st.tuples(
            st.sampled_from([COMMITTED, ABORTED, UNKNOWN]),
            st.lists(st.integers(0, 40), max_size=4).map(sorted),
        ),
        max_size=12,
    ),
    st.sets(st.integers(0, 40)),
)
@settings(deadline=None)
def test_the_readers_skips_are_the_oracles(tmp_path_factory, txns, log: set[int]) -> None:
    run_dir = tmp_path_factory.mktemp("run")
    write_run(run_dir, txns)
    start = reader_start(Transactions.read(run_dir), read_txn_reads(run_dir))
    assert start is not None and start.consumer == READER
    # The read-back holds every record a transaction read (its messages not ours: NO_ID).
    log |= {offset for _, offsets in txns for offset in offsets}
    offsets = np.asarray(sorted(log), dtype=np.int64)
    final = FinalLog.of(
        np.zeros(len(offsets), dtype=np.int64), offsets, np.full_like(offsets, NO_ID)
    )
    facts = poll_facts([start], final)
    got = [(s.from_offset, s.to_offset, s.skipped, s.read_by_aborted) for s in facts.skips]
    expected = oracle(txns, sorted(log))
    assert sorted(got) == sorted(expected)
    after_abort = sum(0 < skipped == by_aborted for _, _, skipped, by_aborted in expected)
    assert facts.counts[SKIPS_AFTER_ABORT] == after_abort


def test_no_reads_no_reader(tmp_path: Path) -> None:
    write_run(tmp_path, [("committed", [])])
    assert read_txn_reads(tmp_path) is not None  # an empty journal
    assert reader_start(Transactions.read(tmp_path), None) is None


def judged(example: Example, rewinds: bool, version: str = "4.3.1") -> Verdict:
    config = CellConfig(kafka_version=version, transactions=True, txn_reader_rewinds=rewinds)
    counts = {AnomalyName.POLL_SKIP: 1}
    findings = judge_liveness(
        counts, {AnomalyName.POLL_SKIP: [example]}, config, None, RunEvidence(Path()), 0.0
    )
    (finding,) = [f for f in findings if f.anomaly == AnomalyName.POLL_SKIP]
    return finding


def test_a_reader_left_past_its_aborted_reads_is_kafka_17582_and_a_rewound_one_a_violation():
    step = Example(
        partition=0, consumer=READER, at_us=5, from_offset=3, to_offset=7, skipped=3,
        read_by_aborted=3,
    )  # fmt: skip
    kept = judged(step, rewinds=False)
    assert kept.verdict == Verdict.KNOWN_BUG and kept.detail.startswith("known bug KAFKA-17582")
    assert "the reader on p0" in kept.detail and "3 of them read by aborted" in kept.detail
    # The same step where the reader is rewound: the rewind did not happen as it should.
    assert judged(step, rewinds=True).verdict != Verdict.KNOWN_BUG
    # Records no aborted transaction read: not the bug's pattern.
    other = Example(**{**step.__dict__, "read_by_aborted": 1})
    assert judged(other, rewinds=False).verdict != Verdict.KNOWN_BUG


def findings_of(counts: dict, shown: list[Example], rewinds: bool):
    config = CellConfig(kafka_version="4.3.1", transactions=True, txn_reader_rewinds=rewinds)
    found = judge_liveness(
        counts, {AnomalyName.POLL_SKIP: shown}, config, None, RunEvidence(Path()), 0.0
    )
    return [(f.verdict, f.detail) for f in found if f.anomaly == AnomalyName.POLL_SKIP]


STEP = Example(
    partition=0, consumer=READER, at_us=5, from_offset=3, to_offset=7, skipped=3,
    read_by_aborted=3,
)  # fmt: skip


def test_skips_of_the_pattern_beyond_the_examples_are_judged_with_them():
    counts = {AnomalyName.POLL_SKIP: 50, SKIPS_AFTER_ABORT: 50}
    ((verdict, detail),) = findings_of(counts, [STEP], rewinds=False)
    assert verdict == Verdict.KNOWN_BUG and "50 poll skip" in detail
    # Skips beyond the examples that are not all of the pattern stay unjudged.
    mixed = findings_of({AnomalyName.POLL_SKIP: 50, SKIPS_AFTER_ABORT: 30}, [STEP], rewinds=False)
    assert [v for v, _ in mixed] == [Verdict.KNOWN_BUG, Verdict.UNKNOWN]
    assert "30 poll skip" in mixed[0][1] and "20 more" in mixed[1][1]
    # A rewound reader: the count says nothing about KAFKA-17582, every one beyond is unjudged.
    rewound = findings_of(counts, [STEP], rewinds=True)
    assert Verdict.KNOWN_BUG not in [v for v, _ in rewound] and "49 more" in rewound[-1][1]
