"""A real Kafka cluster in Docker, on the docker SDK's public API, in one of three modes.

- kraft: every node is broker and KRaft controller (the default, 3.3+);
- kraft-dedicated: 3 controller-only nodes (ids 101..) plus the brokers (ids 1..N);
- zookeeper: a ZooKeeper ensemble of 1 or 3 servers plus the brokers (releases before 4.0).
`nodes` are always the brokers, so `node:<id>` names a broker in every mode; `quorum` are the
KRaft controllers, `ensemble` the ZooKeeper servers, `all_nodes` every container.

Clients reach broker i at <docker host>:<host port i>, a port chosen when the cluster is
created and kept for its life, so the advertised listener stays valid across kill/start
cycles; controllers and ZooKeeper servers publish no port. Restarts reuse the same
container (never remove it), so the log directories survive like a disk would.

The docker host is the one Testcontainers reports (its DockerClient.host(): the
TESTCONTAINERS_HOST_OVERRIDE, else DOCKER_HOST's host name, else this machine), so a remote
DOCKER_HOST works; for Docker-in-Docker through a mounted socket set the override to the
address the published ports answer at. Not get_container_host_ip(): the advertised listener
must be known before any container exists. On a local engine the ports are published on
127.0.0.1 only, as unauthenticated brokers should be; on a remote one on all its interfaces,
or this machine could not reach them. Containers are created with the docker SDK because
Testcontainers' public builders cannot publish a port on one interface only.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import os
import socket
import tarfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import docker
import docker.errors
import docker.models.containers
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from testcontainers.core.docker_client import DockerClient as TestcontainersClient

from harness.platform.versions import (
    Feature,
    KafkaVersion,
    Mode,
    VersionError,
    mode_refusal,
    supports,
)
from harness.settings import Settings, load_settings

# Ryuk (testcontainers' reaper) would have to be pulled from a registry; we clean up by label.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

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


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, not led by '-'.

    The storage tool's argument parser reads an id starting with '-' as an option (Kafka's
    own Uuid.randomUuid() retries for the same reason).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


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

    def refusal(self) -> str | None:
        """None when this shape can run, else what is wrong and the fix."""
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


def plan_nodes(
    topology: Topology,
    cluster_id: str,
    host_ports: list[int],
    extra: dict[str, str] | None = None,
    advertised_host: str = "127.0.0.1",
) -> list[NodePlan]:
    """Every node of the cluster, ZooKeeper servers and controllers before the brokers.

    `host_ports` holds one client port per broker; `extra` (server properties) goes to every
    Kafka node, controllers included: in KRaft the controller elects leaders, so settings such
    as unclean.leader.election.enable take effect there."""
    plans = [
        NodePlan(Role.ZOOKEEPER, i, zookeeper_env(i, topology.zookeeper_nodes))
        for i in range(1, topology.zookeeper_nodes + 1)
        if topology.mode is Mode.ZOOKEEPER
    ]
    if topology.mode is Mode.KRAFT_DEDICATED:
        plans += [
            NodePlan(Role.CONTROLLER, i, controller_env(i, topology, cluster_id, extra))
            for i in topology.controller_ids()
        ]
    for node_id, port in enumerate(host_ports, start=1):
        if topology.mode is Mode.KRAFT:
            env = broker_env(node_id, port, topology.brokers, cluster_id, extra, advertised_host)
            plans.append(NodePlan(Role.COMBINED, node_id, env, port))
        else:
            env = mode_broker_env(node_id, port, topology, cluster_id, extra, advertised_host)
            plans.append(NodePlan(Role.BROKER, node_id, env, port))
    return plans


def _listeners(node_id: int, host_port: int, advertised_host: str) -> dict[str, str]:
    """A broker's INTERNAL (between nodes) and EXTERNAL (clients on the host) listeners."""
    return {
        "KAFKA_LISTENERS": f"INTERNAL://:{INTERNAL_PORT},EXTERNAL://:{CLIENT_PORT}",
        "KAFKA_ADVERTISED_LISTENERS": f"INTERNAL://kafka-{node_id}:{INTERNAL_PORT},"
        f"EXTERNAL://{advertised_host}:{host_port}",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
    }


