"""The transactions' reads (txn-reads.parquet) fed to the cycle check on hand-made run
directories: a read of a later committed transaction's write closes a G1c cycle with the write
order; reads of earlier transactions, and reads by transactions that did not commit, do not.

The run is test_transaction_check's: transactions 0 and 2 committed (msg_ids 0-2 and 6-8, one
on each partition, so the write order is T0 -ww-> T2 in every partition), 1 aborted, 3 unknown,
and msg 12 sent in a transaction that never ended."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.checks import messages as checker
from analysis.checks.cycles import reads_of
from analysis.checks.messages import RunInput
from harness.rundir import layout
from harness.rundir.transactions import TXN_READ_SCHEMA, read_txn_reads
from tests.examples import examples
from tests.unit.test_transaction_check import COMMITTED, SENT, location, write_txn_run

# Transactions that committed, by number, and the messages each wrote.
WROTE = {0: range(0, 3), 2: range(6, 9)}


def run_with_reads(root: Path, reads: list[tuple[int, int | None]]) -> Path:
    """The run, every committed message read back, with `reads` as (txn, msg_id) pairs."""
    run_dir = write_txn_run(root, COMMITTED, list(range(SENT)))
    rows = [
        {"txn": t, "msg_id": m, "partition": location(m or 0)[0],
         "offset": location(m or 0)[1], "ts_us": i}
        for i, (t, m) in enumerate(reads)
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema=TXN_READ_SCHEMA), run_dir / layout.TXN_READS)
    return run_dir


def counts_of(run_dir: Path) -> tuple[dict, dict]:
    facts = checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    return facts.counts, facts.examples


def test_a_read_of_a_later_transaction_is_a_g1c_cycle(tmp_path: Path) -> None:
    counts, found = counts_of(run_with_reads(tmp_path, [(2, 1), (0, 7)]))
    assert counts["g1c"] == 2 and counts["g0"] == 0
    [witness] = found["g1c"]
    assert witness["txn"] == 0 and witness["transactions"] == 2
    # T2's read of m1 rides on the write edge T0 -> T2: the pair carries both kinds, and the
    # witness starts at the lowest wr edge.
    assert witness["cycle"] == "T0 -wr m1-> T2 -wr m7-> T0"


def test_reads_of_earlier_transactions_are_clean(tmp_path: Path) -> None:
    counts, _ = counts_of(run_with_reads(tmp_path, [(2, 0), (2, 1), (2, 2), (0, None)]))
    assert counts["g1c"] == 0 and counts["g0"] == 0


def test_only_reads_by_and_of_committed_transactions_count(tmp_path: Path) -> None:
    """T1 aborted and T3's outcome is unknown: what they read, or what was read of them, adds
    no edge; nor does a read by a transaction without a row (4) or of no message (None)."""
    reads = [(1, 7), (3, 7), (4, 0), (0, 4), (0, 10), (0, 12), (0, None), (0, 99)]
    counts, _ = counts_of(run_with_reads(tmp_path, reads))
    assert counts["g1c"] == 0


def test_a_run_without_reads_gives_none(tmp_path: Path) -> None:
    run_dir = write_txn_run(tmp_path, COMMITTED, list(range(SENT)))
    assert reads_of(read_txn_reads(run_dir)) is None
    assert counts_of(run_dir)[0]["g1c"] == 0


def test_reads_of_leaves_out_records_that_name_no_message(tmp_path: Path) -> None:
    reads = reads_of(read_txn_reads(run_with_reads(tmp_path, [(2, 1), (0, None), (5, 7)])))
    assert reads is not None
    assert reads.txn.tolist() == [2, 5] and reads.msg_id.tolist() == [1, 7]


@pytest.mark.property
@settings(max_examples=examples(0.2, at_least=10), deadline=None)
@given(
    reads=st.lists(
        st.tuples(st.integers(0, 4), st.one_of(st.none(), st.integers(0, SENT + 2))), max_size=12
    )
)
def test_g1c_is_found_exactly_when_t0_read_what_t2_wrote(reads) -> None:
    """With the write order T0 -> T2, the only cycle reads can close is T2 -wr-> T0: some read
    by T0 of T2's messages. Every other read, of anything by anyone, leaves no G1c."""
    with tempfile.TemporaryDirectory() as root:
        counts, _ = counts_of(run_with_reads(Path(root), reads))
    cyclic = any(t == 0 and m in WROTE[2] for t, m in reads)
    assert counts["g1c"] == (2 if cyclic else 0)
    assert counts["g0"] == 0
