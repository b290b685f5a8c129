"""The reading side of a consume-transform-produce transaction
(harness/workload/transactions/reads.py): its journal's schema round trip and finalize, the
bounds of one transaction's read against a scripted consumer and a fake clock, and the recorder
reading before it sends."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.streams import StreamWriter, read_stream
from harness.rundir.transactions import TXN_READ_SCHEMA, read_txn_reads
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.librdkafka import (
    TransactionalRecorder,
    TransactionPlan,
    finalize_transactions,
)
from harness.workload.transactions.reads import (
    POLL_S,
    TransactionReader,
    finalize_txn_reads,
)
from harness.workload.values import encode_value

BUDGET_S = 0.2


class Record:
    """A consumed message as confluent_kafka hands it over (only what the reader asks)."""

    def __init__(self, partition: int, offset: int, value: bytes | None, error: object = None):
        self._at, self._value, self._error = (partition, offset), value, error

    def partition(self) -> int:
        return self._at[0]

    def offset(self) -> int:
        return self._at[1]

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> object:
        return self._error


def ours(msg_id: int, partition: int = 0) -> Record:
    """The record of msg_id as the recorder writes its value, at offset msg_id."""
    return Record(partition, msg_id, encode_value(msg_id, 0, 40))


class Scripted:
    """A consumer whose consume calls return the scripted batches in turn (then nothing), each
    call advancing the fake clock by its `cost` (what the call took, at most its timeout)."""

    def __init__(self, batches: list[list[Record]], cost: float = 0.0):
        self.batches, self.cost, self.now = list(batches), cost, 0.0
        self.calls: list[tuple[int, float]] = []
        self.returned: list[Record] = []
        self.closed = False

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        self.calls.append((num_messages, timeout))
        self.now += min(self.cost, timeout)
        batch = (self.batches.pop(0) if self.batches else [])[:num_messages]
        self.returned.extend(batch)
        return batch

    def close(self) -> None:
        self.closed = True

    def clock(self) -> float:
        return self.now


def reader(
    tmp_path: Path, source: Scripted, reads: int, budget_s: float = BUDGET_S
) -> TransactionReader:
    journal = StreamWriter(tmp_path / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA)
    return TransactionReader(source, reads, journal, budget_s=budget_s, clock=source.clock)


def journalled(tmp_path: Path) -> list[dict]:
    return read_stream(tmp_path / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA).to_pylist()


def test_the_journal_round_trips_through_finalize(tmp_path: Path) -> None:
    read = reader(tmp_path, Scripted([[ours(7, 1), Record(2, 5, b"not ours")], [], [ours(9)]]), 2)
    for txn in (3, 4, 5):  # transaction 4 reads nothing: it adds no row
        read.read(txn)
    assert read.close() is None
    table = finalize_txn_reads(tmp_path)
    assert table is not None and table.schema.equals(TXN_READ_SCHEMA)
    again = read_txn_reads(tmp_path)
    assert again is not None and again.equals(table)
    assert [(r["txn"], r["msg_id"], r["partition"], r["offset"]) for r in again.to_pylist()] == [
        (3, 7, 1, 7), (3, None, 2, 5), (5, 9, 0, 9),
    ]  # fmt: skip
    assert table["ts_us"].to_pylist() == sorted(table["ts_us"].to_pylist())


def test_a_torn_last_batch_is_not_read(tmp_path: Path) -> None:
    journal = StreamWriter(tmp_path / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA)
    journal.append(txn=0, msg_id=1, partition=0, offset=1, ts_us=10)
    journal.append(txn=1, msg_id=2, partition=0, offset=2, ts_us=11)
    journal.close()
    path = tmp_path / layout.TXN_READS_JOURNAL
    path.write_bytes(path.read_bytes()[:-20])  # killed mid-batch, no end-of-stream marker
    table = finalize_txn_reads(tmp_path)
    assert table is not None and table["txn"].to_pylist() == [0]


def test_finalize_transactions_writes_the_reads_beside_transactions(tmp_path: Path) -> None:
    assert finalize_transactions(tmp_path) is None  # no transactional run: nothing written
    assert finalize_txn_reads(tmp_path) is None
    assert read_txn_reads(tmp_path) is None
    plan = TransactionPlan(2, None, None, 1, 10_000, False, 1)
    recorder = TransactionalRecorder(
        "127.0.0.1:1", "t", {}, Workload(None, None, 2, 40, 1), plan, tmp_path
    )
    reads = StreamWriter(tmp_path / layout.TXN_READS_JOURNAL, TXN_READ_SCHEMA)
    reads.append(txn=0, msg_id=1, partition=0, offset=1, ts_us=10)
    recorder.transactions.close()
    recorder.journal.close()
    assert finalize_transactions(tmp_path) is not None
    assert (tmp_path / layout.TRANSACTIONS).is_file()
    assert pq.read_table(tmp_path / layout.TXN_READS)["msg_id"].to_pylist() == [1]


def test_a_read_stops_at_its_count_and_decodes_each_msg_id(tmp_path: Path) -> None:
    source = Scripted([[ours(4, 1), Record(2, 0, b"not ours")], [ours(5), ours(6)], [ours(9)]])
    got = reader(tmp_path, source, reads=3).read(txn=8)
    assert [(r.msg_id, r.partition, r.offset) for r in got] == [(4, 1, 4), (None, 2, 0), (5, 0, 5)]
    assert [n for n, _ in source.calls] == [3, 1]  # never asks for more than it still wants
    rows = journalled(tmp_path)
    assert [(r["txn"], r["msg_id"]) for r in rows] == [(8, 4), (8, None), (8, 5)]


def test_a_poll_that_brings_nothing_ends_the_read(tmp_path: Path) -> None:
    source = Scripted([[ours(1)], [], [ours(2)]], cost=0.001)
    got = reader(tmp_path, source, reads=10).read(txn=0)
    assert [r.msg_id for r in got] == [1] and len(source.calls) == 2
    assert all(timeout <= POLL_S for _, timeout in source.calls)


def test_a_consumer_that_keeps_the_reader_waiting_is_cut_off_at_the_budget(
    tmp_path: Path,
) -> None:
    """Each poll brings only an error event and takes its whole timeout: the read ends when
    the budget is spent, the last poll waiting only for what was left of it."""
    endless = [[Record(0, 0, None, error="_TRANSPORT")] for _ in range(100)]
    source = Scripted(endless, cost=1.0)
    assert reader(tmp_path, source, reads=5, budget_s=0.12).read(txn=0) == []
    assert source.now == pytest.approx(0.12)
    assert [t for _, t in source.calls] == pytest.approx([POLL_S, POLL_S, 0.02])


def test_error_events_are_not_records(tmp_path: Path) -> None:
    source = Scripted([[Record(0, 3, None, error="_PARTITION_EOF"), ours(2)]])
    got = reader(tmp_path, source, reads=5).read(txn=1)
    assert [r.msg_id for r in got] == [2]


def test_a_consumer_that_raises_ends_the_read_with_what_it_had(tmp_path: Path) -> None:
    class Failing(Scripted):
        def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
            if self.calls:
                raise RuntimeError("consumer closed")
            return super().consume(num_messages, timeout)

    source = Failing([[ours(1)]])
    got = reader(tmp_path, source, reads=5).read(txn=2)
    assert [r.msg_id for r in got] == [1] and journalled(tmp_path)[0]["txn"] == 2


@pytest.mark.property
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 50), st.booleans(), st.booleans()), max_size=6),
        max_size=12,
    ),
    reads=st.integers(1, 12),
    cost=st.sampled_from([0.0, 0.01, 0.03, 0.05]),
)
def test_a_read_is_bounded_and_journals_what_it_returns(tmp_path_factory, batches, reads, cost):
    """At most `reads` records and never past the budget; the journal holds exactly what was
    returned, in order: the non-error records of the batches the reader asked for."""
    tmp = tmp_path_factory.mktemp("reads")
    script = [
        [Record(m % 3, m, encode_value(m, 0, 40) if mine else b"x", "err" if bad else None)
         for m, mine, bad in batch]
        for batch in batches
    ]  # fmt: skip
    source = Scripted(script, cost)
    got = reader(tmp, source, reads).read(txn=5)
    assert len(got) <= reads
    assert source.now <= BUDGET_S + 1e-9
    records = [r for r in source.returned if r.error() is None]
    expected = [(r.offset(), r.offset() if r.value() != b"x" else None) for r in records]
    assert [(r.offset, r.msg_id) for r in got] == expected
    assert [(r["offset"], r["msg_id"]) for r in journalled(tmp)] == expected
    # It stopped only when it had its count, the budget was spent, or a poll brought nothing.
    full, spent = len(got) == reads, source.now >= BUDGET_S - 1e-9
    assert full or spent or len(source.calls) > len(script) or not script[len(source.calls) - 1]
    assert all(r["txn"] == 5 for r in journalled(tmp))


def test_the_recorder_reads_before_it_sends(tmp_path: Path) -> None:
    """A transaction of a plan with reads: begin, then the reads (journalled under its number),
    then its sends and its commit."""
    order: list[str] = []

    class Client:
        def begin_transaction(self) -> None:
            order.append("begin")

        def produce(self, topic, value, key, partition) -> None:
            order.append("produce")

        def poll(self, timeout: float) -> int:
            return 0

        def commit_transaction(self, timeout: float) -> None:
            order.append("commit")

    class Logged(Scripted):
        def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
            order.append("consume")
            return super().consume(num_messages, timeout)

    plan = TransactionPlan(2, None, None, 1, 10_000, False, 1, reads=2)
    workload = Workload(rate=None, duration_s=None, count=2, message_bytes=40, keys=1)
    recorder = TransactionalRecorder("127.0.0.1:1", "t", {}, workload, plan, tmp_path)
    recorder.producer = Client()  # type: ignore[assignment]
    recorder.reader = reader(tmp_path, Logged([[ours(0), ours(1)]]), plan.reads)
    assert recorder._transaction(0, 0, 2, 0.0, 0.0, threading.Event()) == (2, False)
    assert order == ["begin", "consume", "produce", "produce", "commit"]
    assert recorder.reader.close() is None
    assert [(r["txn"], r["msg_id"]) for r in journalled(tmp_path)] == [(0, 0), (0, 1)]
    recorder.transactions.close()
    recorder.journal.close()