def _cluster_settings(brokers: int, version: KafkaVersion) -> dict[str, str]:
    """Settings of the harness's test clusters, as far as `version` knows them."""
    env = {
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
        env[property_env_name(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def broker_env(
    node_id: int,
    host_port: int,
    brokers: int,
    cluster_id: str,
    extra: dict[str, str] | None = None,
    advertised_host: str = "127.0.0.1",
) -> dict[str, str]:
    """The environment of combined node `node_id` (kraft mode), in the env convention of the
    apache/kafka image.

    Clients are told to reach the node at `advertised_host`:`host_port`."""
    topology = Topology(Mode.KRAFT, brokers=brokers)
    env = {
        "CLUSTER_ID": cluster_id,
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": "broker,controller",
        **_listeners(node_id, host_port, advertised_host),
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "EXTERNAL:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": topology.voters(),
        **_cluster_settings(brokers, topology.version),
    }
    env["KAFKA_LISTENERS"] = (
        f"INTERNAL://:{INTERNAL_PORT},CONTROLLER://:{CONTROLLER_PORT},EXTERNAL://:{CLIENT_PORT}"
    )
    return _with_extra(env, extra)


def mode_broker_env(
    node_id: int,
    host_port: int,
    topology: Topology,
    cluster_id: str,
    extra: dict[str, str] | None = None,
    advertised_host: str = "127.0.0.1",
) -> dict[str, str]:
    """The environment of broker-only node `node_id` in kraft-dedicated or zookeeper mode."""
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
    else:
        env |= {
            "CLUSTER_ID": cluster_id,
            "KAFKA_NODE_ID": str(node_id),
            "KAFKA_PROCESS_ROLES": "broker",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "EXTERNAL:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": topology.voters(),
        }
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
        "KAFKA_CONTROLLER_QUORUM_VOTERS": topology.voters(),
        "KAFKA_LOG_DIRS": LOG_DIR,
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


@dataclass
class KafkaNode:
    """One container of the cluster (a broker, a controller or a ZooKeeper server);
    lifecycle calls never remove the container."""

    node_id: int
    host_port: int  # the published client port; 0 for nodes clients never reach
    container: docker.models.containers.Container
    host: str = "127.0.0.1"  # where this process reaches host_port (the docker host)
    role: Role = Role.COMBINED

    @property
    def hostname(self) -> str:
        return hostname_of(self.role, self.node_id)

    @property
    def address(self) -> str:
        """host:port at which clients of this process reach the node."""
        return f"{self.host}:{self.host_port}"

    @property
    def docker(self) -> docker.models.containers.Container:
        return self.container

    def state(self) -> str:
        """Docker's state of the container: running, paused, exited, ..."""
        wrapped = self.docker
        wrapped.reload()
        return wrapped.status

    def kill(self) -> None:
        """SIGKILL the broker process (the OS page cache survives, as with a process crash)."""
        self.docker.kill(signal="SIGKILL")

    def stop(self, timeout_s: int = 60) -> None:
        """SIGTERM and wait up to `timeout_s` for Kafka's controlled shutdown to finish."""
        self.docker.stop(timeout=timeout_s)

    def start(self) -> None:
        """Start the stopped or killed container again, with its log directory intact."""
        self.docker.start()

    def pause(self, attempts: int = 10) -> None:
        """Freeze every process of the node (cgroup freezer), retrying a transient refusal.

        With cgroup v1 the freezer gives up ("unable to freeze") when a task does not stop
        in time, e.g. a JVM busy starting; a moment later the same request succeeds.
        """
        for attempt in range(attempts):
            try:
                self.docker.pause()
                return
            except docker.errors.APIError as exc:
                if "unable to freeze" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def unpause(self) -> None:
        """Thaw a paused node."""
        self.docker.unpause()

    def exec(self, argv: list[str]) -> tuple[int, str]:
        """Run `argv` inside the node; return exit code and combined output."""
        result = self.docker.exec_run(argv)
        return result.exit_code, result.output.decode(errors="replace")

    def read_files(self, path: str) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
        """The regular files under `path` (works on a stopped container): archive name ->
        (tar header with owner and mode, contents). Names start with the folder's own name."""
        stream, _ = self.docker.get_archive(path)
        files = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            for member in archive.getmembers():
                if member.isfile():
                    extracted = archive.extractfile(member)
                    files[member.name] = (member, extracted.read() if extracted else b"")
        return files

    def archive(self, path: str) -> Iterator[bytes] | None:
        """The tar stream of `path` in chunks, as Docker sends it (works on a stopped
        container); None when the path does not exist. Names start with the path's own name."""
        try:
            stream, _ = self.docker.get_archive(path)
        except docker.errors.NotFound:
            return None
        return stream

    def write_files(self, parent: str, files: dict[str, tuple[tarfile.TarInfo, bytes]]) -> None:
        """Overwrite files below `parent` (archive names as `read_files` gives them), keeping
        each header's owner and mode; works on a stopped container."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, (header, data) in files.items():
                member = copy.copy(header)
                member.name, member.size = name, len(data)
                archive.addfile(member, io.BytesIO(data))
        if not self.docker.put_archive(parent, buffer.getvalue()):
            raise ClusterError(f"{self.hostname}: could not write files below {parent}")

    def ip(self, network: str) -> str:
        """The node's address on the cluster's Docker network."""
        wrapped = self.docker
        wrapped.reload()
        return wrapped.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]

    def logs(self) -> bytes:
        """Everything the broker wrote to stdout/stderr, across restarts."""
        return self.docker.logs(stdout=True, stderr=True)

    def zookeeper_serving(self) -> bool:
        """Whether this ZooKeeper server answers requests (standalone, or in a quorum)."""
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{ZOOKEEPER_PORT} && printf srvr >&3 && cat <&3"
        try:
            code, out = self.exec(["bash", "-c", probe])
        except docker.errors.APIError:
            return False
        return code == 0 and "Mode: " in out

    def controller_vote(self) -> tuple[int, int] | None:
        """(leader epoch, leader id) of the KRaft quorum as this node last recorded it."""
        path = f"{LOG_DIR}/__cluster_metadata-0/quorum-state"
        try:
            code, out = self.exec(["cat", path])
        except docker.errors.APIError:
            return None
        if code != 0:
            return None
        data = json.loads(out).get("data", json.loads(out))
        leader = data.get("leaderId", -1)
        return (data.get("leaderEpoch", -1), leader) if leader >= 0 else None


def _vote_if_running(node: KafkaNode) -> tuple[int, int] | None:
    """The node's controller vote, None if it is not running or has none."""
    return node.controller_vote() if node.state() == "running" else None


@dataclass
class KafkaCluster:
    """A cluster of `brokers` brokers on a private Docker network, in `mode` (see the module
    docstring); `version` is the image's Kafka release (the settings' default when None)."""

    image: str
    brokers: int = 3
    broker_config: dict[str, str] = field(default_factory=dict)
    host_ports: list[int] | None = None
    settings: Settings = field(default_factory=load_settings)
    cluster_id: str = field(default_factory=new_cluster_id)
    nodes: list[KafkaNode] = field(default_factory=list)  # the brokers, in id order
    network_name: str = ""
    host: str = ""  # the docker host (docker_host() when start() finds it empty)
    mode: Mode | str = Mode.KRAFT
    version: str | None = None
    controllers: int = 3  # controller-only nodes, kraft-dedicated mode
    zookeeper_nodes: int = 1  # ZooKeeper servers, zookeeper mode
    quorum: list[KafkaNode] = field(default_factory=list)  # the KRaft controllers
    ensemble: list[KafkaNode] = field(default_factory=list)  # the ZooKeeper servers
    _network = None
    _admin: AdminClient | None = None

    @property
    def topology(self) -> Topology:
        """Mode, version and node counts; ClusterError naming the fix if they cannot run."""
        try:
            topology = Topology(
                Mode(self.mode),
                KafkaVersion.parse(self.version or self.settings.kafka_version),
                self.brokers,
                self.controllers,
                self.zookeeper_nodes,
            )
        except (ValueError, VersionError) as exc:
            modes = ", ".join(mode.value for mode in Mode)
            raise ClusterError(f"{exc} (modes: {modes})") from exc
        refusal = topology.refusal()
        if refusal:
            raise ClusterError(refusal)
        return topology

    @property
    def tag(self) -> str:
        """Short id used in container and network names."""
        return self.cluster_id[:8].lower().replace("_", "x").replace("-", "y")

    @property
    def labels(self) -> dict[str, str]:
        """Labels that let a later run find and remove what a crashed run left behind."""
        return {
            self.settings.label: self.cluster_id,
            f"{self.settings.label}.pid": str(os.getpid()),
        }

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def all_nodes(self) -> list[KafkaNode]:
        """Every container: ZooKeeper servers, controller-only nodes, then the brokers."""
        dedicated = [node for node in self.quorum if node.role is Role.CONTROLLER]
        return [*self.ensemble, *dedicated, *self.nodes]

    def node(self, node_id: int) -> KafkaNode:
        """The broker with this id, else the controller-only node with this id."""
        for node in (*self.nodes, *self.quorum):
            if node.node_id == node_id:
                return node
        raise ClusterError(f"no broker or controller with id {node_id} in this cluster")

    def zookeeper(self, node_id: int) -> KafkaNode:
        """The ZooKeeper server with this id (1..zookeeper_nodes)."""
        for node in self.ensemble:
            if node.node_id == node_id:
                return node
        raise ClusterError(f"no ZooKeeper server with id {node_id} in this cluster")

    def start(self, *, ready_timeout_s: float = 120.0) -> KafkaCluster:
        """Create network and containers, start all nodes, and wait until the cluster is ready."""
        topology = self.topology
        ports = self._choose_ports()
        client = docker.from_env()
        self.host = self.host or docker_host()
        self.network_name = f"kchaos-{self.tag}"
        self._network = client.networks.create(
            self.network_name, driver="bridge", labels=self.labels
        )
        started = time.monotonic()
        try:
            plans = plan_nodes(topology, self.cluster_id, ports, self.broker_config, self.host)
            for plan in plans:
                self._add(self._create_node(client, plan))
            # Brokers of ZooKeeper mode give up when ZooKeeper does not answer in time.
            for node in self.ensemble:
                node.container.start()
            if self.ensemble:
                for _ in _poll(ready_timeout_s, "ZooKeeper to serve", self._describe_failure):
                    if all(node.zookeeper_serving() for node in self.ensemble):
                        break
            for node in self.all_nodes:
                if node.role is not Role.ZOOKEEPER:
                    node.container.start()
            remaining = max(5.0, ready_timeout_s - (time.monotonic() - started))
            self.wait_ready(timeout_s=remaining)
        except BaseException:
            self.close()
            raise
        return self

    def _add(self, node: KafkaNode) -> None:
        """File a created node under its role(s)."""
        if node.role.is_broker:
            self.nodes.append(node)
        if node.role in (Role.COMBINED, Role.CONTROLLER):
            self.quorum.append(node)
        if node.role is Role.ZOOKEEPER:
            self.ensemble.append(node)

    def _choose_ports(self) -> list[int]:
        if self.host_ports is None:
            return free_host_ports(self.brokers)
        if len(self.host_ports) != self.brokers:
            raise ClusterError(
                f"{len(self.host_ports)} host ports given for {self.brokers} brokers. "
                "Fix: give one port per broker."
            )
        busy = [port for port in self.host_ports if port_in_use(port)]
        if busy:
            raise ClusterError(
                f"host port(s) {busy} on 127.0.0.1 are already in use. Fix: stop "
                "what listens there, or choose other ports (or none, to pick free ones)."
            )
        return list(self.host_ports)

    def _create_node(self, client: docker.DockerClient, plan: NodePlan) -> KafkaNode:
        """Create (not start) a node's container; a broker's client port is published."""
        ports = {}
        if plan.host_port:
            ports = {f"{CLIENT_PORT}/tcp": (publish_address(self.host), plan.host_port)}
        container = client.containers.create(
            self.image,
            name=f"kchaos-{self.tag}-{plan.hostname}",
            hostname=plan.hostname,
            environment=plan.env,
            ports=ports,
            network=self.network_name,
            # Network aliases make each node's name resolvable to the others on this network.
            networking_config={
                self.network_name: client.api.create_endpoint_config(aliases=[plan.hostname])
            },
            cap_add=["NET_ADMIN"],
            labels=self.labels,
            detach=True,
        )
        return KafkaNode(plan.node_id, plan.host_port, container, self.host, plan.role)

    def admin(self) -> AdminClient:
        """The cluster's AdminClient (one per cluster: a dropped client aborts its requests)."""
        if self._admin is None:
            self._admin = AdminClient(
                {
                    "bootstrap.servers": self.bootstrap_servers,
                    "socket.timeout.ms": 10000,
                    "log_level": 0,
                    "logger": _silent_logger(),
                }
            )
        return self._admin

    def metadata(self, topic: str | None = None, timeout_s: float = 5.0) -> ClusterMetadata:
        """Cluster metadata (brokers, topics, partitions) from whichever broker answers.

        The shared client may be stuck on a frozen or dead broker (a paused container keeps
        its connections open but never answers): then ask the running brokers only, through
        a client bootstrapped from them alone.
        """
        try:
            return self.admin().list_topics(topic=topic, timeout=timeout_s)
        except KafkaException:
            running = [n.address for n in self.nodes if n.state() == "running"]
            if not running:
                raise
            admin = AdminClient(
                {"bootstrap.servers": ",".join(running), "log_level": 0, "logger": _silent_logger()}
            )
            return admin.list_topics(topic=topic, timeout=timeout_s)

    def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
        """Leader, replicas and ISR of every partition of `topic`.

        A broker that has not applied the topic's creation yet answers "unknown topic" for a
        moment after it exists (metadata reaches brokers one by one): that is retried until
        `timeout_s` passes, then raised as ClusterError.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            meta = self.metadata(topic, max(0.5, deadline - time.monotonic())).topics[topic]
            lagging = (
                meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            )
            if not lagging or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if meta.error is not None:
            raise ClusterError(f"topic {topic}: {meta.error}")
        return [
            PartitionState(
                p.id, p.leader if p.leader >= 0 else None, tuple(p.replicas), tuple(p.isrs)
            )
            for p in sorted(meta.partitions.values(), key=lambda p: p.id)
        ]

    def node_ips(self) -> dict[int, str]:
        """Each node's address on the cluster network, from one network inspection."""
        network = docker.from_env().networks.get(self.network_name)
        by_container = {
            cid: info["IPv4Address"].split("/")[0]
            for cid, info in network.attrs["Containers"].items()
        }
        return {node.node_id: by_container[node.docker.id] for node in self.nodes}

    def leader_of_from(self, topic: str, partition: int, exclude: int) -> int | None:
        """The partition's leader as the nodes other than `exclude` report it.

        A node cut off from the others still believes it leads; ask the majority's side.
        """
        servers = ",".join(n.address for n in self.nodes if n.node_id != exclude)
        admin = AdminClient(
            {"bootstrap.servers": servers, "log_level": 0, "logger": _silent_logger()}
        )
        with contextlib.suppress(KafkaException, KeyError):
            leader = admin.list_topics(topic, timeout=3).topics[topic].partitions[partition].leader
            return leader if leader >= 0 else None
        return None

    def active_controller(self) -> int | None:
        """Node id of the active controller, None while there is none.

        KRaft: the newest quorum leader any live controller saw (a broker id in kraft mode, a
        controller-only id in kraft-dedicated mode). ZooKeeper mode: the broker the metadata
        names as controller (the one holding the /controller znode)."""
        if not self.quorum:
            with contextlib.suppress(KafkaException):
                controller = self.metadata(timeout_s=3.0).controller_id
                return controller if controller >= 0 else None
            return None
        # One exec per node, in parallel: a fault aimed at the controller waits for this.
        with ThreadPoolExecutor(len(self.quorum)) as pool:
            votes = [vote for vote in pool.map(_vote_if_running, self.quorum) if vote is not None]
        return max(votes)[1] if votes else None

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        """Create `topic` and wait until every partition has a leader and a full ISR."""
        futures = self.admin().create_topics(
            [NewTopic(topic, partitions, replication_factor, config=config or {})],
            operation_timeout=timeout_s,
        )
        futures[topic].result(timeout=timeout_s)
        self.wait_full_isr(topic, timeout_s=timeout_s)

    def wait_full_isr(self, topic: str, timeout_s: float = 60.0) -> float:
        """Wait until every partition has a leader and ISR == replicas; return seconds waited."""
        started = time.monotonic()
        for _ in _poll(timeout_s, f"full ISR on {topic}"):
            with contextlib.suppress(KafkaException, ClusterError, KeyError):
                states = self.partition_states(topic, timeout_s=2.0)
                if states and all(
                    s.leader is not None and set(s.isr) == set(s.replicas) for s in states
                ):
                    return time.monotonic() - started
        raise AssertionError("unreachable")

    def wait_ready(self, timeout_s: float = 120.0) -> float:
        """Wait until all brokers registered and an RF=brokers topic has a full ISR."""
        started = time.monotonic()
        for _ in _poll(timeout_s, f"{self.brokers} brokers to register", self._describe_failure):
            with contextlib.suppress(KafkaException):
                if len(self.metadata(timeout_s=2.0).brokers) == self.brokers:
                    break
        remaining = max(5.0, timeout_s - (time.monotonic() - started))
        if READY_TOPIC not in self.metadata().topics:
            futures = self.admin().create_topics([NewTopic(READY_TOPIC, 1, self.brokers)])
            with contextlib.suppress(KafkaException):  # already created by an earlier attempt
                futures[READY_TOPIC].result(timeout=remaining)
        self.wait_full_isr(READY_TOPIC, timeout_s=remaining)
        return time.monotonic() - started

    def _describe_failure(self) -> str:
        lines = []
        for node in self.all_nodes:
            state = node.state()
            tail = node.logs().decode(errors="replace").strip().splitlines()[-3:]
            lines.append(f"  {node.hostname}: {state}; last log lines: {' | '.join(tail)}")
        return "\n".join(lines)

    def collect_logs(self, folder: Path) -> list[Path]:
        """Write each node's full log to `folder`/<hostname>.log (kafka-<id>.log for brokers,
        controller-<id>.log, zookeeper-<id>.log); return the paths, brokers' first."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for node in (*self.nodes, *(n for n in self.all_nodes if not n.role.is_broker)):
            path = folder / f"{node.hostname}.log"
            with contextlib.suppress(docker.errors.APIError):
                path.write_bytes(node.logs())
                paths.append(path)
        return paths

    def close(self) -> None:
        """Remove every container and the network, whatever state they are in."""
        client = docker.from_env()
        for node in self.all_nodes:
            # Any state: also a node whose start an interrupt cut short (no container object
            # yet); what the engine created anyway is reaped by label.
            with contextlib.suppress(Exception):
                node.docker.remove(force=True, v=True)
        self.nodes, self.quorum, self.ensemble = [], [], []
        self._admin = None
        if self.network_name:
            with contextlib.suppress(docker.errors.APIError):
                client.networks.get(self.network_name).remove()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _poll(timeout_s: float, what: str, describe=None, interval_s: float = 0.25) -> Iterator[None]:
    """Yield until the caller breaks; raise ClusterError naming `what` once `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        yield
        time.sleep(interval_s)
    detail = f"\n{describe()}" if describe else ""
    raise ClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}.{detail}")


def _silent_logger():
    """A logger that drops librdkafka's connection-refused chatter during restarts."""
    import logging

    logger = logging.getLogger("kchaos.librdkafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def remove_leftovers(
    settings: Settings | None = None, *, all_owners: bool = False, owner: int | None = None
) -> int:
    """Remove containers and networks of clusters whose harness process is gone; return count.

    With `all_owners`, also those of live processes (for `kafka-chaos clean --all`); with
    `owner`, also those of that process (the harness's own, after an interrupt).
    """
    settings = settings or load_settings()
    client = docker.from_env()
    pid_label = f"{settings.label}.pid"

    def reapable(labels: dict[str, str] | None) -> bool:
        pid = (labels or {}).get(pid_label)
        return all_owners or (owner is not None and pid == str(owner)) or not _owner_alive(pid)

    removed = 0
    for container in client.containers.list(all=True, filters={"label": settings.label}):
        if reapable(container.labels):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
                removed += 1
    for network in client.networks.list(filters={"label": settings.label}):
        if reapable(network.attrs.get("Labels")):
            with contextlib.suppress(docker.errors.APIError):
                network.remove()
                removed += 1
    return removed


def _owner_alive(pid: str | None) -> bool:
    if not pid or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
