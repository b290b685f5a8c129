"""Every fault type injected into and healed on real brokers."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.cluster import LOG_DIR, KafkaCluster
from harness.faults import FAULT_TYPES, FaultContext
from harness.journal import EventLog
from harness.nemesis import Nemesis, heal_all, resolve_target
from harness.segments import batches
from harness.spec import FaultStep

pytestmark = pytest.mark.integration


def ctx_for(cluster: KafkaCluster, topic: str) -> FaultContext:
    return FaultContext(cluster, topic, random.Random(7))


def reachable_alone(node_port: int) -> bool:
    """Whether a client bootstrapped only to this host port gets metadata from it."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node_port}", "log_level": 0})
    try:
        admin.list_topics(timeout=3)
        return True
    except KafkaException:
        return False


def wait_until(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def step(fault: str, target: str = "leader", **params) -> FaultStep:
    return FaultStep(at_s=0, fault=fault, target=target, partition=0, duration_s=1, params=params)


def test_leader_cut_off_from_brokers_loses_leadership_but_clients_still_reach_it(cluster, topic):
    ctx = ctx_for(cluster, topic)
    (leader,) = resolve_target(ctx, step("partition"))
    fault = FAULT_TYPES["partition"](ctx, [leader], {"mode": "from-brokers"})
    fault.inject()
    try:
        new = wait_until(
            lambda: (
                cluster.leader_of_from(topic, 0, exclude=leader.node_id)
                not in (None, leader.node_id)
            ),
            40,
            "a new leader elected by the majority",
        )
        assert new
        assert reachable_alone(leader.host_port)  # the zombie still answers clients
    finally:
        fault.heal()
    cluster.wait_full_isr(topic, timeout_s=90)


def test_full_isolation_cuts_clients_too(cluster, topic):
    ctx = ctx_for(cluster, topic)
    node = cluster.node(2)
    fault = FAULT_TYPES["partition"](ctx, [node], {"mode": "full"})
    fault.inject()
    try:
        assert not reachable_alone(node.host_port)
    finally:
        fault.heal()
    wait_until(lambda: reachable_alone(node.host_port), 30, "the node to answer again")
    cluster.wait_full_isr(topic, timeout_s=90)


def test_groups_partition_and_heal(cluster, topic):
    ctx = ctx_for(cluster, topic)
    fault = FAULT_TYPES["partition"](ctx, [], {"mode": "groups", "groups": [[1], [2]]})
    detail = fault.inject()
    assert detail["groups"] == [[1], [2], [3]]
    code, rules = cluster.node(1).exec(["iptables", "-S", "KCHAOS"])
    assert code == 0 and rules.count("DROP") == 4
    fault.heal()
    code, rules = cluster.node(1).exec(["iptables", "-S", "KCHAOS"])
    assert "DROP" not in rules
    cluster.wait_full_isr(topic, timeout_s=90)


def test_packet_loss_and_bandwidth_limit_are_installed_and_removed(cluster, topic):
    ctx = ctx_for(cluster, topic)
    node = cluster.node(3)
    loss = FAULT_TYPES["loss"](ctx, [node], {"percent": 20})
    slow = FAULT_TYPES["slow"](ctx, [node], {"rate_kbit": 512, "delay_ms": 20})
    loss.inject()
    detail = slow.inject()
    try:
        assert "statistic" in node.exec(["iptables", "-S", "KCHAOS"])[1]
        assert detail["qdisc"] in node.exec(["tc", "qdisc", "show", "dev", "eth0"])[1]
        assert isinstance(detail["netem_available"], bool)  # detected, never assumed
    finally:
        loss.heal()
        slow.heal()
    assert "statistic" not in node.exec(["iptables", "-S", "KCHAOS"])[1]
    assert detail["qdisc"] not in node.exec(["tc", "qdisc", "show", "dev", "eth0"])[1]


def test_nemesis_kill_all_then_heal_brings_the_cluster_back(cluster, topic, tmp_path):
    ctx = ctx_for(cluster, topic)
    events = EventLog(tmp_path / "events.jsonl")
    nemesis = Nemesis(
        ctx, [FaultStep(at_s=0, fault="kill-all", target="all", duration_s=2)], events
    )
    nemesis.start(time.monotonic())
    wait_until(lambda: all(n.state() == "exited" for n in cluster.nodes), 20, "all killed")
    nemesis.stop()
    heal_all(ctx)
    assert all(n.state() == "running" for n in cluster.nodes)
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(topic, timeout_s=90)
    events.close()
    kinds = [line for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert any('"fault_start"' in k for k in kinds) and any('"fault_end"' in k for k in kinds)


def test_heal_all_undoes_pause_stop_and_rules(cluster, topic):
    ctx = ctx_for(cluster, topic)
    cluster.node(1).pause()
    cluster.node(2).stop(timeout_s=30)
    FAULT_TYPES["partition"](ctx, [cluster.node(3)], {"mode": "full"}).inject()
    heal_all(ctx)
    assert [n.state() for n in cluster.nodes] == ["running"] * 3
    assert "DROP" not in cluster.node(3).exec(["iptables", "-S", "KCHAOS"])[1]
    cluster.wait_full_isr(topic, timeout_s=90)


def test_controller_target_is_the_active_controller(cluster, topic):
    (node,) = resolve_target(ctx_for(cluster, topic), step("kill", target="controller"))
    assert node.node_id == cluster.active_controller()


def high_watermarks(cluster: KafkaCluster, topic: str, partitions: int = 3) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "hw", "log_level": 0}
    )
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def test_power_loss_of_all_loses_the_unflushed_acked_writes_sigkill_keeps(cluster, topic):
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0}
    )
    for i in range(300):
        producer.produce(topic, b"%d" % i, key=b"%d" % (i % 8))
    assert producer.flush(30) == 0
    producer.close()
    assert sum(high_watermarks(cluster, topic)) == 300
    ctx = ctx_for(cluster, topic)

    kill = FAULT_TYPES["kill-all"](ctx, cluster.nodes, {})
    kill.inject()
    kill.heal()
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(topic, timeout_s=90)
    assert sum(high_watermarks(cluster, topic)) == 300  # the page cache survived SIGKILL
    # The segment parser reads real segments: every record of a replica is in some batch.
    files = cluster.node(1).read_files(LOG_DIR)
    segments = [
        data for name, (_, data) in files.items() if f"/{topic}-" in name and name.endswith(".log")
    ]
    assert sum(b.last_offset - b.base_offset + 1 for s in segments for b in batches(s)) == 300

    power = FAULT_TYPES["power-loss"](ctx, cluster.nodes, {"window_s": None})
    detail = power.inject()
    assert all(n.state() == "exited" for n in cluster.nodes)
    cut = {partition for lost in detail["lost"].values() for partition in lost}
    assert cut == {f"{topic}-{p}" for p in range(3)}
    power.heal()
    cluster.wait_ready(timeout_s=120)
    cluster.wait_full_isr(topic, timeout_s=90)
    # Nothing was fsynced (Kafka flushes on segment roll only): every replica lost it all.
    assert sum(high_watermarks(cluster, topic)) == 0


def test_rolling_restart_restarts_each_node_in_turn_controller_last(cluster, topic):
    ctx = ctx_for(cluster, topic)
    controller = cluster.active_controller()
    roll = FAULT_TYPES["rolling-restart"](
        ctx, cluster.nodes, {"timeout_s": 30, "rejoin_timeout_s": 60}
    )
    detail = roll.inject()
    assert detail["order"][-1] == controller and sorted(detail["order"]) == [1, 2, 3]
    wait_until(lambda: len(roll.restarted) == 3, 240, "three restarts")
    roll.heal()  # waits for the last node to rejoin or halts the wait
    assert roll.restarted == detail["order"]
    assert roll.outcome() == {"restarted": detail["order"], "completed": True}
    assert [n.state() for n in cluster.nodes] == ["running"] * 3
    cluster.wait_full_isr(topic, timeout_s=90)
