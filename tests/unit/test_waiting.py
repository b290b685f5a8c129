"""The one poll loop, and the read-back's watermarks waiting for a topic's metadata."""

from __future__ import annotations

import itertools

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.waiting import WaitTimeout, poll_until
from harness.workload import readback


def test_the_first_truthy_value_is_returned() -> None:
    values = iter([0, None, "", 7, 8])
    assert poll_until(lambda: next(values), 5, "a value", interval_s=0) == 7


def test_it_times_out_naming_what_it_waited_for() -> None:
    with pytest.raises(WaitTimeout, match=r"timed out after 0\.05 s waiting for the moon"):
        poll_until(lambda: False, 0.05, "the moon", interval_s=0.01)


def test_a_retriable_error_is_not_yet_and_chained_when_time_runs_out() -> None:
    def never() -> bool:
        raise KeyError("not yet")

    with pytest.raises(WaitTimeout) as caught:
        poll_until(never, 0.05, "a key", interval_s=0.01, retry_on=lambda e: True)
    assert isinstance(caught.value.__cause__, KeyError)


def test_any_other_error_propagates_at_once() -> None:
    calls = itertools.count()

    def broken() -> bool:
        next(calls)
        raise ValueError("broken")

    with pytest.raises(ValueError):
        poll_until(broken, 5, "a value", interval_s=0, retry_on=lambda e: False)
    assert next(calls) == 1


class _JustCreated:
    """A consumer whose metadata knows each partition only after two asks."""

    def __init__(self) -> None:
        self.asks: dict[int, int] = {}

    def get_watermark_offsets(self, tp, timeout: float, cached: bool) -> tuple[int, int]:
        self.asks[tp.partition] = self.asks.get(tp.partition, 0) + 1
        if self.asks[tp.partition] <= 2:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return 0, 10 * tp.partition


def test_the_read_back_waits_for_a_just_created_partition(monkeypatch) -> None:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)
    consumer = _JustCreated()
    low, high = readback._watermarks(consumer, "t", 3)
    assert low == {0: 0, 1: 0, 2: 0} and high == {0: 0, 1: 10, 2: 20}
    assert consumer.asks == {0: 3, 1: 3, 2: 3}


def test_the_read_back_does_not_retry_what_is_not_retriable() -> None:
    class Refusing:
        def get_watermark_offsets(self, tp, timeout: float, cached: bool) -> tuple[int, int]:
            raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        readback._watermarks(Refusing(), "t", 1)
