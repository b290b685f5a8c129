"""The journals' Arrow streams (harness/rundir/streams.py): one writer of batches or rows that
keeps its first error, one reader that leaves a torn tail out; and the journals that use them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.records import (
    ASSIGNMENT_SCHEMA,
    CHECKPOINT_SCHEMA,
    COMMIT_SCHEMA,
    PROCESSED_SCHEMA,
)
from harness.rundir.streams import StreamWriter, iter_stream, read_stream, stream_to_parquet
from harness.rundir.transactions import TRANSACTION_SCHEMA, Intent, TxnOutcome
from harness.workload.consumer_group.librdkafka import ASSIGNED, _Journal, _rebalance_callbacks
from harness.workload.transactions.librdkafka import TransactionJournal


def batch(*sent: int) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array(sent, pa.int64()), pa.array([7] * len(sent), pa.int64())],
        schema=CHECKPOINT_SCHEMA,
    )


class FailingWriter:
    """An Arrow stream writer on a full disk."""

    def __init__(self) -> None:
        self.writes = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self.writes += 1
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        raise OSError(5, "Input/output error")


def test_what_is_written_is_read_back(tmp_path: Path) -> None:
    writer = StreamWriter(tmp_path / "s.arrow", CHECKPOINT_SCHEMA)
    assert writer.write(batch(1, 2)) and writer.write(batch(3))
    # Each batch is in the OS's hands when write returns: readable before the close.
    assert read_stream(tmp_path / "s.arrow", CHECKPOINT_SCHEMA)["sent_upto"].to_pylist() == [
        1,
        2,
        3,
    ]
    writer.close()
    assert writer.error is None
    assert read_stream(tmp_path / "s.arrow", CHECKPOINT_SCHEMA).num_rows == 3


def test_a_missing_or_empty_stream_reads_as_no_rows(tmp_path: Path) -> None:
    assert read_stream(tmp_path / "none.arrow", CHECKPOINT_SCHEMA).num_rows == 0
    (tmp_path / "empty.arrow").write_bytes(b"")
    table = read_stream(tmp_path / "empty.arrow", CHECKPOINT_SCHEMA)
    assert table.num_rows == 0 and table.schema == CHECKPOINT_SCHEMA


@pytest.mark.property
@given(cut=st.integers(min_value=1, max_value=200))
def test_a_torn_tail_is_left_out_and_every_whole_batch_read(tmp_path_factory, cut: int) -> None:
    """A writer killed mid-batch: whatever number of bytes of the file survive, the reader
    returns exactly the batches that are whole in them, never an error."""
    folder = tmp_path_factory.mktemp("torn")
    path = folder / "s.arrow"
    writer = StreamWriter(path, CHECKPOINT_SCHEMA)
    sizes = []
    for n in range(5):
        writer.write(batch(n))
        sizes.append(path.stat().st_size)
    data = path.read_bytes()
    kept = max(0, len(data) - cut)
    path.write_bytes(data[:kept])
    whole = sum(1 for size in sizes if size <= kept)
    assert read_stream(path, CHECKPOINT_SCHEMA)["sent_upto"].to_pylist() == list(range(whole))


@pytest.mark.property
@given(cut=st.integers(min_value=0, max_value=2000))
def test_batch_by_batch_reads_what_the_whole_reader_reads(tmp_path_factory, cut: int) -> None:
    """iter_stream (finalize's reader) and read_stream agree on a stream cut anywhere: the
    same batches, the torn one left out, never an error."""
    path = tmp_path_factory.mktemp("cut") / "s.arrow"
    writer = StreamWriter(path, CHECKPOINT_SCHEMA)
    for n in range(6):
        writer.write(batch(*range(n * 10, n * 10 + n)))
    writer.close()
    path.write_bytes(path.read_bytes()[:cut])
    batches = list(iter_stream(path, CHECKPOINT_SCHEMA))
    whole = read_stream(path, CHECKPOINT_SCHEMA)
    assert pa.Table.from_batches(batches, schema=CHECKPOINT_SCHEMA).equals(whole)
    assert [b.num_rows for b in batches] == list(range(len(batches)))  # as written


def test_batch_by_batch_reading_of_another_schema_raises_as_the_whole_reader(tmp_path) -> None:
    writer = StreamWriter(tmp_path / "s.arrow", COMMIT_SCHEMA)
    writer.write(pa.RecordBatch.from_pylist([{"partition": 0}], schema=COMMIT_SCHEMA))
    writer.close()
    assert list(iter_stream(tmp_path / "none.arrow", CHECKPOINT_SCHEMA)) == []
    with pytest.raises(pa.ArrowInvalid):
        read_stream(tmp_path / "s.arrow", CHECKPOINT_SCHEMA)
    with pytest.raises(pa.ArrowInvalid):
        list(iter_stream(tmp_path / "s.arrow", CHECKPOINT_SCHEMA))


def test_the_first_write_error_is_kept_and_later_writes_are_no_ops(tmp_path: Path) -> None:
    writer = StreamWriter(tmp_path / "s.arrow", CHECKPOINT_SCHEMA)
    assert writer.write(batch(1))
    failing = FailingWriter()
    writer._writer = failing
    assert not writer.write(batch(2)) and not writer.write(batch(3))
    assert failing.writes == 1
    assert writer.error == "writing s.arrow failed: OSError: [Errno 28] No space left on device"
    writer.close()  # the close fails too: the first error stays
    assert writer.error.startswith("writing s.arrow failed")


def test_a_close_failure_is_kept_and_the_file_closed_once(tmp_path: Path) -> None:
    writer = StreamWriter(tmp_path / "s.arrow", CHECKPOINT_SCHEMA)
    writer._writer = FailingWriter()
    writer.close()
    assert writer.error == "closing s.arrow failed: [Errno 5] Input/output error"
    writer.close()
    assert not writer.write(batch(1))


def test_a_closed_writer_writes_nothing(tmp_path: Path) -> None:
    writer = StreamWriter(tmp_path / "s.arrow", CHECKPOINT_SCHEMA)
    writer.close()
    assert not writer.write(batch(1)) and writer.error is None


ROW = st.tuples(st.none() | st.integers(0, 2**62), st.integers(0, 2**31 - 1), st.integers(0, 2**62))
NAMES = ("msg_id", "partition", "offset")


@pytest.mark.property
@given(st.lists(st.lists(ROW, max_size=4) | ROW, max_size=8), st.integers(0, 8), st.booleans())
def test_append_writes_exactly_the_rows_appended_until_it_is_refused(
    tmp_path_factory, appends, stop_at, fail
) -> None:
    """`append` against an oracle: an append of rows (a list) is one batch of them, the
    scalars the same on every row; a tuple of scalars is one row; no rows write nothing. From
    append `stop_at` on, the writer has failed (`fail`) or is closed: an append with rows is
    refused (False) and adds nothing, and close() returns the first failure."""
    path = tmp_path_factory.mktemp("append") / "s.arrows"
    writer = StreamWriter(path, PROCESSED_SCHEMA)
    written: list[list[dict]] = []  # the oracle: the batches that must be read back
    for i, appended in enumerate(appends):
        if i == stop_at and fail:
            writer._writer = FailingWriter()
        elif i == stop_at:
            writer.close()
        if isinstance(appended, list):
            rows, columns = appended, {n: [r[k] for r in appended] for k, n in enumerate(NAMES)}
        else:
            rows, columns = [appended], dict(zip(NAMES, appended, strict=True))
        assert writer.append(**columns, consumer=i, ts_us=7) == (not rows or i < stop_at)
        if rows and i < stop_at:
            written.append(
                [{**dict(zip(NAMES, r, strict=True)), "consumer": i, "ts_us": 7} for r in rows]
            )
    assert (writer.close() is None) == (not fail or stop_at >= len(appends))
    assert [b.num_rows for b in iter_stream(path, PROCESSED_SCHEMA)] == [len(b) for b in written]
    assert read_stream(path, PROCESSED_SCHEMA).to_pylist() == [r for b in written for r in b]


# --- the journals on it ----------------------------------------------------------------------


def test_the_transaction_journal_reports_its_first_error_on_close(tmp_path: Path) -> None:
    journal = TransactionJournal(tmp_path / layout.TRANSACTIONS_JOURNAL)
    journal.write(0, 0, 2, Intent.COMMIT, TxnOutcome.COMMITTED, None, 1)
    journal.stream._writer = FailingWriter()
    journal.write(1, 2, 2, Intent.ABORT, TxnOutcome.ABORTED, None, 2)
    journal.write(2, 4, 2, Intent.COMMIT, TxnOutcome.UNKNOWN, "fatal", 3)
    assert journal.outcomes == {"committed": 1, "aborted": 1, "unknown": 1}
    assert journal.close() == (
        f"writing {layout.TRANSACTIONS_JOURNAL} failed: OSError: [Errno 28] No space left on device"
    )
    rows = read_stream(tmp_path / layout.TRANSACTIONS_JOURNAL, TRANSACTION_SCHEMA).to_pylist()
    assert [row["txn"] for row in rows] == [0]


def test_a_consumer_journal_that_cannot_write_stops_its_member(tmp_path: Path) -> None:
    files = layout.consumer_journal(0, 0)
    journal = _Journal(tmp_path, files, member=0)
    journal.processed([(1, 0, 10)])
    journal.commits([(0, 11, "ok")])
    journal._processed._writer = FailingWriter()
    with pytest.raises(OSError, match="No space left on device"):
        journal.processed([(2, 0, 11)])
    journal.processed([])  # nothing to write: nothing refused
    with pytest.raises(OSError, match="No space left on device"):
        journal.close()  # the member's finally reports it (as its first error, if none yet)
    assert read_stream(tmp_path / files.processed, PROCESSED_SCHEMA)["msg_id"].to_pylist() == [1]
    assert read_stream(tmp_path / files.commits, COMMIT_SCHEMA)["offset"].to_pylist() == [11]


class _Partition:
    """What librdkafka hands a rebalance callback: a TopicPartition with its partition."""

    def __init__(self, partition: int) -> None:
        self.partition = partition


def test_each_change_of_assignment_is_journalled_before_the_records_it_brings(tmp_path) -> None:
    files = layout.consumer_journal(3, 1)
    journal = _Journal(tmp_path, files, member=3)
    counters = [0, 0]
    callbacks = _rebalance_callbacks(journal, counters)
    assert set(callbacks) == {"on_assign", "on_revoke", "on_lost"}
    callbacks["on_assign"](None, [_Partition(2), _Partition(0)])
    assert counters[ASSIGNED] == 2
    journal.processed([(1, 0, 10)])
    callbacks["on_revoke"](None, [_Partition(2)])
    callbacks["on_lost"](None, [_Partition(0)])
    assert counters[ASSIGNED] == 0
    journal.close()
    rows = read_stream(tmp_path / files.assignments, ASSIGNMENT_SCHEMA).to_pylist()
    assert [(r["consumer"], r["partition"], r["kind"]) for r in rows] == [
        (3, 0, "assigned"), (3, 2, "assigned"), (3, 2, "revoked"), (3, 0, "lost"),
    ]  # fmt: skip
    processed = read_stream(tmp_path / files.processed, PROCESSED_SCHEMA).to_pylist()
    assert rows[0]["ts_us"] <= processed[0]["ts_us"] <= rows[2]["ts_us"] <= rows[3]["ts_us"]


@given(st.lists(st.lists(st.integers(-(2**40), 2**40), max_size=20), max_size=6))
def test_a_stream_becomes_parquet_sorted_as_asked(tmp_path_factory, batches):
    """stream_to_parquet writes every row of every batch, sorted, and returns that table;
    without a stream it writes nothing."""
    folder = tmp_path_factory.mktemp("stream")
    schema = pa.schema([("v", pa.int64())])
    writer = StreamWriter(folder / "s.arrows", schema)
    for values in batches:
        writer.write(pa.record_batch({"v": values}, schema=schema))
    writer.close()
    table = stream_to_parquet(folder / "s.arrows", schema, folder / "s.parquet", sort_by="v")
    expected = sorted(v for values in batches for v in values)  # the oracle
    assert table is not None and table.column("v").to_pylist() == expected
    assert pq.read_table(folder / "s.parquet").column("v").to_pylist() == expected
    assert stream_to_parquet(folder / "none.arrows", schema, folder / "n.parquet") is None
    assert not (folder / "n.parquet").exists()
