"""The plan of a cluster, before any container: roles, ports, host names, which node runs
what, and each node's environment (pure: no Docker, no Kafka client).

See harness.platform.cluster for the three modes and how clients reach the brokers."""

from __future__ import annotations

import base64
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from testcontainers.core.docker_client import DockerClient as TestcontainersClient

from harness.platform.versions import Feature, Mode, lacks, mode_refusal, supports
from harness.rundir.config import setting_text
from harness.rundir.release import KafkaVersion

INTERNAL_PORT = 9092
CONTROLLER_PORT = 9093
CLIENT_PORT = 9094
ZOOKEEPER_PORT = 2181
LOG_DIR = "/var/lib/kafka/data"
READY_TOPIC = "__kchaos_ready"
FIRST_CONTROLLER_ID = 101  # controller-only ids never clash with broker ids 1..N


class Role(StrEnum):
    """What a node of the cluster runs."""

    COMBINED = "broker+controller"  # kraft mode
    BROKER = "broker"
    CONTROLLER = "controller"  # a KRaft controller-only node
    ZOOKEEPER = "zookeeper"

    @property
    def is_broker(self) -> bool:
        """Whether clients reach this node: it has a client port."""
        return self in (Role.COMBINED, Role.BROKER)


def hostname_of(role: Role, node_id: int) -> str:
    """The node's name on the cluster network: kafka-<id>, controller-<id>, zookeeper-<id>."""
    prefix = {Role.CONTROLLER: "controller", Role.ZOOKEEPER: "zookeeper"}.get(role, "kafka")
    return f"{prefix}-{node_id}"


class ClusterError(RuntimeError):
    """The cluster could not be started or did not become ready; the message names the fix."""


@dataclass(frozen=True)
class PartitionState:
    """Leader, replicas and ISR of one partition as the metadata reports them."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # Whether `replicas` is the assignment's order (versions.Feature.ASSIGNMENT_ORDER), the
    # order Kafka elects by; older brokers send them as a set.
    in_assignment_order: bool = True

    def named(self, target: str) -> list[int]:
        """The broker ids partition target `target` (leader, follower, followers, isr,
        successor, replica, out-of-sync) names in this state: the leader excluded but for
        `leader` and `replica`; a partition without a leader has no followers, rather than
        every replica as followers. `follower` and `replica` name the ids one is chosen from."""
        others = [r for r in self.replicas if r != self.leader]
        if target == "replica":
            return list(self.replicas)
        if target == "leader":
            return [] if self.leader is None else [self.leader]
        if target in ("follower", "followers"):
            return [] if self.leader is None else others
        if target == "isr":
            return [r for r in self.isr if r != self.leader]
        if target == "successor":
            # Kafka elects the first live in-sync replica in assignment order. Where the
            # replicas come as a set, the ISR, in assignment order until it changes, is the
            # better record of that order.
            order = self.replicas if self.in_assignment_order else self.isr
            return [r for r in order if r in self.isr and r != self.leader][:1]
        return [r for r in self.replicas if r not in self.isr]  # out-of-sync

    def in_line(self, node: int | None) -> bool:
        """True when broker `node` is this partition's leader or its successor (None: never)."""
        return node is not None and node in (self.leader, *self.named("successor"))


def away_from(states: Sequence[PartitionState], node: int | None) -> int:
    """The lowest partition in `states` (not empty) that `node` is not in line for (see
    PartitionState.in_line); the lowest partition when it is in line for every one."""
    clear = [s.partition for s in states if not s.in_line(node)]
    return min(clear or [s.partition for s in states])


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, not led by '-'.

    The storage tool's argument parser reads an id starting with '-' as an option (Kafka's
    own Uuid.randomUuid() retries for the same reason).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def directory_id(cluster_id: str, node_id: int) -> str:
    """The metadata directory id (a Kafka Uuid) node `node_id` of cluster `cluster_id` is
    formatted with in a dynamic quorum: derived from both, so the harness knows every voter's
    id without reading a disk. Never led by '-' (see new_cluster_id), and a version-5 UUID is
    never one of the ids Kafka reserves (the first hundred)."""
    salt = 0
    while True:
        raw = uuid.uuid5(uuid.NAMESPACE_OID, f"{cluster_id}/{node_id}/{salt}").bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-"):
            return text
        salt += 1


