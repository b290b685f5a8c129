"""Inconsistent offsets between reads (analysis/checks/offset_reads.py): two reads of one
partition offset that returned different messages, one of them not the read_committed
read-back's.

Against an oracle written here: per offset, the messages every reader returned there, counted
when there are two and some read is not the read-back's. Generated histories read one log with
every reader (the read-back and the transactions and consumers read_committed, the
read_uncommitted read-back everything, aborted records too): nothing is found. Then offsets are
rewritten between the reads, each read by some reader before and by another after: exactly
those are found; a read-back contradicting itself where no other reader read is left to
`inconsistent_offsets`. Rows come in any order, readers in any order. The oracle is shown
telling two planted wrong answers from the right one."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks.arrays import slot_of
from analysis.checks.messages import RunInput, check_run
from analysis.checks.messages.columns import NO_ID
from analysis.checks.offset_reads import (
    CONSUMER,
    TRANSACTION,
    UNCOMMITTED,
    Reads,
    disagreements,
    reader_code,
    reader_name,
)
from analysis.judge.outcomes import Verdict
from analysis.model.anomalies import AnomalyName
from harness.rundir import layout
from harness.rundir.records import PROCESSED_SCHEMA, READBACK_SCHEMA
from harness.rundir.streams import StreamWriter
from harness.rundir.transactions import TXN_READ_SCHEMA
from tests.examples import examples
from tests.unit.reconcile_runs import in_order, write_run
from tests.unit.test_transaction_check import (
    COMMITTED,
    SENT,
    T0_US,
    location,
    write_processed,
    write_txn_run,
)
from tests.unit.verdict_runs import AP, CP, judge_repetition, result, with_fault

NAME = AnomalyName.INCONSISTENT_READS
READBACK_CODE = 0
# One read: partition, offset, the msg_id returned (None: not the producer's), the reader's code.
Read = tuple[int, int, int | None, int]


@dataclass
class History:
    """Every read of a run, and the offsets rewritten between reads (the planted answer)."""

    reads: list[Read]
    planted: set[tuple[int, int]]


def _others() -> st.SearchStrategy[list[int]]:
    """The codes of up to two transactions and two consumers."""
    txns = st.lists(st.integers(0, 9), max_size=2, unique=True)
    members = st.lists(st.integers(0, 3), max_size=2, unique=True)

    def codes(t: list[int], c: list[int]) -> list[int]:
        return [reader_code(TRANSACTION, n) for n in t] + [reader_code(CONSUMER, n) for n in c]

    return st.builds(codes, txns, members)


@st.composite
def clean_history(draw: st.DrawFn) -> History:
    """Up to three partitions' logs (some records not the producer's, some aborted), read by
    the read-back (retried fetches repeating rows), maybe the read_uncommitted read-back, and
    transactions and consumers reading some committed offsets, some more than once."""
    ids = iter(range(1000))
    log: dict[tuple[int, int], tuple[int | None, bool]] = {}
    for partition in range(draw(st.integers(1, 3))):
        for offset in range(draw(st.integers(0, 8))):
            ours = draw(st.integers(0, 9)) > 0
            log[partition, offset] = (next(ids) if ours else None, draw(st.integers(0, 4)) == 0)
    committed = [at for at, (_, aborted) in log.items() if not aborted]
    reads: list[Read] = [(p, o, log[p, o][0], READBACK_CODE) for p, o in committed]
    reads += [(p, o, log[p, o][0], READBACK_CODE) for p, o in draw(_subset(committed))]
    if draw(st.booleans()):
        reads += [(p, o, m, reader_code(UNCOMMITTED)) for (p, o), (m, _) in log.items()]
    for code in draw(_others()):
        reads += [(p, o, log[p, o][0], code) for p, o in draw(_subset(committed, repeats=True))]
    return History(reads, set())


def _subset(offsets: list[tuple[int, int]], repeats: bool = False) -> st.SearchStrategy:
    if not offsets:
        return st.just([])
    return st.lists(st.sampled_from(offsets), max_size=12, unique=not repeats)


@st.composite
def planted_history(draw: st.DrawFn) -> History:
    """A clean history with some offsets rewritten between reads: each read of one by a reader
    other than the read-back returns the old or the new record (one at least the old), the
    read-back the new one (or both); and maybe an offset only the read-back read, with two
    records there (its own contradiction: not this class)."""
    history = draw(clean_history())
    offsets = sorted({(p, o) for p, o, _, _ in history.reads})
    rewritten = set(draw(st.lists(st.sampled_from(offsets), max_size=4))) if offsets else set()
    fresh = iter(range(5000, 6000))
    new = {at: next(fresh) for at in rewritten}
    reads: list[Read] = []
    for p, o, m, code in history.reads:
        if (p, o) in rewritten and (code == READBACK_CODE or draw(st.booleans())):
            m = new[p, o]
        reads.append((p, o, m, code))
    for p, o in rewritten:  # someone read the old record, someone else the new one
        old = next(m for q, f, m, _ in history.reads if (q, f) == (p, o))
        reads.append((p, o, old, reader_code(CONSUMER, 7)))
        if draw(st.booleans()):  # the read-back read both: the member agrees with one of them
            reads += [(p, o, old, READBACK_CODE), (p, o, new[p, o], READBACK_CODE)]
        else:
            reads.append((p, o, new[p, o], reader_code(TRANSACTION, 8)))
    if draw(st.booleans()):  # the read-back alone contradicts itself past every other read
        reads.append((9, 0, 4000, READBACK_CODE))
        reads.append((9, 0, 4001, READBACK_CODE))
    return History(reads, rewritten)


def oracle(reads: Sequence[Read]) -> list[tuple[int, int]]:
    """The offsets read with two messages where some read is not the read-back's."""
    at: dict[tuple[int, int], list[tuple[int | None, int]]] = {}
    for p, o, m, code in reads:
        at.setdefault((p, o), []).append((m, code))
    return sorted(
        where
        for where, got in at.items()
        if len({m for m, _ in got}) >= 2 and any(code != READBACK_CODE for _, code in got)
    )


