"""The cluster against real brokers: start, produce/consume, kill, restart, pause, teardown."""

from __future__ import annotations

from types import SimpleNamespace

import docker
import pytest
from confluent_kafka import Producer

from harness.experiment.model import FaultStep
from harness.nemesis.targets import step_partition
from harness.platform.cluster import KafkaCluster
from harness.workload.readback import read_back
from tests.integration.support import wait_until


def produce(cluster: KafkaCluster, topic: str, count: int, partition: int | None = None) -> list:
    """Send `count` acks=all messages; return the delivery errors (None for success)."""
    outcomes: list = []
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "message.timeout.ms": 30000}
    )
    for i in range(count):
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(
            topic,
            f"{i}:0:x".encode(),
            key=f"k{i % 4}",
            on_delivery=lambda err, msg: outcomes.append(err),
            **kwargs,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    return outcomes


@pytest.mark.integration
def test_cluster_is_ready_with_three_brokers(cluster: KafkaCluster):
    assert sorted(cluster.metadata().brokers) == [1, 2, 3]
    assert cluster.active_controller() in {1, 2, 3}
    assert all(port > 0 for port in (n.host_port for n in cluster.nodes))


@pytest.mark.integration
def test_produce_and_read_back_with_acks_all(cluster: KafkaCluster, topic: str, tmp_path):
    outcomes = produce(cluster, topic, 300)
    assert outcomes.count(None) == 300
    result = read_back(cluster.bootstrap_servers, topic, 3, tmp_path / "readback.parquet")
    assert result.complete
    assert result.records == 300
    assert all(low == 0 for low in result.log_start_offsets.values())


@pytest.mark.integration
def test_leader_kill_elects_new_leader_from_isr_and_node_rejoins(cluster: KafkaCluster, topic):
    before = cluster.partition_states(topic)[0]
    old_leader = cluster.node(before.leader)
    old_leader.kill()
    try:
        after = wait_until(
            lambda: (
                (s := cluster.partition_states(topic)[0]).leader not in (None, before.leader) and s
            ),
            30,
            "a new leader",
        )
        assert after.leader in before.isr
        # Kafka elects the first in-sync replica in assignment order: the `successor` target,
        # read from replicas this release lists in that order.
        assert before.in_assignment_order and [after.leader] == before.named("successor")
        assert produce(cluster, topic, 50, partition=0).count(None) == 50
    finally:
        old_leader.start()
    cluster.wait_full_isr(topic, timeout_s=60)
    assert before.leader in cluster.partition_states(topic)[0].isr


@pytest.mark.integration
def test_away_from_controller_names_the_partition_the_controller_stands_third_in(
    cluster: KafkaCluster, topic: str
):
    """Brokers that are the controllers, three partitions of three replicas with a full ISR:
    each broker is first in one replica list, second in one and third in one, so the active
    controller is out of the line (leader, successor) of exactly one partition, and a step's
    `away-from-controller` names it, as the nemesis resolves it from the real cluster."""
    cluster.wait_full_isr(topic, timeout_s=60)
    states = cluster.partition_states(topic)
    controller = cluster.active_controller()
    clear = [s.partition for s in states if not s.in_line(controller)]
    assert controller in cluster.topology.controller_ids() and len(clear) == 1
    step = FaultStep(fault="kill", target="leader", partition="away-from-controller")
    ctx = SimpleNamespace(cluster=cluster, topic=topic)
    assert step_partition(ctx, step, {}) == clear[0]  # type: ignore[arg-type]


@pytest.mark.chaos
def test_graceful_stop_and_start_keeps_the_container(cluster: KafkaCluster, topic):
    node = cluster.node(3)
    container_id = node.docker.id
    node.stop(timeout_s=60)
    assert node.state() == "exited"
    node.start()
    cluster.wait_full_isr(topic, timeout_s=60)
    assert node.docker.id == container_id


@pytest.mark.chaos
def test_pause_and_unpause(cluster: KafkaCluster, topic):
    node = cluster.node(2)
    node.pause()
    try:
        assert node.state() == "paused"
        assert produce(cluster, topic, 20).count(None) == 20
    finally:
        node.unpause()
    assert node.state() == "running"
    cluster.wait_full_isr(topic, timeout_s=60)


@pytest.mark.integration
def test_broker_logs_are_collected(cluster: KafkaCluster, tmp_path):
    paths = cluster.collect_logs(tmp_path)
    assert len(paths) == 3
    assert "Kafka Server started" in paths[0].read_text()


@pytest.mark.integration
def test_a_start_that_fails_removes_everything_and_keeps_the_nodes_logs(broker_image, tmp_path):
    """Nodes that refuse their configuration never get ready: the start fails, removes what it
    made, and what the nodes logged until then is still collected (the evidence of why a
    cluster did not come up). A broken setting, not a short timeout, makes the failure certain:
    a warm engine starts a healthy cluster within any timeout the start accepts."""
    cluster = KafkaCluster(image=broker_image, broker_config={"num.io.threads": "0"})
    # A node that exits is seen at once by its wait strategy; one that hangs times out.
    with pytest.raises(Exception, match=r"exited|timed out"):
        cluster.start(ready_timeout_s=1)
    client = docker.from_env()
    key, value = next(iter(cluster.labels.items()))
    assert client.containers.list(all=True, filters={"label": f"{key}={value}"}) == []
    paths = cluster.collect_logs(tmp_path)
    assert [p.name for p in paths] == ["kafka-1.log", "kafka-2.log", "kafka-3.log"]
    assert all("num.io.threads" in p.read_text() for p in paths)


@pytest.mark.integration
def test_teardown_removes_containers_and_network(broker_image: str):
    cluster = KafkaCluster(image=broker_image).start()
    name, label = cluster.network_name, cluster.labels
    cluster.close()
    client = docker.from_env()
    key = next(iter(label))
    assert client.containers.list(all=True, filters={"label": f"{key}={label[key]}"}) == []
    assert client.networks.list(names=[name]) == []
