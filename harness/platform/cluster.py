"""A real 3-node KRaft Kafka cluster in Docker, on the docker SDK's public API.

Each node is broker and controller. Clients reach node i at <docker host>:<host port i>, a
port chosen when the cluster is created and kept for its life, so the advertised listener
stays valid across kill/start cycles. Restarts reuse the same container (never remove it),
so the log directories survive like a disk would.

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
from pathlib import Path

import docker
import docker.errors
import docker.models.containers
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from testcontainers.core.docker_client import DockerClient as TestcontainersClient

from harness.settings import Settings, load_settings

# Ryuk (testcontainers' reaper) would have to be pulled from a registry; we clean up by label.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

INTERNAL_PORT = 9092
CONTROLLER_PORT = 9093
CLIENT_PORT = 9094
LOG_DIR = "/var/lib/kafka/data"
READY_TOPIC = "__kchaos_ready"


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


def broker_env(
    node_id: int,
    host_port: int,
    brokers: int,
    cluster_id: str,
    extra: dict[str, str] | None = None,
    advertised_host: str = "127.0.0.1",
) -> dict[str, str]:
    """The environment of node `node_id`, in the env convention of the apache/kafka image.

    Clients are told to reach the node at `advertised_host`:`host_port`."""
    voters = ",".join(f"{i}@kafka-{i}:{CONTROLLER_PORT}" for i in range(1, brokers + 1))
    env = {
        "CLUSTER_ID": cluster_id,
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"INTERNAL://:{INTERNAL_PORT},CONTROLLER://:{CONTROLLER_PORT},"
        f"EXTERNAL://:{CLIENT_PORT}",
        "KAFKA_ADVERTISED_LISTENERS": f"INTERNAL://kafka-{node_id}:{INTERNAL_PORT},"
        f"EXTERNAL://{advertised_host}:{host_port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "EXTERNAL:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": voters,
        "KAFKA_LOG_DIRS": LOG_DIR,
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": str(min(3, brokers)),
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": str(min(3, brokers)),
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }
    for key, value in (extra or {}).items():
        env[property_env_name(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def property_env_name(prop: str) -> str:
    """The KAFKA_* variable for a server property (inverse of the image's env mapping)."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()


@dataclass
class KafkaNode:
    """One broker+controller container; lifecycle calls never remove the container."""

    node_id: int
    host_port: int
    container: docker.models.containers.Container
    host: str = "127.0.0.1"  # where this process reaches host_port (the docker host)

    @property
    def hostname(self) -> str:
        return f"kafka-{self.node_id}"

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
    """A KRaft cluster of `brokers` combined nodes on a private Docker network."""

    image: str
    brokers: int = 3
    broker_config: dict[str, str] = field(default_factory=dict)
    host_ports: list[int] | None = None
    settings: Settings = field(default_factory=load_settings)
    cluster_id: str = field(default_factory=new_cluster_id)
    nodes: list[KafkaNode] = field(default_factory=list)
    network_name: str = ""
    host: str = ""  # the docker host (docker_host() when start() finds it empty)
    _network = None
    _admin: AdminClient | None = None

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

    def node(self, node_id: int) -> KafkaNode:
        """The node with this id."""
        return self.nodes[node_id - 1]

    def start(self, *, ready_timeout_s: float = 120.0) -> KafkaCluster:
        """Create network and containers, start all nodes, and wait until the cluster is ready."""
        ports = self._choose_ports()
        client = docker.from_env()
        self.host = self.host or docker_host()
        self.network_name = f"kchaos-{self.tag}"
        self._network = client.networks.create(
            self.network_name, driver="bridge", labels=self.labels
        )
        try:
            for node_id, port in enumerate(ports, start=1):
                self.nodes.append(self._create_node(client, node_id, port))
            for node in self.nodes:
                node.container.start()
            self.wait_ready(timeout_s=ready_timeout_s)
        except BaseException:
            self.close()
            raise
        return self

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

    def _create_node(self, client: docker.DockerClient, node_id: int, host_port: int) -> KafkaNode:
        """Create (not start) node `node_id`'s container, its client port published."""
        env = broker_env(
            node_id, host_port, self.brokers, self.cluster_id, self.broker_config, self.host
        )
        container = client.containers.create(
            self.image,
            name=f"kchaos-{self.tag}-kafka-{node_id}",
            hostname=f"kafka-{node_id}",
            environment=env,
            ports={f"{CLIENT_PORT}/tcp": (publish_address(self.host), host_port)},
            network=self.network_name,
            # Network aliases make kafka-N resolvable to the other nodes on this network.
            networking_config={
                self.network_name: client.api.create_endpoint_config(aliases=[f"kafka-{node_id}"])
            },
            cap_add=["NET_ADMIN"],
            labels=self.labels,
            detach=True,
        )
        return KafkaNode(node_id, host_port, container, self.host)

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
        """Cluster metadata (brokers, topics, partitions) from whichever broker answers."""
        return self.admin().list_topics(topic=topic, timeout=timeout_s)

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
        """Node id of the active KRaft controller: the newest quorum leader any live node saw."""
        # One exec per node, in parallel: a fault aimed at the controller waits for this.
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            votes = [vote for vote in pool.map(_vote_if_running, self.nodes) if vote is not None]
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
        for node in self.nodes:
            state = node.state()
            tail = node.logs().decode(errors="replace").strip().splitlines()[-3:]
            lines.append(f"  kafka-{node.node_id}: {state}; last log lines: {' | '.join(tail)}")
        return "\n".join(lines)

    def collect_logs(self, folder: Path) -> list[Path]:
        """Write each node's full log to `folder`/kafka-<id>.log; return the paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for node in self.nodes:
            path = folder / f"kafka-{node.node_id}.log"
            with contextlib.suppress(docker.errors.APIError):
                path.write_bytes(node.logs())
                paths.append(path)
        return paths

    def close(self) -> None:
        """Remove every container and the network, whatever state they are in."""
        client = docker.from_env()
        for node in self.nodes:
            # Any state: also a node whose start an interrupt cut short (no container object
            # yet); what the engine created anyway is reaped by label.
            with contextlib.suppress(Exception):
                node.docker.remove(force=True, v=True)
        self.nodes = []
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
