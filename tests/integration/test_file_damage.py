"""The truncate fault on real brokers: the file it names loses its last bytes on a stopped and
on a running node, as the engine's own copy of the file shows; a stopped broker whose segment
was cut recovers and refetches from the leader."""

from __future__ import annotations

import random
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from harness.chaos.faults import FAULT_TYPES, FaultContext
from harness.platform.cluster import KafkaCluster
from harness.platform.node import KafkaNode
from harness.platform.topology import LOG_DIR
from tests.integration.conftest import known_to_every_broker
from tests.integration.support import wait_until


@pytest.fixture
def one_partition(cluster: KafkaCluster):
    """A one-partition topic led by node 1 and replicated to 2 and 3, holding 50 records
    acknowledged by all three; deleted after the test."""
    name = f"cut-{uuid.uuid4().hex[:8]}"
    futures = cluster.admin().create_topics(
        [NewTopic(name, num_partitions=1, replica_assignment=[[1, 2, 3]])]
    )
    futures[name].result(timeout=30)
    cluster.wait_full_isr(name, timeout_s=30)
    wait_until(lambda: known_to_every_broker(cluster, name, 1), 30, f"{name} everywhere")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(50):
        producer.produce(name, b"record-%d" % i, partition=0)
    assert producer.flush(30) == 0
    yield name
    for future in cluster.admin().delete_topics([name], operation_timeout=30).values():
        future.result(timeout=30)


def truncate(cluster: KafkaCluster, topic: str, node: KafkaNode, **params) -> dict:
    """The truncate fault injected on `node` for partition 0 of `topic`; its recorded detail."""
    fault = FAULT_TYPES["truncate"]
    ctx = FaultContext(cluster, topic, random.Random(1))
    return fault(ctx, [node], fault.parse_params(params), partition=0).inject()["files"][
        node.hostname
    ]


def size_of(node: KafkaNode, path: str) -> int:
    """The file's size in the container, as the engine's archive of it says (no fault code)."""
    name = path.rsplit("/", 1)[-1]
    return len(node.read_files(path)[name][1])


@pytest.mark.integration
def test_a_cut_segment_on_a_stopped_follower_is_recovered_and_refetched(cluster, one_partition):
    follower, leader = cluster.node(3), cluster.node(1)
    folder = f"{LOG_DIR}/{one_partition}-0"
    segment = f"{folder}/00000000000000000000.log"
    whole = size_of(leader, segment)
    assert size_of(follower, segment) == whole > 10
    follower.kill()
    wait_until(lambda: follower.state() != "running", 10, "the follower to stop")

    detail = truncate(cluster, one_partition, follower, bytes=10)

    assert detail == {
        "node": "stopped",
        "file": f"{one_partition}-0/00000000000000000000.log",
        "size_before": whole,
        "size_after": whole - 10,
    }
    assert size_of(follower, segment) == whole - 10
    assert follower.state() != "running"  # the damage does not start it
    follower.start()
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(one_partition, timeout_s=90)
    # Recovery dropped the torn batch and the follower fetched it again from the leader.
    wait_until(lambda: size_of(follower, segment) == whole, 60, "the follower to refetch")


@pytest.mark.integration
def test_a_running_brokers_checkpoint_is_cut_in_place(cluster, one_partition):
    node = cluster.node(2)
    path = f"{LOG_DIR}/{one_partition}-0/partition.metadata"
    before = size_of(node, path)

    detail = truncate(cluster, one_partition, node, file="partition-metadata", bytes=7)

    assert detail["node"] == "running" and detail["size_before"] == before
    assert size_of(node, path) == detail["size_after"] == before - 7
    assert node.state() == "running"
