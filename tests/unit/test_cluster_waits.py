"""The cluster's waits (harness/platform/cluster.py) on the one poll loop, against a cluster
whose metadata is scripted: what they retry, and that a timeout is still a ClusterError."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.platform.cluster import KafkaCluster
from harness.platform.topology import ClusterError, PartitionState
from harness.waiting import WaitTimeout


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.waiting.time.sleep", lambda s: None)


def _topic(error: int | None, isr: tuple[int, ...] = (1, 2, 3)) -> Any:
    partition = SimpleNamespace(id=0, leader=1, replicas=[1, 2, 3], isrs=list(isr))
    return SimpleNamespace(
        error=None if error is None else KafkaError(error), partitions={0: partition}
    )


class Scripted(KafkaCluster):
    """A cluster whose metadata answers come from a script, the last one repeated."""

    def __init__(self, answers: list[Any]) -> None:
        super().__init__(image="unused")
        self.answers, self.asked = answers, 0

    def metadata(self, topic: str | None = None, timeout_s: float = 5.0) -> Any:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, int):
            return SimpleNamespace(brokers=dict.fromkeys(range(answer)), topics={})
        return SimpleNamespace(topics={"t": answer})


def test_partition_states_waits_for_a_topic_every_broker_knows() -> None:
    unknown = _topic(KafkaError.UNKNOWN_TOPIC_OR_PART)
    cluster = Scripted([unknown, unknown, _topic(None)])
    assert cluster.partition_states("t", timeout_s=30) == [
        PartitionState(0, 1, (1, 2, 3), (1, 2, 3))
    ]
    assert cluster.asked == 3


def test_partition_states_raises_the_last_error_as_cluster_error() -> None:
    cluster = Scripted([_topic(KafkaError.UNKNOWN_TOPIC_OR_PART)])
    with pytest.raises(ClusterError, match="topic t:"):
        cluster.partition_states("t", timeout_s=0)
    cluster = Scripted([_topic(KafkaError.TOPIC_AUTHORIZATION_FAILED)])
    with pytest.raises(ClusterError, match="topic t:"):
        cluster.partition_states("t", timeout_s=30)
    assert cluster.asked == 1  # not a lagging broker: not asked again


def test_wait_full_isr_retries_unreadable_metadata_until_the_isr_is_full() -> None:
    refused = KafkaException(KafkaError(KafkaError._TRANSPORT))
    cluster = Scripted([refused, _topic(None, isr=(1, 2)), _topic(None)])
    assert cluster.wait_full_isr("t", timeout_s=30) >= 0
    assert cluster.asked == 3


def test_a_timed_out_wait_is_a_cluster_error_naming_what_it_waited_for() -> None:
    cluster = Scripted([_topic(None, isr=(1,))])
    with pytest.raises(
        ClusterError, match="timed out after 0 s waiting for full ISR on t"
    ) as caught:
        cluster.wait_full_isr("t", timeout_s=0)
    assert isinstance(caught.value.__cause__, WaitTimeout)


def test_wait_ready_describes_the_nodes_when_the_brokers_do_not_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = Scripted([KafkaException(KafkaError(KafkaError._TRANSPORT)), 2])
    monkeypatch.setattr(Scripted, "_describe_failure", lambda self: "  kafka-3: exited")
    with pytest.raises(ClusterError, match=r"3 brokers to register\n  kafka-3: exited"):
        cluster.wait_ready(timeout_s=0.01)
