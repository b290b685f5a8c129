"""The read-back's watermark query waits for a just-created topic's partitions, within the
read-back's own time, and raises what it cannot wait out as before (a KafkaException)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.waiting import Deadline
from harness.workload import readback


class _JustCreated:
    """A consumer whose metadata knows each partition only after `unknown_for` asks."""

    def __init__(self, code: int = KafkaError._UNKNOWN_PARTITION, unknown_for: int = 2) -> None:
        self.code, self.unknown_for = code, unknown_for
        self.asks: dict[int, int] = {}

    def get_watermark_offsets(self, tp, timeout: float, cached: bool) -> tuple[int, int]:
        self.asks[tp.partition] = self.asks.get(tp.partition, 0) + 1
        if self.asks[tp.partition] <= self.unknown_for:
            raise KafkaException(KafkaError(self.code))
        return 0, 10 * tp.partition


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)


@pytest.mark.parametrize("code", sorted(readback.RETRIABLE))
def test_the_read_back_waits_for_a_just_created_partition(code: int) -> None:
    consumer = _JustCreated(code)
    low, high = readback._watermarks(consumer, "t", 3, Deadline.after(60))
    assert low == {0: 0, 1: 0, 2: 0} and high == {0: 0, 1: 10, 2: 20}
    assert consumer.asks == {0: 3, 1: 3, 2: 3}


def test_the_read_back_does_not_retry_what_is_not_retriable() -> None:
    consumer = _JustCreated(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as caught:
        readback._watermarks(consumer, "t", 1, Deadline.after(60))
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consumer.asks == {0: 1}


def test_when_the_read_back_time_is_up_the_error_is_raised_as_before() -> None:
    consumer = _JustCreated(unknown_for=10**9)
    with pytest.raises(KafkaException) as caught:
        readback._watermarks(consumer, "t", 2, Deadline.after(-1))
    assert caught.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    assert consumer.asks == {0: 1}  # asked once: no time was left to ask again
