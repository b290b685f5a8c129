"""The disk faults on real brokers whose log directories sit on the disk layer (chaosfs),
each judged by its effect on Kafka measured from outside the fault's code: what survives a
power loss, what Kafka's recovery makes of a torn batch, a broker halting on a failed disk,
produce latency on a slow one."""

from __future__ import annotations

import random
import statistics
import time
import uuid

import pytest
from confluent_kafka import Producer

from harness.chaos.faults import FAULT_TYPES, Fault, FaultContext
from harness.platform.cluster import KafkaCluster
from harness.platform.disk_layer import chaosfs_binary
from harness.platform.node import KafkaNode
from harness.rundir.segments import batches
from tests.integration.conftest import known_to_every_broker
from tests.integration.support import high_watermarks, read_all, wait_until


@pytest.fixture(scope="module")
def cluster(broker_image: str):
    """A 3-node cluster on the disk layer."""
    with KafkaCluster(image=broker_image, disk_layer=chaosfs_binary()) as started:
        yield started


def new_topic(cluster: KafkaCluster, config: dict[str, str] | None = None) -> str:
    """A fresh RF=3, 3-partition topic with min.insync.replicas=2, known to every broker."""
    name = f"d-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, 3, 3, {"min.insync.replicas": "2", **(config or {})})
    wait_until(lambda: known_to_every_broker(cluster, name, 3), 30, f"every broker to know {name}")
    return name


def fault_of(kind: str, cluster: KafkaCluster, nodes: list[KafkaNode], **params) -> Fault:
    cls = FAULT_TYPES[kind]
    ctx = FaultContext(cluster, "unused", random.Random(7))
    return cls(ctx, nodes, cls.parse_params(params) if params else None)


def produce(cluster: KafkaCluster, topic: str, count: int) -> None:
    """`count` acks=all writes to `topic`, every one acknowledged."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0}
    )
    for i in range(count):
        producer.produce(topic, b"%d" % i, key=b"%d" % (i % 8))
    assert producer.flush(60) == 0
    assert sum(high_watermarks(cluster.bootstrap_servers, topic)) == count


def healed(cluster: KafkaCluster, *topics: str) -> None:
    cluster.wait_ready(timeout_s=120)
    for topic in topics:
        cluster.wait_full_isr(topic, timeout_s=90)


def segments_on_disk(node: KafkaNode, topic: str) -> dict[str, bytes]:
    """The topic's .log files as the node's disk holds them (the container may be stopped)."""
    files = node.read_files(node.disk_dir)
    return {
        name: data
        for name, (_, data) in files.items()
        if f"/{topic}-" in name and name.endswith(".log")
    }


def whole_batches_end(segment: bytes) -> int:
    """Where the segment's last whole batch ends (its length when nothing trails)."""
    return max((b.position + b.size for b in batches(segment)), default=0)


@pytest.mark.integration
def test_lose_unsynced_of_all_loses_what_kafka_did_not_fsync_and_keeps_a_flushed_topic(cluster):
    unflushed = new_topic(cluster)
    flushed = new_topic(cluster, {"flush.messages": "1"})
    produce(cluster, unflushed, 300)
    produce(cluster, flushed, 300)

    power = fault_of("lose-unsynced", cluster, cluster.nodes)
    detail = power.inject()
    assert detail["method"] == "disk-layer"
    assert all(n.state() == "exited" for n in cluster.nodes)
    for node in cluster.nodes:
        lost = detail["lost"][node.hostname]
        assert lost["dropped_bytes"] > 0
        # On the disk: the unflushed topic's segments are empty, the flushed one's kept all.
        assert all(len(d) == 0 for d in segments_on_disk(node, unflushed).values())
        kept = segments_on_disk(node, flushed).values()
        assert sum(b.last_offset - b.base_offset + 1 for s in kept for b in batches(s)) == 300
    power.heal()
    healed(cluster, unflushed, flushed)
    # SIGKILL keeps the page cache (tests/integration/test_faults.py); this power loss does not.
    assert sum(high_watermarks(cluster.bootstrap_servers, unflushed)) == 0
    assert sum(high_watermarks(cluster.bootstrap_servers, flushed)) == 300


@pytest.mark.chaos
def test_a_torn_write_leaves_a_partial_batch_on_disk_that_kafkas_recovery_drops(cluster):
    topic = new_topic(cluster)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0}
    )
    for i in range(400):  # batches of 20 records
        producer.produce(topic, b"x" * 200, key=b"%d" % (i % 8))
        producer.poll(0)
        if i % 20 == 19:
            producer.flush(30)
    assert producer.flush(30) == 0

    torn = fault_of("torn-write", cluster, cluster.nodes)
    torn.inject()
    trailing = {
        name: len(data) - whole_batches_end(data)
        for node in cluster.nodes
        for name, data in segments_on_disk(node, topic).items()
    }
    # Half of each unsynced segment survived, cut inside a batch: a torn batch trails.
    assert any(extra > 0 for extra in trailing.values()), trailing
    torn.heal()
    healed(cluster, topic)
    records = read_all(cluster.bootstrap_servers, topic, 3)
    total = sum(high_watermarks(cluster.bootstrap_servers, topic))
    assert 0 < total < 400
    # Nothing torn is served: every record up to the high watermark is whole.
    assert len(records) == total and {value for _, value in records.values()} == {b"x" * 200}
    for node in cluster.nodes:  # recovery truncated every torn tail to a batch boundary
        for name, data in segments_on_disk(node, topic).items():
            assert whole_batches_end(data) == len(data), name


@pytest.mark.parametrize("kind", ["fsync-error", "disk-full"])
@pytest.mark.chaos
def test_a_failing_disk_halts_its_broker_and_the_heal_brings_it_back(cluster, kind):
    topic = new_topic(cluster, {"flush.messages": "1"})  # every append fsyncs and grows
    node = cluster.nodes[2]
    failing = fault_of(kind, cluster, [node])
    failing.inject()
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "message.timeout.ms": 20000,
            "log_level": 0,
        }
    )

    def halted() -> bool:
        producer.produce(topic, b"probe")
        producer.poll(0.2)
        return node.state() != "running"

    # Kafka takes a log directory offline on an IOException and halts with none left.
    wait_until(halted, 60, f"{node.hostname} to halt on {kind}")
    producer.flush(30)
    failing.heal()
    assert failing.detail()["halted"] == [node.hostname]
    healed(cluster, topic)
    produce(cluster, new_topic(cluster), 10)  # the cluster writes again after the heal


@pytest.mark.chaos
def test_a_slow_disk_delays_every_acknowledgement_of_a_flushed_topic_on_its_leader(cluster):
    topic = new_topic(cluster, {"flush.messages": "1"})
    states = cluster.partition_states(topic)
    leader = cluster.node(next(s.leader for s in states if s.partition == 0))
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0}
    )

    def median_ack_s(count: int = 5) -> float:
        took = []
        for _ in range(count):
            started = time.monotonic()
            producer.produce(topic, b"probe", partition=0)
            assert producer.flush(30) == 0
            took.append(time.monotonic() - started)
        return statistics.median(took)

    median_ack_s(2)  # connections and metadata first
    slow = fault_of("slow-disk", cluster, [leader], write_ms=0, fsync_ms=400)
    slow.inject()
    during = median_ack_s()
    slow.heal()
    after = median_ack_s()
    assert during >= 0.4, during  # the leader fsyncs each append before it acknowledges
    assert after < 0.4, after