def _reads(rows: list[Read]) -> Reads:
    columns = np.array(
        [(p, o, NO_ID if m is None else m, c) for p, o, m, c in rows], dtype=np.int64
    ).reshape(-1, 4)
    return Reads(slot_of(columns[:, 0], columns[:, 1]), columns[:, 2], columns[:, 3])


def checked(reads: Sequence[Read], rng: random.Random) -> tuple[list[tuple[int, int]], list[dict]]:
    """The check's offsets and examples, the rows shuffled and each reader handed alone, the
    readers in a shuffled order."""
    rows = list(reads)
    rng.shuffle(rows)
    readback = _reads([r for r in rows if r[3] == READBACK_CODE])
    codes = sorted({r[3] for r in rows if r[3] != READBACK_CODE})
    rng.shuffle(codes)
    found = disagreements(readback, (_reads([r for r in rows if r[3] == c]) for c in codes))
    slots = [(int(s) >> 40, int(s) & ((1 << 40) - 1)) for s in found.slots]
    return slots, found.rows(100)


def assert_pairs_were_read(reads: Sequence[Read], rows: list[dict]) -> None:
    """Each example is two reads of its offset that happened and differ, one not the
    read-back's."""
    happened = {(p, o, m, reader_name(c)) for p, o, m, c in reads}
    for row in rows:
        where = (row["partition"], row["offset"])
        assert (*where, row["msg_id"], row["read_by"]) in happened
        assert (*where, row["other_msg_id"], row["other_read_by"]) in happened
        assert row["msg_id"] != row["other_msg_id"]
        assert row["read_by"] != "read-back"


@settings(max_examples=examples(1.0))
@given(clean_history(), st.randoms())
def test_one_log_read_by_every_reader_has_no_disagreement(history: History, rng) -> None:
    found, rows = checked(history.reads, rng)
    assert found == oracle(history.reads) == []
    assert rows == []


@settings(max_examples=examples(1.0))
@given(planted_history(), st.randoms(), st.randoms())
def test_every_offset_rewritten_between_reads_is_found_whatever_the_order(
    history: History, rng, other_rng
) -> None:
    found, rows = checked(history.reads, rng)
    assert found == oracle(history.reads) == sorted(history.planted)
    assert [(r["partition"], r["offset"]) for r in rows] == found
    assert_pairs_were_read(history.reads, rows)
    assert checked(history.reads, other_rng) == (found, rows)


def visibility_as_disagreement(reads: Sequence[Read]) -> list[tuple[int, int]]:
    """A planted wrong answer: an offset one reader returned a record at and another did not
    (the read_uncommitted read-back's aborted records) counted as a disagreement."""
    readers = {code for *_, code in reads}
    at: dict[tuple[int, int], set[int]] = {}
    for p, o, _, code in reads:
        at.setdefault((p, o), set()).add(code)
    return sorted(where for where, codes in at.items() if codes != readers)


def first_row_wins(reads: Sequence[Read]) -> list[tuple[int, int]]:
    """A planted wrong answer: the read-back's first row at an offset is its record (the old
    row-order bug), and the other reads are compared with it alone."""
    first: dict[tuple[int, int], int | None] = {}
    for p, o, m, code in reads:
        if code == READBACK_CODE:
            first.setdefault((p, o), m)
    return sorted(
        {(p, o) for p, o, m, code in reads if code and (p, o) in first and first[p, o] != m}
    )


