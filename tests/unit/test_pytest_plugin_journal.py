"""The pytest plugin's journal of a test's own producer: the values it hands out, and every
delivery report in the harness's journal, finalized into acked.parquet as for any run."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.rundir import layout
from harness.rundir.events import EventLog
from harness.rundir.records import NO_REPORT
from harness.workload.values import decode_value, encode_value
from kafka_chaos.testing.errors import ChaosUsageError
from kafka_chaos.testing.journal import MAX_CHOSEN_ID, ChaosJournal
from tests.examples import examples
from tests.unit.finalized import finalized


class Report:
    """A delivery report as confluent_kafka hands it to the callback."""

    def __init__(self, value: bytes, partition: int = 0, offset: int = 0, error: Any = None):
        self._value, self._partition, self._offset = value, partition, offset
        self._error = error

    def value(self) -> bytes:
        return self._value

    def error(self) -> Any:
        return self._error

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def latency(self) -> float:
        return 0.001


ERRORS = {
    "ok": None,
    "failed": KafkaError(KafkaError.MSG_SIZE_TOO_LARGE),
    "indeterminate": KafkaError(KafkaError._MSG_TIMED_OUT),
}


def new_journal(run_dir: Path, **kwargs: Any) -> ChaosJournal:
    options = {"keys": 4, "message_bytes": 40, "offsets_known": True, **kwargs}
    return ChaosJournal(run_dir, **options)


def closed(journal: ChaosJournal, run_dir: Path) -> list[dict[str, Any]]:
    """Close the journal into events.jsonl; the tally event written."""
    events = EventLog(run_dir / layout.EVENTS)
    assert journal.close(events) is None
    events.close()
    return [json.loads(line) for line in (run_dir / layout.EVENTS).read_text().splitlines()]


def test_messages_carry_the_next_id_on_the_harness_keys(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    messages = [journal.message() for _ in range(9)]
    assert [m.msg_id for m in messages] == list(range(9))
    assert [m.key for m in messages] == ["k0", "k1", "k2", "k3"] * 2 + ["k0"]
    assert [decode_value(m.value) for m in messages] == [(i, i // 4) for i in range(9)]
    assert {len(m.value) for m in messages} == {40}
    assert journal.sent == 9


def test_every_report_reaches_acked_parquet_with_its_status(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    statuses = ["ok", "failed", "ok", "indeterminate", "ok"]
    for offset, status in enumerate(statuses):
        message = journal.message()
        journal.on_delivery(ERRORS[status], Report(message.value, 1, offset, ERRORS[status]))
    journal.message()  # taken, never reported
    events = closed(journal, tmp_path)
    (tally,) = [e for e in events if e["type"] == "recorder_tally"]
    assert tally["reports"] == {"ok": 3, "failed": 1, "indeterminate": 1}
    assert tally["journal_error"] is None
    rows = finalized(tmp_path).to_pylist()
    assert [r["status"] for r in rows] == [*statuses, "indeterminate"]
    assert rows[-1]["error"] == NO_REPORT
    assert [r["offset"] for r in rows[:3]] == [0, 1, 2]
    assert rows[1]["error"] == "MSG_SIZE_TOO_LARGE"


def test_offsets_are_not_recorded_under_acks_0(tmp_path: Path) -> None:
    journal = new_journal(tmp_path, offsets_known=False)
    journal.on_delivery(None, Report(journal.message().value, 0, 7))
    closed(journal, tmp_path)
    assert finalized(tmp_path).to_pylist()[0]["offset"] is None


def test_reports_after_close_are_counted_not_journalled(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    value = journal.message().value
    closed(journal, tmp_path)
    journal.on_delivery(None, Report(value))
    assert journal.late_reports == 1
    with pytest.raises(ChaosUsageError, match="closed"):
        journal.message()


def test_a_wrapped_callback_is_called_after_the_report_is_recorded(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    seen: list[tuple[Any, Any]] = []
    callback = journal.wrap(lambda error, msg: seen.append((error, journal.reports["ok"])))
    report = Report(journal.message().value)
    callback(None, report)
    assert seen == [(None, 1)]


def test_ids_of_the_tests_choosing_count_per_key_sequences(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    values = [journal.value(i, key) for i, key in [(0, "a"), (1, b"a"), (2, None), (3, "b")]]
    assert [decode_value(v) for v in values] == [(0, 0), (1, 1), (2, 0), (3, 0)]
    assert journal.sent == 4


@pytest.mark.parametrize("msg_id", [-1, MAX_CHOSEN_ID, True, 1.0])
def test_an_id_out_of_range_is_refused(tmp_path: Path, msg_id: Any) -> None:
    with pytest.raises(ChaosUsageError, match=r"msg_id|ids run from"):
        new_journal(tmp_path).value(msg_id)


def test_an_id_taken_twice_is_refused(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    journal.value(5)
    with pytest.raises(ChaosUsageError, match="id 5 was taken already"):
        journal.value(5)


def test_message_and_value_do_not_mix(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    journal.message()
    with pytest.raises(ChaosUsageError, match="use one of message\\(\\) and value\\(\\)"):
        journal.value(7)


@pytest.mark.property
@settings(max_examples=examples(0.3))
@given(
    st.dictionaries(
        st.integers(0, 300), st.sampled_from(sorted(ERRORS)) | st.none(), min_size=1, max_size=60
    )
)
def test_chosen_ids_finalize_to_one_row_each_below_the_highest(
    tmp_path_factory: pytest.TempPathFactory, outcomes: dict[int, str | None]
) -> None:
    """Ids reported keep their status; ids below the highest that were never reported (or
    never taken) are indeterminate without a report, never lost."""
    run_dir = tmp_path_factory.mktemp("journal")
    journal = new_journal(run_dir)
    for msg_id, status in outcomes.items():
        value = journal.value(msg_id, f"key{msg_id % 3}")
        if status is not None:
            journal.on_delivery(ERRORS[status], Report(value, 0, msg_id, ERRORS[status]))
    closed(journal, run_dir)
    rows = {r["msg_id"]: r for r in finalized(run_dir).to_pylist()}
    assert sorted(rows) == list(range(max(outcomes) + 1))
    for msg_id, row in rows.items():
        status = outcomes.get(msg_id)
        assert row["status"] == (status or "indeterminate")
        assert (row["error"] == NO_REPORT) == (status is None)


def test_producer_threads_share_one_journal(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)

    def produce() -> None:
        for _ in range(500):
            journal.on_delivery(None, Report(journal.message().value))

    threads = [threading.Thread(target=produce) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    closed(journal, tmp_path)
    rows = finalized(tmp_path).to_pylist()
    assert len(rows) == 2000
    assert {r["status"] for r in rows} == {"ok"}


def protocol_line(name: str, msg_id: int, key_seq: int, **fields: Any) -> str:
    """A verifiable-client protocol line about the send of `msg_id`, harness-format value."""
    value = encode_value(msg_id, key_seq, 40).decode()
    return json.dumps({"name": name, "value": value, **fields})


def test_a_programs_protocol_lines_are_journalled_by_status(tmp_path: Path) -> None:
    """The sends a container reported on stdout (record_lines) reach acked.parquet as the
    callback's do: acknowledged with partition and offset, a Java error by its class (a
    refused send failed, an unknown one indeterminate), other lines skipped."""
    journal = new_journal(tmp_path)
    lines = [
        json.dumps({"name": "startup_complete"}),
        protocol_line("producer_send_success", 0, 0, partition=2, offset=5),
        "not json: a log line the program printed",
        protocol_line(
            "producer_send_error",
            1,
            0,
            exception="org.apache.kafka.common.errors.RecordTooLargeException",
        ),
        protocol_line(
            "producer_send_error", 2, 0, exception="org.apache.kafka.common.errors.TimeoutException"
        ),
        protocol_line("producer_send_success", 3, 0, partition=1, offset=0),
    ]
    assert journal.record_lines(lines) == 4
    assert journal.sent == 4
    with pytest.raises(ChaosUsageError, match=r"ids come from record_lines\(\)"):
        journal.message()
    closed(journal, tmp_path)
    rows = finalized(tmp_path).to_pylist()
    assert [r["status"] for r in rows] == ["ok", "failed", "indeterminate", "ok"]
    assert [(r["partition"], r["offset"]) for r in (rows[0], rows[3])] == [(2, 5), (1, 0)]
