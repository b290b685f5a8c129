"""Every cluster mode against real brokers: kraft-dedicated (4.3.1) and zookeeper (an old
release and the last ZooKeeper line), each surviving a SIGKILLed, restarted leader with
every acknowledged record read back. One cluster at a time, removed also on failure."""

from __future__ import annotations

from pathlib import Path

import docker
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from harness.platform.cluster import KafkaCluster
from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image
from harness.platform.leftovers import remove_leftovers
from harness.platform.topology import Role
from harness.platform.versions import Mode
from harness.workload.readback import read_back
from tests.integration.support import wait_until

pytestmark = pytest.mark.chaos

TOPIC = "modes"


@pytest.fixture(scope="module", autouse=True)
def engine() -> None:
    """A running Docker engine and no leftovers of crashed runs; fails, never skips."""
    ensure_engine()
    remove_leftovers()


def produce(cluster: KafkaCluster, first: int, count: int) -> int:
    """Send messages first..first+count-1 with acks=all; return how many were acknowledged."""
    acked: list[bool] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            # Long enough for a ZooKeeper session to expire and a new leader to take over.
            "message.timeout.ms": 90000,
            "log_level": 0,
        }
    )
    for i in range(first, first + count):
        producer.produce(
            TOPIC,
            f"{i}:0:x".encode(),
            key=f"k{i % 4}",
            on_delivery=lambda err, msg: acked.append(err is None),
        )
        producer.poll(0)
    assert producer.flush(120) == 0
    return sum(acked)


def survive_a_leader_kill(cluster: KafkaCluster, tmp_path: Path) -> None:
    """RF=3 topic, acks=all writes before and while the leader is down, restart, full ISR,
    and every acknowledged record read back."""
    cluster.create_topic(TOPIC, 3, 3, {"min.insync.replicas": "2"}, timeout_s=60)
    assert produce(cluster, 0, 300) == 300
    leader = cluster.node(cluster.partition_states(TOPIC)[0].leader)
    leader.kill()
    wait_until(lambda: leader.state() == "exited", 20, f"{leader.hostname} to die")
    try:
        assert produce(cluster, 300, 100) == 100  # two replicas left: min.insync.replicas holds
    finally:
        leader.start()
    cluster.wait_full_isr(TOPIC, timeout_s=120)
    result = read_back(cluster.bootstrap_servers, TOPIC, 3, tmp_path / "readback.parquet")
    assert result.complete
    # A producer without idempotence (0.10.2 has none) may write a retried batch twice.
    read = pq.read_table(tmp_path / "readback.parquet", columns=["msg_id"]).column(0)
    assert set(read.to_pylist()) == set(range(400))


def collected_logs(cluster: KafkaCluster, tmp_path: Path) -> dict[str, str]:
    """Every node's log as collect_logs writes them: file name -> text."""
    paths = cluster.collect_logs(tmp_path / "logs")
    return {path.name: path.read_text(errors="replace") for path in paths}


def test_kraft_dedicated_controllers_apart_from_brokers(tmp_path):
    image = ensure_image("4.3.1").tag
    with KafkaCluster(image=image, mode=Mode.KRAFT_DEDICATED, version="4.3.1") as cluster:
        assert sorted(cluster.metadata().brokers) == [1, 2, 3]
        assert [n.node_id for n in cluster.quorum] == [101, 102, 103]
        assert {n.role for n in cluster.quorum} == {Role.CONTROLLER}
        assert [n.role for n in cluster.nodes] == [Role.BROKER] * 3
        controller = cluster.active_controller()
        assert controller in {101, 102, 103}
        assert cluster.node(controller).role is Role.CONTROLLER
        survive_a_leader_kill(cluster, tmp_path)
        logs = collected_logs(cluster, tmp_path)
        assert sorted(logs) == [f"controller-{i}.log" for i in (101, 102, 103)] + [
            f"kafka-{i}.log" for i in (1, 2, 3)
        ]
        assert "Kafka Server started" in logs["controller-101.log"]


@pytest.mark.parametrize(
    ("version", "ensemble"),
    [("0.11.0.3", 3), ("3.9.1", 1)],
    ids=["0.11.0.3-zk3", "3.9.1-zk1"],
)
def test_zookeeper_mode(version, ensemble, tmp_path):
    image = ensure_image(version).tag
    cluster = KafkaCluster(
        image=image, mode=Mode.ZOOKEEPER, version=version, zookeeper_nodes=ensemble
    )
    with cluster:
        assert sorted(cluster.metadata().brokers) == [1, 2, 3]
        assert cluster.quorum == []
        assert [n.hostname for n in cluster.ensemble] == [
            f"zookeeper-{i}" for i in range(1, ensemble + 1)
        ]
        assert cluster.active_controller() in {1, 2, 3}
        survive_a_leader_kill(cluster, tmp_path)
        logs = collected_logs(cluster, tmp_path)
        assert [name for name in logs if name.startswith("zookeeper-")] == [
            f"zookeeper-{i}.log" for i in range(1, ensemble + 1)
        ]
        assert "started (kafka.server.KafkaServer)" in logs["kafka-1.log"]
        network, labels = cluster.network_name, cluster.labels
    # Everything removed: ZooKeeper servers too.
    client = docker.from_env()
    key = next(iter(labels))
    assert client.containers.list(all=True, filters={"label": f"{key}={labels[key]}"}) == []
    assert client.networks.list(names=[network]) == []
