"""The nodes of each cluster mode and the configuration the image renders from their env."""

from __future__ import annotations

import subprocess

import pytest

from harness.platform.cluster import KafkaCluster
from harness.platform.topology import (
    ClusterError,
    Role,
    Topology,
    broker_env,
    plan_nodes,
    with_jvm_options,
)
from harness.platform.versions import Mode
from harness.rundir.release import KafkaVersion
from harness.settings import REPO_ROOT

ENTRYPOINT = REPO_ROOT / "compose" / "kafka-entrypoint.sh"
PORTS = [40001, 40002, 40003]


def run_entrypoint(flag: str, env: dict[str, str]) -> dict[str, str]:
    """What the entrypoint renders (server.properties or zoo.cfg) from exactly `env`."""
    out = subprocess.run(
        ["bash", str(ENTRYPOINT), flag], env=env, capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def properties(env: dict[str, str]) -> dict[str, str]:
    return run_entrypoint("--print-properties", env)


def topology(mode: Mode, version: str, **counts: int) -> Topology:
    return Topology(mode, KafkaVersion.parse(version), **counts)


def test_kraft_mode_is_the_combined_nodes_of_before():
    plans = plan_nodes(topology(Mode.KRAFT, "4.3.1"), "cid", PORTS, {"min.insync.replicas": "2"})
    assert [(p.role, p.node_id, p.hostname, p.host_port) for p in plans] == [
        (Role.COMBINED, i, f"kafka-{i}", PORTS[i - 1]) for i in (1, 2, 3)
    ]
    assert plans[1].env == broker_env(
        2, PORTS[1], Topology(brokers=3), "cid", {"min.insync.replicas": "2"}
    )
    props = properties(plans[0].env)
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "INTERNAL://:9092,CONTROLLER://:9093,EXTERNAL://:9094"
    assert props["controller.quorum.voters"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"


def test_kraft_dedicated_has_controller_only_nodes_with_ids_apart_from_brokers():
    plans = plan_nodes(
        topology(Mode.KRAFT_DEDICATED, "4.3.1", brokers=4),
        "cid",
        [*PORTS, 40004],
        {"unclean.leader.election.enable": "true"},
    )
    controllers = [p for p in plans if p.role is Role.CONTROLLER]
    brokers = [p for p in plans if p.role is Role.BROKER]
    assert [p.hostname for p in controllers] == [f"controller-{i}" for i in (101, 102, 103)]
    assert [p.node_id for p in brokers] == [1, 2, 3, 4]
    assert all(p.host_port == 0 for p in controllers)
    voters = "101@controller-101:9093,102@controller-102:9093,103@controller-103:9093"
    controller = properties(controllers[0].env)
    assert controller["process.roles"] == "controller"
    assert controller["node.id"] == "101"
    assert controller["listeners"] == "CONTROLLER://:9093"
    assert controller["controller.quorum.voters"] == voters
    assert "advertised.listeners" not in controller
    # The KRaft controller elects leaders: the cell's settings reach it too.
    assert controller["unclean.leader.election.enable"] == "true"
    broker = properties(brokers[3].env)
    assert broker["process.roles"] == "broker"
    assert broker["node.id"] == "4"
    assert broker["controller.quorum.voters"] == voters
    assert broker["advertised.listeners"] == "INTERNAL://kafka-4:9092,EXTERNAL://127.0.0.1:40004"
    assert "CONTROLLER" not in broker["listeners"]
    assert controllers[0].env["CLUSTER_ID"] == brokers[0].env["CLUSTER_ID"] == "cid"


def test_zookeeper_mode_brokers_register_in_zookeeper_without_kraft_settings():
    plans = plan_nodes(topology(Mode.ZOOKEEPER, "3.9.1", zookeeper_nodes=3), "cid", PORTS)
    assert [p.hostname for p in plans] == [
        "zookeeper-1",
        "zookeeper-2",
        "zookeeper-3",
        "kafka-1",
        "kafka-2",
        "kafka-3",
    ]
    broker = properties(plans[4].env)
    assert broker["broker.id"] == "2"
    assert broker["zookeeper.connect"] == "zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181"
    assert broker["inter.broker.listener.name"] == "INTERNAL"
    assert broker["listener.security.protocol.map"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
    assert not {"process.roles", "node.id", "controller.quorum.voters"} & broker.keys()
    assert "CLUSTER_ID" not in plans[4].env  # nothing to format


def test_zookeeper_servers_render_their_zoo_cfg_and_id():
    plans = plan_nodes(topology(Mode.ZOOKEEPER, "0.11.0.3", zookeeper_nodes=3), "cid", PORTS)
    second = plans[1]
    assert second.env["KCHAOS_ROLE"] == "zookeeper" and second.env["ZOO_MY_ID"] == "2"
    cfg = run_entrypoint("--print-zoo-cfg", second.env)
    assert cfg["clientPort"] == "2181"
    assert [cfg[f"server.{i}"] for i in (1, 2, 3)] == [
        f"zookeeper-{i}:2888:3888" for i in (1, 2, 3)
    ]
    single = plan_nodes(topology(Mode.ZOOKEEPER, "0.11.0.3"), "cid", PORTS)[0]
    assert not any(
        key.startswith("server.") for key in run_entrypoint("--print-zoo-cfg", single.env)
    )


def test_settings_an_old_release_lacks_are_not_given_to_it():
    old = properties(plan_nodes(topology(Mode.ZOOKEEPER, "0.10.2.2"), "cid", PORTS)[1].env)
    newer = properties(plan_nodes(topology(Mode.ZOOKEEPER, "0.11.0.3"), "cid", PORTS)[1].env)
    transactional = {"transaction.state.log.replication.factor", "group.initial.rebalance.delay.ms"}
    assert not transactional & old.keys()
    assert transactional <= newer.keys()
    assert old["offsets.topic.replication.factor"] == "3"


@pytest.mark.parametrize(
    ("mode", "version", "counts", "message"),
    [
        (Mode.ZOOKEEPER, "4.3.1", {}, "lacks ZooKeeper mode"),
        (Mode.KRAFT, "2.8.2", {}, "lacks KRaft mode"),
        (Mode.KRAFT_DEDICATED, "4.3.1", {"controllers": 2}, "Fix: controllers 1, 3 or 5"),
        (Mode.ZOOKEEPER, "3.9.1", {"zookeeper_nodes": 2}, "Fix: zookeeper_nodes 1 or 3"),
    ],
)
def test_shapes_that_cannot_run_are_refused_before_any_container(mode, version, counts, message):
    cluster = KafkaCluster(image="unused", mode=mode, version=version, **counts)
    with pytest.raises(ClusterError, match=message):
        cluster.start()
    assert cluster.all_nodes == [] and cluster.network_name == ""


def test_an_unknown_mode_names_the_modes():
    with pytest.raises(ClusterError, match="kraft, kraft-dedicated, zookeeper"):
        _ = KafkaCluster(image="unused", mode="raft").topology


@pytest.mark.parametrize(
    ("mode", "version"),
    [(Mode.KRAFT, "4.3.1"), (Mode.KRAFT_DEDICATED, "4.3.1"), (Mode.ZOOKEEPER, "3.9.1")],
)
def test_jvm_options_reach_every_kafka_jvm_and_no_zookeeper_nor_server_properties(mode, version):
    plans = plan_nodes(topology(mode, version), "cid", PORTS)
    assert with_jvm_options(plans, None) == plans
    options = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    changed = with_jvm_options(plans, options)
    for before, after in zip(plans, changed, strict=True):
        if before.role is Role.ZOOKEEPER:
            assert after == before
            continue
        assert after.env == {**before.env, "KAFKA_JVM_PERFORMANCE_OPTS": options}
        assert (after.role, after.node_id, after.host_port) == (
            before.role, before.node_id, before.host_port,
        )  # fmt: skip
        assert properties(after.env) == properties(before.env)  # an option, not a setting


@pytest.mark.parametrize(
    ("mode", "version"),
    [(Mode.KRAFT, "4.3.1"), (Mode.KRAFT_DEDICATED, "4.3.1"), (Mode.ZOOKEEPER, "3.9.1")],
)
def test_every_kafka_jvm_looks_names_up_at_each_connection(mode, version):
    # A restarted node may hold another's former address: no cached lookup may outlive it.
    for plan in plan_nodes(topology(mode, version), "cid", PORTS):
        if plan.role is Role.ZOOKEEPER:
            assert "KAFKA_OPTS" not in plan.env
            continue
        assert plan.env["KAFKA_OPTS"] == "-Dsun.net.inetaddr.ttl=0", plan
        assert "kafka.opts" not in properties(plan.env)  # a JVM option, not a setting
