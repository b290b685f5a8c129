"""The reassign fault on real brokers: a partition's replicas leave the target while acks=all
writes go on, and come back at heal, with every acknowledged write still readable."""

from __future__ import annotations

import random

import pytest
from confluent_kafka import Producer

from harness.chaos.faults import FAULT_TYPES, FaultContext, FaultError
from harness.platform.cluster import KafkaCluster
from tests.integration.support import read_all, wait_until

pytestmark = pytest.mark.integration


def write(cluster: KafkaCluster, topic: str, values: range) -> list[int]:
    """Send `values` to partition 0 with acks=all; the values acknowledged."""
    acked: list[int] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "log_level": 0})  # fmt: skip

    def report(err, msg) -> None:
        if err is None:
            acked.append(int(msg.value()))

    for value in values:
        producer.produce(topic, str(value).encode(), partition=0, on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    return acked


def test_dropping_the_leader_from_the_replicas_moves_leadership_and_heal_brings_it_back(
    cluster, topic
):
    before = cluster.partition_states(topic)[0]
    leader = cluster.node(before.leader)
    ctx = FaultContext(cluster, topic, random.Random(5))
    reassign = FAULT_TYPES["reassign"](ctx, [leader], FAULT_TYPES["reassign"].parse_params({}), 0)
    acked = write(cluster, topic, range(0, 300))
    detail = reassign.inject()
    assert detail["before"] == list(before.replicas)
    assert detail["after"] == [r for r in before.replicas if r != leader.node_id]
    during = cluster.partition_states(topic)[0]
    assert leader.node_id not in during.replicas and during.leader != leader.node_id
    acked += write(cluster, topic, range(300, 600))
    reassign.heal()
    assert reassign.detail()["restored"] == list(before.replicas)
    wait_until(
        lambda: set(cluster.partition_states(topic)[0].isr) == set(before.replicas),
        60,
        "the returned replica to catch up",
    )
    acked += write(cluster, topic, range(600, 900))
    assert len(acked) == 900
    read = read_all(cluster.bootstrap_servers, topic, 3)
    values = {int(value) for (partition, _), (_, value) in read.items() if partition == 0}
    assert set(acked) <= values


def test_move_needs_a_broker_without_a_replica(cluster, topic):
    leader = cluster.node(cluster.partition_states(topic)[0].leader)
    ctx = FaultContext(cluster, topic, random.Random(5))
    params = FAULT_TYPES["reassign"].parse_params({"mode": "move"})
    with pytest.raises(FaultError, match=r"raise kafka\.brokers or use mode drop"):
        FAULT_TYPES["reassign"](ctx, [leader], params, 0).inject()
