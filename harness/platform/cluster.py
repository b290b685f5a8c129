"""A real Kafka cluster in Docker, its nodes and network Testcontainers containers
(harness/platform/containers.py), in one of three modes.

- kraft: every node is broker and KRaft controller (the default, 3.3+);
- kraft-dedicated: 3 controller-only nodes (ids 101..) plus the brokers (ids 1..N);
- zookeeper: a ZooKeeper ensemble of 1 or 3 servers plus the brokers (releases before 4.0).
`nodes` are always the brokers, so `node:<id>` names a broker in every mode; `quorum` are the
KRaft controllers, `ensemble` the ZooKeeper servers, `all_nodes` every container.

Starting: the network, then the ZooKeeper servers together (each ready when it answers
`srvr`), then every other node together (each ready when it logs that its server started),
then the cluster's own condition: every broker registered and a topic replicated on all of
them with a full ISR.

Clients reach broker i at <docker host>:<host port i>, a port chosen when the cluster is
created and kept for its life, so the advertised listener stays valid across kill/start cycles;
controllers and ZooKeeper servers publish no port. Restarts reuse the same container, so the
log directories survive like a disk would.

The docker host is the one Testcontainers reports (its DockerClient.host(): the
TESTCONTAINERS_HOST_OVERRIDE, else DOCKER_HOST's host name, else this machine), so a remote
DOCKER_HOST works; for Docker-in-Docker through a mounted socket set the override to the
address the published ports answer at (not get_container_host_ip(): the advertised listener
must be known before any container exists). On a local engine the ports are published on
127.0.0.1 only, as unauthenticated brokers should be; on a remote one on all its interfaces.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.models.containers
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic, TopicMetadata

from harness.platform import disk_layer
from harness.platform.containers import (
    ClusterNetwork,
    NodeContainer,
    start_together,
    use_ryuk_where_possible,
)
from harness.platform.node import KafkaNode, vote_if_running
from harness.platform.sidecar import NETWORK_TOOLS, ToolsHelper, remove_helpers
from harness.platform.topology import (
    READY_TOPIC,
    ClusterError,
    NodePlan,
    PartitionState,
    Role,
    Topology,
    docker_host,
    free_host_ports,
    new_cluster_id,
    plan_nodes,
    port_in_use,
    publish_address,
    with_jvm_options,
)
from harness.platform.versions import Feature, Mode, supports
from harness.rundir.release import KafkaVersion, VersionError
from harness.settings import Settings, load_settings
from harness.waiting import Deadline, WaitTimeout, poll_until, wait_for


@dataclass
class KafkaCluster:
    """A cluster of `brokers` brokers on a private Docker network, in `mode` (see the module
    docstring); `version` is the image's Kafka release (the settings' default when None)."""

    image: str
    brokers: int = 3
    broker_config: dict[str, str] = field(default_factory=dict)  # every Kafka node's
    controller_config: dict[str, str] = field(default_factory=dict)  # controller-only nodes'
    host_ports: list[int] | None = None
    settings: Settings = field(default_factory=load_settings)
    cluster_id: str = field(default_factory=new_cluster_id)
    nodes: list[KafkaNode] = field(default_factory=list)  # the brokers, in id order
    network: ClusterNetwork | None = None  # the cluster's network, once start() made it
    network_name: str = ""
    host: str = ""  # the docker host (docker_host() when start() finds it empty)
    mode: Mode | str = Mode.KRAFT
    version: str | None = None
    controllers: int = 3  # controller-only nodes, kraft-dedicated mode
    zookeeper_nodes: int = 1  # ZooKeeper servers, zookeeper mode
    dynamic_quorum: bool = False  # KIP-853 (topology.Topology.dynamic_quorum)
    quorum: list[KafkaNode] = field(default_factory=list)  # the KRaft controllers
    jvm_options: str | None = None  # the Kafka JVMs' options (topology.with_jvm_options)
    ensemble: list[KafkaNode] = field(default_factory=list)  # the ZooKeeper servers
    # The chaosfs binary (harness.platform.disk_layer) to mount under every Kafka node's log
    # directory, for the disk faults (harness.platform.disk_layer); None: no layer.
    disk_layer: Path | None = None
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
                self.dynamic_quorum,
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
        return _by_id((*self.nodes, *self.quorum), node_id, "broker or controller")

    def zookeeper(self, node_id: int) -> KafkaNode:
        """The ZooKeeper server with this id (1..zookeeper_nodes)."""
        return _by_id(self.ensemble, node_id, "ZooKeeper server")

    def start(self, *, ready_timeout_s: float = 120.0) -> KafkaCluster:
        """Create the network and the nodes, start them (ZooKeeper first), and wait until the
        cluster is ready (see the module docstring)."""
        topology = self.topology
        ports = self._choose_ports()
        use_ryuk_where_possible(docker.from_env())
        self.host = self.host or docker_host()
        self.network = ClusterNetwork(f"kchaos-{self.tag}", self.labels).create()
        self.network_name = self.network.name
        deadline = Deadline.after(ready_timeout_s)
        try:
            extra, controllers = self.broker_config, self.controller_config
            plans = plan_nodes(topology, self.cluster_id, ports, extra, self.host, controllers)
            for plan in with_jvm_options(plans, self.jvm_options):
                self._add(self._node(plan))
            # Brokers of ZooKeeper mode give up when ZooKeeper does not answer in time.
            others = [n for n in self.all_nodes if n.role is not Role.ZOOKEEPER]
            for group in ([n.container for n in self.ensemble], [n.container for n in others]):
                start_together(group, max(5.0, deadline.remaining()))
            self.wait_ready(timeout_s=max(5.0, deadline.remaining()))
            self._choose_network_tools()
            self._write_back_disks()
        except (TimeoutError, RuntimeError) as exc:  # a node not ready, or exited
            described = str(exc) if isinstance(exc, ClusterError) else self._describe_failure()
            self._failed()
            if isinstance(exc, ClusterError):
                raise
            raise ClusterError(f"{exc}\n{described}") from exc
        except BaseException:
            self._failed()
            raise
        return self

    def _failed(self) -> None:
        """Keep what the nodes said for collect_logs (closing removes them), then close."""
        self._logs_at_failure = self._node_logs()
        self.close()

    def _choose_network_tools(self) -> None:
        """Where the nodes' network commands run: in the nodes when their image has iptables
        and tc, else in a helper per node (any broker image then gets network faults)."""
        probe = " && ".join(f"command -v {tool}" for tool in NETWORK_TOOLS)
        code, _ = self.nodes[0].exec(["sh", "-c", probe])
        if code != 0:
            for node in self.all_nodes:
                node.network_tools = ToolsHelper(self, node)

    def _write_back_disks(self) -> None:
        """Make what the nodes wrote while starting durable on their disk layers, as a machine
        that ran a while would have written it back: Kafka's storage formatter does not fsync
        bootstrap.checkpoint, so a power loss would otherwise leave a node that never starts."""
        for node in self.all_nodes:
            if node.disk_layered:
                try:
                    disk_layer.control(node, "sync")
                except disk_layer.DiskLayerError as exc:
                    raise ClusterError(f"the disk layer did not answer: {exc}") from exc

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

    def _node(self, plan: NodePlan) -> KafkaNode:
        """A node of the plan, its container not created yet (start_together does)."""
        container = NodeContainer(
            self.image,
            plan,
            name=f"kchaos-{self.tag}-{plan.hostname}",
            network=self._network(),
            labels=self.labels,
            publish_on=publish_address(self.host),
            layer=self.disk_layer,
        )
        node = KafkaNode(plan.node_id, plan.host_port, container, self.host, plan.role)
        if container.layered:
            node.disk_dir = disk_layer.DISK_DIR
        return node

    def _network(self) -> ClusterNetwork:
        if self.network is None:
            raise ClusterError("the cluster is not started: call start() first")
        return self.network

    def admin(self) -> AdminClient:
        """The cluster's AdminClient (one per cluster: a dropped client aborts its requests)."""
        if self._admin is None:
            self._admin = _quiet_admin(self.bootstrap_servers, {"socket.timeout.ms": 10000})
        return self._admin

    def metadata(self, topic: str | None = None, timeout_s: float = 5.0) -> ClusterMetadata:
        """Cluster metadata (brokers, topics, partitions) from whichever broker answers.

        While every broker's container runs, the shared client asks. Otherwise, and when the
        shared client fails, a client bootstrapped from the running brokers alone asks: the
        shared one may be stuck on a paused broker, which keeps its connections open and never
        answers, and would hold each read for its whole timeout.
        """
        running = [n.address for n in self.nodes if n.state() == "running"]
        if not running or len(running) == len(self.nodes):
            try:
                return self.admin().list_topics(topic=topic, timeout=timeout_s)
            except KafkaException:
                if not running:
                    raise
        return _quiet_admin(",".join(running)).list_topics(topic=topic, timeout=timeout_s)

    def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
        """Leader, replicas and ISR of every partition of `topic`.

        A broker that has not applied the topic's creation yet answers "unknown topic" for a
        moment after it exists (metadata reaches brokers one by one): that is retried until
        `timeout_s` passes, then raised as ClusterError.
        """
        deadline = Deadline.after(timeout_s)
        answers: list[TopicMetadata] = []

        def known() -> bool:
            answers.append(self.metadata(topic, max(0.5, deadline.remaining())).topics[topic])
            error = answers[-1].error
            return error is None or error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART

        wait_for(known, timeout_s, interval_s=0.1)
        meta = answers[-1]  # known, or still lagging when the time ran out
        if meta.error is not None:
            raise ClusterError(f"topic {topic}: {meta.error}")
        ordered = supports(self.topology.version, Feature.ASSIGNMENT_ORDER)
        return [
            PartitionState(
                p.id, p.leader if p.leader >= 0 else None, (*p.replicas,), (*p.isrs,), ordered
            )
            for p in sorted(meta.partitions.values(), key=lambda p: p.id)
        ]

    def node_ips(self) -> dict[int, str]:
        """Each running node's address on the cluster network, from one network inspection
        (a node that is down is on no network, and left out)."""
        network = docker.from_env().networks.get(self.network_name)
        by_container = {
            cid: info["IPv4Address"].split("/")[0]
            for cid, info in network.attrs["Containers"].items()
        }
        return {
            node.node_id: by_container[node.docker.id]
            for node in self.nodes
            if node.docker.id in by_container
        }

    def leader_of_from(self, topic: str, partition: int, exclude: int) -> int | None:
        """The partition's leader as the nodes other than `exclude` report it.

        A node cut off from the others still believes it leads; ask the majority's side.
        """
        servers = ",".join(n.address for n in self.nodes if n.node_id != exclude)
        admin = _quiet_admin(servers)
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
            votes = [vote for vote in pool.map(vote_if_running, self.quorum) if vote is not None]
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

        def full() -> bool:
            states = self.partition_states(topic, timeout_s=2.0)
            return bool(states) and all(
                s.leader is not None and set(s.isr) == set(s.replicas) for s in states
            )

        # Metadata is briefly unreadable or incomplete while brokers start or lead anew.
        _wait(
            full,
            timeout_s,
            f"full ISR on {topic}",
            not_yet=(KafkaException, ClusterError, KeyError),
        )
        return time.monotonic() - started

    def wait_ready(self, timeout_s: float = 120.0) -> float:
        """Wait until all brokers registered and an RF=brokers topic has a full ISR."""
        started = time.monotonic()
        deadline = Deadline.after(timeout_s)
        _wait(
            lambda: len(self.metadata(timeout_s=2.0).brokers) == self.brokers,
            timeout_s,
            f"{self.brokers} brokers to register",
            self._describe_failure,
            not_yet=(KafkaException,),  # no broker answers yet
        )
        remaining = max(5.0, deadline.remaining())
        if READY_TOPIC not in self.metadata().topics:
            futures = self.admin().create_topics([NewTopic(READY_TOPIC, 1, self.brokers)])
            with contextlib.suppress(KafkaException):  # already created by an earlier attempt
                futures[READY_TOPIC].result(timeout=remaining)
        self.wait_full_isr(READY_TOPIC, timeout_s=remaining)
        return time.monotonic() - started

    def _describe_failure(self) -> str:
        lines = []
        for node in self.all_nodes:
            try:
                state = node.state()
            except Exception:  # never created: an earlier node's start failed
                continue
            tail = (node.logs() or b"").decode(errors="replace").strip().splitlines()[-3:]
            lines.append(f"  {node.hostname}: {state}; last log lines: {' | '.join(tail)}")
        return "\n".join(lines)

    def collect_logs(self, folder: Path) -> list[Path]:
        """Write each node's full log to `folder`/<hostname>.log (kafka-<id>.log for brokers,
        controller-<id>.log, zookeeper-<id>.log), also after a start that failed and removed
        the containers; return the paths, brokers' first."""
        folder.mkdir(parents=True, exist_ok=True)
        logs = {**getattr(self, "_logs_at_failure", {}), **self._node_logs()}
        paths = [folder / f"{hostname}.log" for hostname in logs]
        for path, data in zip(paths, logs.values(), strict=True):
            path.write_bytes(data)
        return paths

    def _node_logs(self) -> dict[str, bytes]:
        """Each node's log by host name, brokers first; nodes whose log is gone left out."""
        nodes = (*self.nodes, *(n for n in self.all_nodes if not n.role.is_broker))
        return {n.hostname: data for n in nodes if (data := n.logs()) is not None}

    def remove_helpers(self) -> int:
        """Stop and remove the helper containers in the nodes' namespaces; return the count."""
        return remove_helpers(self)

    def close(self) -> None:
        """Remove every container and the network, whatever state they are in."""
        # Helpers first: each lives in a node's network namespace (harness/platform/sidecar.py).
        with contextlib.suppress(Exception):
            self.remove_helpers()
        for node in self.all_nodes:
            # Any state: also a node whose start an interrupt cut short (no container yet);
            # what the engine created anyway is reaped by label. A paused node is thawed
            # first: the engine cannot kill a frozen process, and its forced removal then hangs
            # for minutes (seen with Docker 20.10 on cgroup v1).
            with contextlib.suppress(Exception):
                if node.state() == "paused":
                    node.unpause()
            with contextlib.suppress(Exception):
                node.container.stop(force=True, delete_volume=True)
        self.nodes, self.quorum, self.ensemble = [], [], []
        self._admin = None
        if self.network is not None:
            with contextlib.suppress(docker.errors.APIError, AssertionError):
                self.network.remove()
            self.network = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _by_id(nodes: Iterable[KafkaNode], node_id: int, what: str) -> KafkaNode:
    """The first of `nodes` with this id; ClusterError naming `what` was asked for if none."""
    found = next((node for node in nodes if node.node_id == node_id), None)
    if found is None:
        raise ClusterError(f"no {what} with id {node_id} in this cluster")
    return found


def _wait(
    check: Callable[[], bool],
    timeout_s: float,
    what: str,
    describe: Callable[[], str] | None = None,
    not_yet: tuple[type[Exception], ...] = (),
) -> None:
    """poll_until `check` holds, an error of a `not_yet` type counting as not yet; the timeout
    raised as ClusterError, which the cluster's callers catch."""
    try:
        poll_until(
            check, timeout_s, what, describe=describe, retry_on=lambda e: isinstance(e, not_yet)
        )
    except WaitTimeout as exc:
        raise ClusterError(str(exc)) from exc


def _quiet_admin(servers: str, settings: dict[str, int] | None = None) -> AdminClient:
    """An AdminClient of `servers` (with librdkafka `settings`) whose logger drops
    librdkafka's connection-refused chatter during restarts."""
    import logging

    logger: Any = logging.getLogger("kchaos.librdkafka")  # a config value to librdkafka
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return AdminClient(
        {"bootstrap.servers": servers, **(settings or {}), "log_level": 0, "logger": logger}
    )
