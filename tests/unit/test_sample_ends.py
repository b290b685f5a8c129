"""The sampler's partition ends: read through the admin API (a stand-in here, no broker) and
written into `sample` events that read back typed, field for field; the consumer group's
liveness settings in its `consumers` event."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st

from harness.experiment.model import WorkloadSpec
from harness.experiment.timeouts import stuck_bound_s
from harness.platform.offsets import high_watermarks_of, read_ends
from harness.rundir.events import ConsumersDone, EventLog, PartitionEnd, Sample, read_events
from harness.rundir.records import CONSUMER_STUCK_S


class Admin:
    """ListOffsets as a cluster answers it: per isolation level, per partition an offset or an
    error (a partition whose leader is gone)."""

    def __init__(self, answers: dict[IsolationLevel, dict[int, int | None]]):
        self.answers = answers
        self.asked: list[tuple[IsolationLevel, float]] = []

    def list_offsets(self, asked: dict[Any, Any], **kwargs: Any) -> dict[Any, Future]:
        level = kwargs["isolation_level"]
        self.asked.append((level, kwargs["request_timeout"]))
        futures = {}
        for tp in asked:
            future: Future = Future()
            offset = self.answers[level].get(tp.partition)
            if offset is None:
                future.set_exception(KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)))
            else:
                future.set_result(SimpleNamespace(offset=offset))
            futures[tp] = future
        return futures


def test_read_ends_gives_each_partition_its_high_watermark_and_last_stable_offset() -> None:
    admin = Admin(
        {
            IsolationLevel.READ_UNCOMMITTED: {0: 120, 1: 40, 2: None},
            IsolationLevel.READ_COMMITTED: {0: 100, 1: 40, 2: None},
        }
    )
    ends = read_ends(admin, "t", [0, 1, 2], timeout_s=0.5)
    assert ends == [
        PartitionEnd(partition=0, high_watermark=120, last_stable=100),
        PartitionEnd(partition=1, high_watermark=40, last_stable=40),
        PartitionEnd(partition=2, high_watermark=None, last_stable=None),
    ]
    assert {level for level, _ in admin.asked} == set(IsolationLevel)
    assert all(timeout == 0.5 for _, timeout in admin.asked)


@given(st.dictionaries(st.integers(0, 5), st.none() | st.integers(0, 10**6), max_size=6))
def test_the_nemesis_high_watermarks_are_one_listoffsets_of_the_answered(
    answered: dict[int, int | None],
) -> None:
    admin = Admin({IsolationLevel.READ_UNCOMMITTED: answered})
    found = high_watermarks_of(admin, "t", sorted(answered))
    # The oracle: every partition whose leader answered, and no read_committed request.
    assert found == {p: hw for p, hw in answered.items() if hw is not None}
    assert [level for level, _ in admin.asked] == [IsolationLevel.READ_UNCOMMITTED]


def test_a_sample_with_ends_reads_back_as_written(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    ends = [
        PartitionEnd(partition=0, high_watermark=120, last_stable=100),
        PartitionEnd(partition=1, high_watermark=None, last_stable=None),
    ]
    log.write(Sample(ts_us=10, partitions=[{"partition": 0, "leader": 1, "isr": [1]}],
                     ends=ends, ends_us=11))  # fmt: skip
    log.write(Sample(ts_us=20, partitions=[], ends_error="KafkaException: timed out", ends_us=21))
    log.close()
    line = json.loads((tmp_path / "events.jsonl").read_text().splitlines()[0])
    assert line["ends"] == [
        {"partition": 0, "high_watermark": 120, "last_stable": 100},
        {"partition": 1, "high_watermark": None, "last_stable": None},
    ]
    first, second = read_events(tmp_path).of(Sample)
    assert first.ends == ends and first.ends_us == 11 and first.ts_us == 10
    assert second.ends is None and second.ends_error == "KafkaException: timed out"


def test_a_sample_of_an_older_harness_has_no_ends() -> None:
    sample = Sample.model_validate({"type": "sample", "ts_us": 1, "partitions": []})
    assert sample.ends is None and sample.ends_us is None


def test_the_consumers_event_carries_the_liveness_settings(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.write(ConsumersDone(ts_us=5, stuck_s=12.5, transaction_timeout_ms=30_000))
    log.close()
    (event,) = read_events(tmp_path).of(ConsumersDone)
    assert event.stuck_s == 12.5 and event.transaction_timeout_ms == 30_000


def test_the_stuck_bound_is_a_validated_workload_setting() -> None:
    assert stuck_bound_s(WorkloadSpec()) == CONSUMER_STUCK_S == 30.0
    assert stuck_bound_s(WorkloadSpec(consumer_stuck_s=5)) == 5
    for wrong in (0, -1):
        try:
            WorkloadSpec(consumer_stuck_s=wrong)
        except ValueError as exc:
            assert "consumer_stuck_s" in str(exc)
        else:
            raise AssertionError(f"consumer_stuck_s={wrong} was accepted")


@given(st.integers(6_000, 300_000), st.one_of(st.none(), st.floats(0.1, 600)))
def test_a_longer_session_timeout_lengthens_the_default_stuck_bound(
    session_ms: int, given_s: float | None
) -> None:
    """A dead member keeps its partitions for the whole session timeout: the default bound
    grows by what the session adds over the members' default 6 s; a bound the file gives
    stands as it is."""
    workload = WorkloadSpec(consumer_session_timeout_ms=session_ms, consumer_stuck_s=given_s)
    expected = given_s if given_s is not None else 30.0 + (session_ms - 6_000) / 1000
    assert stuck_bound_s(workload) == expected