def test_the_oracle_tells_wrong_answers_from_the_right_one() -> None:
    uncommitted, member = reader_code(UNCOMMITTED), reader_code(CONSUMER, 1)
    # p0@1 is an aborted record: only the read_uncommitted read-back returns it. Legal.
    legal = [(0, 0, 10, 0), (0, 0, 10, uncommitted), (0, 1, 11, uncommitted), (0, 2, 12, 0)]
    legal += [(0, 2, 12, uncommitted), (0, 2, 12, member)]
    assert oracle(legal) == checked(legal, random.Random(1))[0] == []
    assert visibility_as_disagreement(legal) != oracle(legal)
    # The read-back read two records at p0@3; the member read the first of them.
    rewritten = [(0, 3, 13, 0), (0, 3, 14, 0), (0, 3, 13, member)]
    assert oracle(rewritten) == checked(rewritten, random.Random(2))[0] == [(0, 3)]
    assert first_row_wins(rewritten) != oracle(rewritten)


def test_a_run_counts_each_reader_s_disagreement_with_the_read_back(tmp_path: Path) -> None:
    """Transactions 0 and 2 committed, 1 aborted (its records read only read_uncommitted): the
    read_uncommitted read-back, a transaction's reads and a member's journal each disagree with
    the read-back at one offset of their own."""
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    clean = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert clean.counts[NAME] == 0 and clean.examples[NAME] == []
    # The read_uncommitted read-back holds msg 8's offset with msg 99; aborted 3-5 stay legal.
    rows = [
        {"msg_id": 99 if m == 8 else m, "key": f"k{m}", "key_seq": 0,
         "partition": location(m)[0], "offset": location(m)[1], "ts_us": T0_US}
        for m in range(SENT)
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=READBACK_SCHEMA)
    pq.write_table(table, run_dir / layout.READBACK_UNCOMMITTED)
    # Transaction 2 read msg 1's offset and got msg 0; the member read msg 6's and got msg 7.
    reads = [{"txn": 2, "msg_id": 0, "partition": 1, "offset": 0, "ts_us": T0_US}]
    pq.write_table(pa.Table.from_pylist(reads, schema=TXN_READ_SCHEMA), run_dir / layout.TXN_READS)
    write_processed(run_dir, [0, 2])
    _member_reads(run_dir, (7, *location(6)))
    facts = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert facts.counts[NAME] == 3
    assert facts.counts[AnomalyName.INCONSISTENT_OFFSETS] == 0
    assert facts.examples[NAME] == [
        {"partition": 0, "offset": 2, "msg_id": 7, "read_by": "consumer 0",
         "other_msg_id": 6, "other_read_by": "read-back"},
        {"partition": 1, "offset": 0, "msg_id": 0, "read_by": "transaction 2",
         "other_msg_id": 1, "other_read_by": "read-back"},
        {"partition": 2, "offset": 2, "msg_id": 99, "read_by": "read_uncommitted read-back",
         "other_msg_id": 8, "other_read_by": "read-back"},
    ]  # fmt: skip


def _member_reads(run_dir: Path, *rows: tuple[int, int, int]) -> None:
    """A second start of member 0 that processed (msg_id, partition, offset) rows."""
    processed = [
        {"msg_id": m, "partition": p, "offset": o, "consumer": 0, "ts_us": T0_US}
        for m, p, o in rows
    ]
    writer = StreamWriter(run_dir / layout.consumer_journal(0, 1).processed, PROCESSED_SCHEMA)
    writer.write(pa.RecordBatch.from_pylist(processed, schema=PROCESSED_SCHEMA))
    writer.close()


def test_a_run_with_no_other_reader_is_not_checked(tmp_path: Path) -> None:
    acked, readback = in_order(3)
    facts = check_run(RunInput(write_run(tmp_path, "c", acked, readback), True, False))
    assert NAME not in facts.counts


def test_reads_that_disagree_are_judged_by_the_loss_rule_never_as_loss() -> None:
    row = {"partition": 1, "offset": 6, "msg_id": 4, "read_by": "consumer 0",
           "other_msg_id": 5, "other_read_by": "read-back"}  # fmt: skip
    v = judge_repetition(result(CP, inconsistent_reads=1, examples={NAME: [row]}), [])
    assert v.verdict == Verdict.VIOLATION and v.loss == 0
    assert any(
        r.startswith("forbidden reads disagree: 1 reads disagree") and "msg_id 4 at p1@6" in r
        for r in v.reasons
    )
    allowed = result(with_fault(AP, "leader-partition"), inconsistent_reads=1)
    assert judge_repetition(allowed, []).verdict == Verdict.PASS