def free_host_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that nothing listens on right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_in_use(port: int) -> bool:
    """True when something already listens on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def docker_host() -> str:
    """The address this process reaches published container ports at, as Testcontainers
    reports the docker host; "localhost" becomes 127.0.0.1, where local ports are published
    (librdkafka would try ::1 first)."""
    host = TestcontainersClient().host()
    return "127.0.0.1" if host == "localhost" else host


def publish_address(host: str) -> str:
    """The host interface to publish broker ports on: loopback for a local engine, else all."""
    return "127.0.0.1" if host in ("127.0.0.1", "::1") else "0.0.0.0"


@dataclass(frozen=True)
class Topology:
    """The cluster's shape: its mode, its Kafka release and how many nodes of each role."""

    mode: Mode = Mode.KRAFT
    version: KafkaVersion = field(default_factory=lambda: KafkaVersion.parse("4.3.1"))
    brokers: int = 3
    controllers: int = 3  # controller-only nodes (kraft-dedicated)
    zookeeper_nodes: int = 1  # ZooKeeper servers (zookeeper mode)
    # KIP-853: controllers formatted with their voter set (--initial-controllers) and found
    # through controller.quorum.bootstrap.servers, so controllers can be removed and added.
    dynamic_quorum: bool = False

    def refusal(self) -> str | None:
        """None when this shape can run, else what is wrong and the fix."""
        if self.dynamic_quorum and self.mode is not Mode.KRAFT_DEDICATED:
            return (
                f"a dynamic quorum needs dedicated controllers, not {self.mode} mode. "
                "Fix: kafka.mode kraft-dedicated, or kafka.quorum static."
            )
        if self.dynamic_quorum and (missing := lacks(self.version, Feature.DYNAMIC_QUORUM)):
            return f"{missing} Fix: kafka.version 3.9.0 or later, or kafka.quorum static."
        if self.brokers < 1:
            return f"{self.brokers} brokers: a cluster needs at least one. Fix: brokers >= 1."
        if self.mode is Mode.KRAFT_DEDICATED and self.controllers not in (1, 3, 5):
            return (
                f"{self.controllers} controllers: a KRaft quorum has an odd size. "
                "Fix: controllers 1, 3 or 5."
            )
        if self.mode is Mode.ZOOKEEPER and self.zookeeper_nodes not in (1, 3):
            return (
                f"{self.zookeeper_nodes} ZooKeeper nodes: the harness runs an ensemble of 1 or 3. "
                "Fix: zookeeper_nodes 1 or 3."
            )
        return mode_refusal(self.version, self.mode)

    def controller_ids(self) -> list[int]:
        """Node ids of the KRaft controllers: the brokers themselves in kraft mode."""
        if self.mode is Mode.KRAFT:
            return list(range(1, self.brokers + 1))
        if self.mode is Mode.KRAFT_DEDICATED:
            return list(range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + self.controllers))
        return []

    def voters(self) -> str:
        """controller.quorum.voters: id@host:port of every KRaft controller."""
        role = Role.COMBINED if self.mode is Mode.KRAFT else Role.CONTROLLER
        return ",".join(
            f"{i}@{hostname_of(role, i)}:{CONTROLLER_PORT}" for i in self.controller_ids()
        )

    def quorum_env(self, cluster_id: str, controller_id: int | None = None) -> dict[str, str]:
        """How a KRaft node finds the quorum: the static voter list, or in a dynamic quorum
        the controllers' addresses and, for controller `controller_id`, the voter set its
        storage is formatted with (the entrypoint adds KCHAOS_FORMAT_ARGS to the format)."""
        if not self.dynamic_quorum:
            return {"KAFKA_CONTROLLER_QUORUM_VOTERS": self.voters()}
        ids = self.controller_ids()
        env = {
            "KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS": ",".join(
                f"{hostname_of(Role.CONTROLLER, i)}:{CONTROLLER_PORT}" for i in ids
            )
        }
        if controller_id is not None:
            voters = ",".join(
                f"{i}@{hostname_of(Role.CONTROLLER, i)}:{CONTROLLER_PORT}:"
                f"{directory_id(cluster_id, i)}"
                for i in ids
            )
            env["KCHAOS_FORMAT_ARGS"] = f"--initial-controllers {voters}"
        return env

    def zookeeper_connect(self) -> str:
        """zookeeper.connect: every ZooKeeper server's client address."""
        return ",".join(
            f"{hostname_of(Role.ZOOKEEPER, i)}:{ZOOKEEPER_PORT}"
            for i in range(1, self.zookeeper_nodes + 1)
        )


