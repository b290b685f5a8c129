"""A transactional API call that never returns (librdkafka #5456, #5511) must not stall the
harness: the recorder abandons the client as stuck, stops the workload and ends the repetition
with ClientStuck. The logic is the recorder's own; the client is a stand-in whose
send_offsets_to_transaction blocks until the test releases it (no broker needed to hang)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.rundir import layout
from harness.rundir.events import EventLog, load_events
from harness.rundir.streams import read_stream
from harness.rundir.transactions import TRANSACTION_SCHEMA, TxnOutcome
from harness.workload.producer.recorder import Workload
from harness.workload.transactions.librdkafka import (
    ClientStuck,
    TransactionalRecorder,
    TransactionPlan,
)


class HangingProducer:
    """Begins, produces and polls like a client; send_offsets_to_transaction blocks until
    `release` is set, as librdkafka's did against Kafka 3.8.1."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, *args, **kwargs) -> None:
        self.calls.append("produce")

    def poll(self, timeout: float = 0) -> int:
        return 0

    def send_offsets_to_transaction(self, offsets, group, timeout: float) -> None:
        self.calls.append("send_offsets")
        self.release.wait()

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")

    def purge(self, **kwargs) -> None:
        self.calls.append("purge")

    def close(self, *args) -> None:
        self.calls.append("close")


def run_bounded(recorder: TransactionalRecorder, stop: threading.Event) -> float:
    """Run the recorder on a thread: its seconds; a failure, not a hung test, if it waits
    on the stuck call past 10 s."""
    worker = threading.Thread(target=recorder.run, args=(stop,), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the recorder is still waiting on the stuck call"
    return time.monotonic() - started


@pytest.fixture
def recorder(tmp_path: Path):
    plan = TransactionPlan(
        size=2, abort_every=None, abort_ratio=None, seed=1, timeout_ms=10_000,
        send_offsets=True, partitions=1,
    )  # fmt: skip
    workload = Workload(rate=None, duration_s=None, count=10, message_bytes=64, keys=2)
    made = TransactionalRecorder("127.0.0.1:1", "chaos", {}, workload, plan, tmp_path)
    made.END_TIMEOUT_S, made.STUCK_AFTER_S = 0.2, 0.5  # seconds instead of 10 + 30
    made.producer, made._group = HangingProducer(), object()
    yield made
    made.producer = None


def test_a_call_that_never_returns_stops_the_workload_and_ends_it_stuck(recorder, tmp_path):
    client = recorder.producer
    try:
        waited = run_bounded(recorder, threading.Event())
        events = EventLog(tmp_path / layout.EVENTS)
        outcome = recorder.close(events)
    finally:
        client.release.set()  # let the hanging thread end
    assert waited < 5  # bounded by END_TIMEOUT_S + STUCK_AFTER_S, not by the call
    assert isinstance(outcome, ClientStuck) and "#5456" in str(outcome)
    # One transaction, begun, sent, never committed; the stuck client was never closed.
    assert client.calls == ["begin", "produce", "produce", "send_offsets"]
    rows = read_stream(tmp_path / layout.TRANSACTIONS_JOURNAL, TRANSACTION_SCHEMA).to_pylist()
    assert [(r["txn"], r["outcome"]) for r in rows] == [(0, TxnOutcome.UNKNOWN.value)]
    assert "did not return" in rows[0]["error"]
    [tally] = [e for e in load_events(tmp_path) if e["type"] == "recorder_tally"]
    assert tally["transactions"] == {TxnOutcome.UNKNOWN.value: 1}


def test_an_interrupt_ends_the_wait_for_a_stuck_call_at_once(recorder, tmp_path):
    client = recorder.producer
    recorder.STUCK_AFTER_S = 600.0  # only the interrupt can end the wait in time
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    try:
        waited = run_bounded(recorder, stop)
        outcome = recorder.close(EventLog(tmp_path / layout.EVENTS))
    finally:
        client.release.set()
    assert waited < 5
    assert isinstance(outcome, ClientStuck) and "close" not in client.calls


def test_a_call_that_returns_late_but_in_time_is_not_stuck(recorder, tmp_path):
    client = recorder.producer
    threading.Timer(0.3, client.release.set).start()  # within 0.2 + 0.5 s
    recorder.workload = Workload(rate=None, duration_s=None, count=2, message_bytes=64, keys=2)
    recorder.run(threading.Event())
    assert recorder.close(EventLog(tmp_path / layout.EVENTS)) is None
    # Committed, then closed as any client is at the end of the workload.
    assert client.calls == [
        "begin",
        "produce",
        "produce",
        "send_offsets",
        "commit",
        "purge",
        "close",
    ]
