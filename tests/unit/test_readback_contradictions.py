"""A read-back that repeats an offset (analysis/checks/messages/columns.py, Reads.of): rows of one
message at one offset are a retried fetch (one record), two messages at one offset are the
read-back contradicting itself (inconsistent_offsets), and neither is resolved by row order.

Against an oracle written here: the distinct (partition, offset, msg_id) of the rows, and the
offsets holding more than one of them. Generated read-backs in two row orders give the same
records and the same run facts."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.checks import messages as checker
from analysis.checks.messages import RunInput
from analysis.checks.messages.columns import Reads
from analysis.model.anomalies import AnomalyName
from harness.rundir.records import READBACK_SCHEMA
from tests.examples import examples
from tests.unit.reconcile_runs import read, sent, write_run

Row = tuple[int, int, int | None]  # partition, offset, msg_id (None: not the producer's)


@st.composite
def readback_rows(draw: st.DrawFn) -> tuple[list[Row], list[Row]]:
    """Rows of up to 3 partitions' offsets, each offset read with one to three messages, each
    (offset, message) read once or twice; the same rows in two orders."""
    slots = draw(st.sets(st.tuples(st.integers(0, 2), st.integers(0, 5)), max_size=8))
    rows: list[Row] = []
    for p, o in sorted(slots):
        ids = draw(st.sets(st.one_of(st.none(), st.integers(0, 9)), min_size=1, max_size=3))
        for m in ids:
            rows += [(p, o, m)] * draw(st.integers(1, 2))
    return draw(st.permutations(rows)), draw(st.permutations(rows))


def table_of(rows: list[Row]) -> pa.Table:
    # key and key_seq follow from the message, as the producer's values make them.
    dicts = [read(m, o, partition=p, key_seq=m) for p, o, m in rows]
    return pa.Table.from_pylist(dicts, schema=READBACK_SCHEMA)


def oracle_records(rows: list[Row]) -> list[Row]:
    return sorted(set(rows), key=lambda r: (r[0], r[1], 1 << 62 if r[2] is None else r[2]))


def oracle_contradicted(rows: list[Row]) -> dict[tuple[int, int], int]:
    held: dict[tuple[int, int], set[int | None]] = {}
    for p, o, m in rows:
        held.setdefault((p, o), set()).add(m)
    return {slot: len(ids) for slot, ids in held.items() if len(ids) > 1}


def records_of(reads: Reads) -> list[Row]:
    return [
        (p, o, m if known else None)
        for p, o, m, known in zip(
            reads.partition.tolist(),
            reads.offset.tolist(),
            reads.msg_id.tolist(),
            reads.identified.tolist(),
            strict=True,
        )
    ]


@settings(max_examples=examples(1.0))
@given(readback_rows())
def test_the_records_are_the_oracles_in_any_row_order(orders: tuple[list[Row], list[Row]]) -> None:
    one, other = (Reads.of(table_of(rows)) for rows in orders)
    assert records_of(one) == records_of(other) == oracle_records(orders[0])
    assert one.key.to_pylist() == other.key.to_pylist()
    contradicted = oracle_contradicted(orders[0])
    rows = one.contradiction_rows(100)
    assert {(r["partition"], r["offset"]): r["reads"] for r in rows} == contradicted
    assert len(one.contradicted()) == len(contradicted)
    for r in rows:  # the lowest two messages read there, the producer's first
        ids = sorted(
            {m for p, o, m in orders[0] if (p, o) == (r["partition"], r["offset"])},
            key=lambda m: 1 << 62 if m is None else m,
        )
        assert [r["msg_id"], r["readback_msg_id_at_offset"]] == ids[:2]


def run_facts(root: Path, cell: str, rows: list[Row]) -> checker.RunFacts:
    # Every message the read-back names was acknowledged at the first offset it was read at.
    first: dict[int, tuple[int, int]] = {}
    for p, o, m in sorted(rows, key=lambda r: (r[0], r[1])):
        if m is not None:
            first.setdefault(m, (p, o))
    acked = [sent(m, o, partition=p, key_seq=m) for m, (p, o) in sorted(first.items())]
    readback = [read(m, o, partition=p, key_seq=m) for p, o, m in rows]
    run_dir = write_run(root, cell, acked, readback)
    return checker.check_run(RunInput(run_dir, complete=True, unlocated_acks=False))


@settings(max_examples=examples(0.5), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(readback_rows())
def test_a_runs_facts_do_not_depend_on_the_readbacks_row_order(
    tmp_path_factory, orders: tuple[list[Row], list[Row]]
) -> None:
    root = tmp_path_factory.mktemp("orders")
    one, other = (run_facts(root, cell, rows) for cell, rows in zip("ab", orders, strict=True))
    assert one.counts == other.counts
    assert one.examples == other.examples
    assert one.counts[AnomalyName.INCONSISTENT_OFFSETS] == len(oracle_contradicted(orders[0]))


def test_two_messages_at_one_offset_are_read_both_in_either_order(tmp_path: Path) -> None:
    # Message 1 acked at p0@0 and message 2 at p0@1; the read-back read 1 and 2 at offset 0.
    # Keeping whichever row came first called message 1 lost in one order and not the other.
    rows: list[Row] = [(0, 0, 1), (0, 0, 2), (0, 1, 2)]
    one = run_facts(tmp_path, "a", rows)
    other = run_facts(tmp_path, "b", [rows[1], rows[0], rows[2]])
    assert one.counts == other.counts
    assert one.counts[AnomalyName.LOST] == one.counts[AnomalyName.UNSEEN] == 0
    assert one.counts[AnomalyName.INCONSISTENT_OFFSETS] == 1
    [example] = one.examples[AnomalyName.INCONSISTENT_OFFSETS]
    assert example == {
        "partition": 0, "offset": 0, "msg_id": 1, "readback_msg_id_at_offset": 2, "reads": 2,
    }  # fmt: skip


def test_a_retried_fetch_is_one_record(tmp_path: Path) -> None:
    one = run_facts(tmp_path, "a", [(0, 0, 1), (0, 0, 1), (0, 1, 2)])
    assert one.counts[AnomalyName.INCONSISTENT_OFFSETS] == 0
    assert one.counts[AnomalyName.DUPLICATED] == 0 and one.counts["read"] == 2


def test_the_dataframe_check_reads_a_contradicting_readback_as_the_one_process_check(
    spark, tmp_path: Path
) -> None:
    from analysis.spark.reconcile import reconcile, reconcile_in_process

    rows: list[Row] = [(0, 0, 1), (0, 0, 2), (0, 1, 2), (0, 1, 2), (1, 0, None), (1, 0, 3)]
    dirs = []
    for cell, order in zip("ab", (rows, rows[::-1]), strict=True):
        run_facts(tmp_path, cell, order)  # writes the run directory
        dirs.append(next((tmp_path / "runs").rglob(f"{cell}/0")))
    in_spark, whole = reconcile(spark, dirs, chunk_rows=1), reconcile_in_process(dirs)
    for frames_result, local in zip(in_spark, whole, strict=True):
        assert frames_result.counts == local.counts == whole[0].counts
        assert frames_result.examples == local.examples == whole[0].examples
    assert whole[0].counts[AnomalyName.INCONSISTENT_OFFSETS] == 2