@dataclass(frozen=True)
class NodePlan:
    """One container to create: its role, id, environment and published client port."""

    role: Role
    node_id: int
    env: dict[str, str]
    host_port: int = 0  # the published client port; 0 for nodes clients never reach

    @property
    def hostname(self) -> str:
        return hostname_of(self.role, self.node_id)


def with_jvm_options(plans: list[NodePlan], options: str | None) -> list[NodePlan]:
    """`plans` with `options` as every Kafka JVM's KAFKA_JVM_PERFORMANCE_OPTS (ZooKeeper's
    untouched); None leaves the image's (C1 alone, G1). bench/broker_jvm_bench.py weighs
    the choices: start to ready against throughput."""
    if options is None:
        return plans
    return [
        plan
        if plan.role is Role.ZOOKEEPER
        else replace(plan, env={**plan.env, "KAFKA_JVM_PERFORMANCE_OPTS": options})
        for plan in plans
    ]


def plan_nodes(
    topology: Topology,
    cluster_id: str,
    host_ports: list[int],
    extra: dict[str, str] | None = None,
    advertised_host: str = "127.0.0.1",
    controller_extra: dict[str, str] | None = None,
) -> list[NodePlan]:
    """Every node of the cluster, ZooKeeper servers and controllers before the brokers.

    `host_ports` holds one client port per broker; `extra` (server properties) goes to every
    Kafka node, controllers included: in KRaft the controller elects leaders, so settings such
    as unclean.leader.election.enable take effect there. `controller_extra` goes to the
    controller-only nodes only, on top of `extra`."""
    plans = [
        NodePlan(Role.ZOOKEEPER, i, zookeeper_env(i, topology.zookeeper_nodes))
        for i in range(1, topology.zookeeper_nodes + 1)
        if topology.mode is Mode.ZOOKEEPER
    ]
    if topology.mode is Mode.KRAFT_DEDICATED:
        plans += [
            NodePlan(
                Role.CONTROLLER,
                i,
                controller_env(
                    i, topology, cluster_id, {**(extra or {}), **(controller_extra or {})}
                ),
            )
            for i in topology.controller_ids()
        ]
    role = Role.COMBINED if topology.mode is Mode.KRAFT else Role.BROKER
    for node_id, port in enumerate(host_ports, start=1):
        env = broker_env(node_id, port, topology, cluster_id, extra, advertised_host)
        plans.append(NodePlan(role, node_id, env, port))
    return plans


def _listeners(node_id: int, host_port: int, advertised_host: str) -> dict[str, str]:
    """A broker's INTERNAL (between nodes) and EXTERNAL (clients on the host) listeners."""
    return {
        "KAFKA_LISTENERS": f"INTERNAL://:{INTERNAL_PORT},EXTERNAL://:{CLIENT_PORT}",
        "KAFKA_ADVERTISED_LISTENERS": f"INTERNAL://kafka-{node_id}:{INTERNAL_PORT},"
        f"EXTERNAL://{advertised_host}:{host_port}",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
    }


