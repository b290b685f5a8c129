"""`KafkaChaosCluster`: the harness's multi-broker Kafka cluster as a Testcontainers-style
module any test suite composes with its own containers.

Configured with builder methods (release, mode, brokers, broker settings), started as a
context manager or by `start()`, it gives the brokers' addresses on the host
(`bootstrap_servers()`) and on its Testcontainers `network` (`network_bootstrap_servers()`, for
a team's own containers joined to it), the roles of its nodes, and the harness's faults as
methods. Faults and the verdict belong to a run (`run(root)`: a fresh topic, the journal of
the sends, the faults injected, the judgement), the same `Chaos` the pytest plugin's
`kafka_chaos` fixture hands out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from harness.platform.cluster import KafkaCluster
from harness.platform.containers import ClusterNetwork
from harness.platform.image import BrokerImage, ImageError, ensure_image
from harness.platform.leftovers import remove_cluster
from harness.platform.topology import INTERNAL_PORT
from harness.run.resolved import cluster_of
from harness.settings import load_settings
from kafka_chaos.testing.chaos import Chaos, experiment_of
from kafka_chaos.testing.clusters import LiveCluster, start_or_reap
from kafka_chaos.testing.errors import ChaosError, ChaosUsageError
from kafka_chaos.testing.faults import FaultHandle
from kafka_chaos.testing.options import ChaosOptions
from kafka_chaos.testing.verdict import Judge

__all__ = ["KafkaChaosCluster"]


class KafkaChaosCluster:
    """A Kafka cluster in Docker with faults: `KafkaChaosCluster().with_release("4.3.1")
    .with_brokers(3)`, then `with ... as cluster:` (or a pytest fixture that starts and stops
    it). One run at a time: `run(root)` opens it, the fault methods act in it, its `judge()`
    gives the verdict."""

    def __init__(self, release: str | None = None) -> None:
        self.options = ChaosOptions(version=release)
        self.cluster: KafkaCluster | None = None
        self.image: BrokerImage | None = None
        self._judge: Judge | None = None
        self._run: Chaos | None = None
        self._runs = 0

    # -- builders -------------------------------------------------------------------------

    def with_release(self, release: str) -> Self:
        """The Kafka release of the locally built broker image (built on first use)."""
        return self._with(version=release)

    def with_image(self, image: str) -> Self:
        """A prebuilt broker image instead, e.g. apache/kafka:4.3.1."""
        return self._with(image=image)

    def with_mode(self, mode: str) -> Self:
        """kraft, kraft-dedicated or zookeeper (releases before 4.0)."""
        return self._with(mode=mode)

    def with_brokers(self, brokers: int) -> Self:
        """How many brokers (3 unless told)."""
        return self._with(brokers=brokers)

    def with_broker_config(self, **settings: str | int | bool) -> Self:
        """server.properties settings of every broker, dots as underscores:
        `with_broker_config(unclean_leader_election_enable=True)`."""
        pairs = tuple(sorted((key.replace("_", "."), value) for key, value in settings.items()))
        return self._with(broker_config=pairs)

    def _with(self, **changes: Any) -> Self:
        if self.cluster is not None:
            raise ChaosUsageError("the cluster is running: configure it before start()")
        self.options = replace(self.options, **changes)
        return self

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        """Build or find the broker image, start the nodes on a network of their own and wait
        until every broker is registered and a fully replicated topic has a full ISR."""
        kafka = experiment_of(self.options, "cluster").kafka
        try:
            self.image = ensure_image(kafka.version, image=kafka.image, log=lambda line: None)
        except ImageError as exc:
            raise ChaosError(f"no broker image: {exc}") from exc
        cluster = cluster_of(kafka, self.image)
        start_or_reap(cluster)
        self.cluster = cluster
        return self

    def stop(self) -> None:
        """End the open run (healed, not judged), remove every container and the network."""
        try:
            if self._run is not None:
                self._run.close()
        finally:
            self._run = None
            if self.cluster is not None:
                self.cluster.close()
                with contextlib.suppress(Exception):
                    remove_cluster(self.cluster.cluster_id)
            self.cluster = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # -- where it answers -----------------------------------------------------------------

    def bootstrap_servers(self) -> str:
        """The brokers as this process reaches them: host:port,... (loopback on a local
        engine)."""
        return self._running().bootstrap_servers

    def network_bootstrap_servers(self) -> str:
        """The brokers as a container on `network` reaches them: kafka-1:9092,..."""
        return ",".join(f"{n.hostname}:{INTERNAL_PORT}" for n in self._running().nodes)

    @property
    def network(self) -> ClusterNetwork:
        """The cluster's Testcontainers network: give it to your own containers
        (`DockerContainer(...).with_network(cluster.network)`)."""
        network = self._running().network
        assert network is not None  # a started cluster has its network
        return network

    # -- roles ----------------------------------------------------------------------------

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The broker id leading `partition` of `topic` (None while it has no leader)."""
        states = self._running().partition_states(topic)
        return next((s.leader for s in states if s.partition == partition), None)

    def controllers(self) -> list[int]:
        """The node ids of the KRaft controllers (none in ZooKeeper mode)."""
        return [node.node_id for node in self._running().quorum]

    def active_controller(self) -> int | None:
        """The node id of the active controller (None while there is none)."""
        return self._running().active_controller()

    def coordinator_of(self, group: str) -> int | None:
        """The broker id coordinating consumer group `group` (None when none answers)."""
        with contextlib.suppress(Exception):
            futures = self._running().admin().describe_consumer_groups([group])
            return int(futures[group].result(timeout=10).coordinator.id)
        return None

    # -- a run: topic, journal, faults, verdict --------------------------------------------

    def run(self, root: Path, *, name: str | None = None, **topic: Any) -> Chaos:
        """Open a run writing its run directory under `root`: a fresh topic (`partitions`,
        `replication_factor`, `min_insync_replicas`... as the plugin's options), its
        `journal(config)`, `inject(...)` and `judge()`. One run at a time."""
        if self._run is not None:
            raise ChaosUsageError("a run is open: judge() it or call stop() first")
        self._runs += 1
        options = replace(self.options, **topic) if topic else self.options
        live = LiveCluster(self._running(), self._image())
        if self._judge is None:
            self._judge = Judge(load_settings().spark_master)
        self._run = Chaos(live, options, name or f"run-{self._runs}", root, self._judge)
        return self._run

    def kill(self, target: str = "leader", **step: Any) -> FaultHandle:
        """SIGKILL `target` (leader, follower, controller, node:<id>, ...; `partition=` names
        whose replicas) in the open run; the handle heals it."""
        return self.inject("kill", target, **step)

    def stop_node(self, target: str = "leader", **step: Any) -> FaultHandle:
        """SIGTERM `target` (a controlled shutdown) in the open run."""
        return self.inject("stop", target, **step)

    def pause(self, target: str = "leader", **step: Any) -> FaultHandle:
        """Freeze `target`'s processes in the open run."""
        return self.inject("pause", target, **step)

    def partition(self, target: str = "leader", **step: Any) -> FaultHandle:
        """Cut `target` off the other nodes (params: who from) in the open run."""
        return self.inject("partition", target, **step)

    def delay(self, target: str = "leader", **step: Any) -> FaultHandle:
        """Hold `target`'s packets (params: the delay) in the open run."""
        return self.inject("delay", target, **step)

    def inject(
        self,
        fault: str,
        target: str,
        *,
        partition: int = 0,
        params: Mapping[str, Any] | None = None,
        duration_s: float | None = None,
    ) -> FaultHandle:
        """Any fault of the harness's registry, as Chaos.inject."""
        return self._open_run().inject(
            fault, target, partition=partition, params=params, duration_s=duration_s
        )

    def heal(self) -> list[str]:
        """Heal every fault of the open run; the actions taken."""
        return self._open_run().heal()

    def close_run(self) -> None:
        """Let the next `run()` open: the current run is ended (healed, its topic deleted)."""
        if self._run is not None:
            self._run.close()
            self._run = None

    # -- checks ---------------------------------------------------------------------------

    def _running(self) -> KafkaCluster:
        if self.cluster is None:
            raise ChaosUsageError("the cluster is not running: start() it (or use `with`)")
        return self.cluster

    def _image(self) -> BrokerImage:
        assert self.image is not None  # set by start()
        return self.image

    def _open_run(self) -> Chaos:
        if self._run is None:
            raise ChaosUsageError(
                "faults act in a run, which the verdict judges: open one with run(root)"
            )
        return self._run