# Docker gives a container its address when it starts, so two nodes restarted together (a heal
# after both halted) can swap theirs; with the JVM's 30 s cache of name lookups a node then
# sends requests meant for one broker to the other, whose answers mark partitions failed until
# their leader changes (seen: a read-back refused NOT_LEADER for 2 minutes after such a heal).
# A host keeps its address; a lookup at every connection is the nearest a container gets.
FRESH_LOOKUPS = {"KAFKA_OPTS": "-Dsun.net.inetaddr.ttl=0"}


def _cluster_settings(brokers: int, version: KafkaVersion) -> dict[str, str]:
    """Settings of the harness's test clusters, as far as `version` knows them."""
    env = {
        **FRESH_LOOKUPS,
        "KAFKA_LOG_DIRS": LOG_DIR,
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": str(min(3, brokers)),
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }
    if supports(version, Feature.TRANSACTIONS):
        env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] = str(min(3, brokers))
        env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] = "1"
    if supports(version, Feature.GROUP_REBALANCE_DELAY):
        env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] = "0"
    return env


def _with_extra(env: dict[str, str], extra: dict[str, str] | None) -> dict[str, str]:
    for key, value in (extra or {}).items():
        env[property_env_name(key)] = setting_text(value)
    return env


def broker_env(
    node_id: int,
    host_port: int,
    topology: Topology,
    cluster_id: str,
    extra: dict[str, str] | None = None,
    advertised_host: str = "127.0.0.1",
) -> dict[str, str]:
    """The environment of broker `node_id`, in the env convention of the apache/kafka image: a
    combined broker and controller in kraft mode, broker-only in kraft-dedicated or zookeeper
    mode.

    Clients are told to reach the node at `advertised_host`:`host_port`."""
    env = {
        **_listeners(node_id, host_port, advertised_host),
        **_cluster_settings(topology.brokers, topology.version),
    }
    if topology.mode is Mode.ZOOKEEPER:
        env |= {
            "KAFKA_BROKER_ID": str(node_id),
            "KAFKA_ZOOKEEPER_CONNECT": topology.zookeeper_connect(),
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        }
        return _with_extra(env, extra)
    combined = topology.mode is Mode.KRAFT
    env |= {
        "CLUSTER_ID": cluster_id,
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": "broker,controller" if combined else "broker",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "EXTERNAL:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        **topology.quorum_env(cluster_id),
    }
    if combined:
        env["KAFKA_LISTENERS"] = (
            f"INTERNAL://:{INTERNAL_PORT},CONTROLLER://:{CONTROLLER_PORT},EXTERNAL://:{CLIENT_PORT}"
        )
    return _with_extra(env, extra)


def controller_env(
    node_id: int, topology: Topology, cluster_id: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of KRaft controller-only node `node_id` (kraft-dedicated mode)."""
    env = {
        "CLUSTER_ID": cluster_id,
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": "controller",
        "KAFKA_LISTENERS": f"CONTROLLER://:{CONTROLLER_PORT}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        **topology.quorum_env(cluster_id, node_id),
        "KAFKA_LOG_DIRS": LOG_DIR,
        **FRESH_LOOKUPS,
    }
    return _with_extra(env, extra)


def zookeeper_env(node_id: int, ensemble_size: int) -> dict[str, str]:
    """The environment of ZooKeeper server `node_id` of an ensemble of `ensemble_size`."""
    servers = " ".join(
        f"server.{i}={hostname_of(Role.ZOOKEEPER, i)}:2888:3888"
        for i in range(1, ensemble_size + 1)
    )
    # A single server runs standalone: no server list.
    env = {"KCHAOS_ROLE": "zookeeper", "ZOO_MY_ID": str(node_id)}
    return env | ({"ZOO_SERVERS": servers} if ensemble_size > 1 else {})


def property_env_name(prop: str) -> str:
    """The KAFKA_* variable for a server property (inverse of the image's env mapping)."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()
