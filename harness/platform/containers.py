"""The cluster's containers and network as Testcontainers classes: the one module that asks the
engine to create them (through testcontainers' DockerContainer and Network).

- `ClusterNetwork`: the cluster's bridge network, named after the cluster and labelled with it;
- `NodeContainer`: one Kafka, controller or ZooKeeper node; a broker's client port is
  published in `_configure()` on one interface (loopback on a local engine: unauthenticated
  brokers must not listen elsewhere), which Testcontainers' `with_bind_ports` cannot say;
- `HelperContainer`: a helper of the harness in a node's network namespace (sidecar.py).

Every container carries the cluster's labels, so the harness's own sweep
(harness.platform.leftovers) finds what a crashed run left. Ryuk, Testcontainers' reaper, is
used where its image is on the engine already; elsewhere (no registry to pull it from) it is
turned off and the label sweep alone cleans up. The docker SDK container behind each one is
`get_wrapped_container()`: the faults act on it (kill, stop, pause, exec, archives).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import docker
import docker.errors
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from testcontainers.core.wait_strategies import ExecWaitStrategy, LogMessageWaitStrategy
from testcontainers.core.waiting_utils import WaitStrategy

from harness.platform import disk_layer
from harness.platform.topology import (
    CLIENT_PORT,
    LOG_DIR,
    ZOOKEEPER_PORT,
    NodePlan,
    Role,
)

# A Kafka node's start-up line, in the wording of every release the harness runs: "[KafkaRaftServer
# nodeId=1] Kafka Server started" (KRaft), "[KafkaServer id=1] started" (ZooKeeper mode, 2.x
# and 3.x), "[Kafka Server 1], started" (0.10 to 1.x). A KRaft broker says it once unfenced.
KAFKA_STARTED = re.compile(r"Kafka ?Server[^\n]*\bstarted\b")
# A ZooKeeper server answers `srvr` with its mode once it serves (standalone or in a quorum).
ZOOKEEPER_SERVING = (
    f"exec 3<>/dev/tcp/127.0.0.1/{ZOOKEEPER_PORT} && printf srvr >&3 && cat <&3 | grep -q 'Mode: '"
)
WAIT_POLL_S = 0.2
# One probe's bound: a server that accepts the connection at start-up but never answers
# would hold the exec, and the start, for good (testcontainers gives an exec no timeout).
PROBE_TIMEOUT_S = 5


def use_ryuk_where_possible(client: docker.DockerClient) -> None:
    """Leave Ryuk on when its image is on this engine (and nobody turned it off), else turn it
    off: without a registry it cannot be pulled, and the harness cleans up by label anyway."""
    if os.environ.get("TESTCONTAINERS_RYUK_DISABLED") is not None:
        return
    try:
        client.images.get(testcontainers_config.ryuk_image)
    except docker.errors.ImageNotFound:
        testcontainers_config.ryuk_disabled = True


class ClusterNetwork(Network):
    """The cluster's own bridge network, `name`d after it and carrying its `labels`."""

    def __init__(self, name: str, labels: dict[str, str]) -> None:
        super().__init__(docker_network_kw={"driver": "bridge", "labels": labels})
        self.name = name


def readiness(role: Role, timeout_s: float) -> WaitStrategy:
    """When a node counts as started: a Kafka node when it logs that its server started, a
    ZooKeeper server when it answers `srvr` with its mode within PROBE_TIMEOUT_S (else the
    probe fails and is tried again)."""
    strategy: WaitStrategy
    if role is Role.ZOOKEEPER:
        probe = ["timeout", str(PROBE_TIMEOUT_S), "bash", "-c", ZOOKEEPER_SERVING]
        strategy = ExecWaitStrategy(probe)
    else:
        strategy = LogMessageWaitStrategy(KAFKA_STARTED)
    timeout = timedelta(seconds=timeout_s)
    return strategy.with_startup_timeout(timeout).with_poll_interval(WAIT_POLL_S)


class NodeContainer(DockerContainer):
    """One node of the cluster from its plan: image, environment, host name and alias on the
    cluster network, NET_ADMIN (the network faults), the disk layer's device, entrypoint and
    binary when `layer` names one; a broker's client port published on `publish_on` only."""

    def __init__(
        self,
        image: str,
        plan: NodePlan,
        *,
        name: str,
        network: ClusterNetwork,
        labels: dict[str, str],
        publish_on: str,
        layer: Path | None = None,
    ) -> None:
        super().__init__(image, env=dict(plan.env), name=name, network=network)
        self.plan = plan
        self.publish_on = publish_on
        self.with_network_aliases(plan.hostname)
        layered = layer is not None and plan.role is not Role.ZOOKEEPER
        options: dict[str, Any] = {}
        if layered:
            assert layer is not None
            options = dict(disk_layer.create_options(self._engine(), image, LOG_DIR))
            self.with_command(options.pop("command"))
            self.with_copy_into_container(layer, disk_layer.BINARY, 0o755)
        self.layered = layered
        self.with_kwargs(
            hostname=plan.hostname,
            cap_add=["NET_ADMIN", "SYS_ADMIN"] if layered else ["NET_ADMIN"],
            labels=labels,
            **options,
        )

    def _engine(self) -> docker.DockerClient:
        return self.get_docker_client().client

    def _configure(self) -> None:
        """Publish a broker's client port at `publish_on`:<its planned port>; nodes clients
        never reach publish nothing."""
        if self.plan.host_port:
            port: Any = (self.publish_on, self.plan.host_port)  # docker SDK: (interface, port)
            self.ports[f"{CLIENT_PORT}/tcp"] = port


class HelperContainer(DockerContainer):
    """A helper of `kind` running `argv` from `image` in the network namespace of the node
    whose container id is `node_id`, with NET_ADMIN and NET_RAW, labelled `labels`."""

    def __init__(
        self,
        image: str,
        argv: list[str],
        *,
        name: str,
        node_id: str,
        labels: dict[str, str],
        working_dir: str | None = None,
    ) -> None:
        super().__init__(image, name=name)
        self.with_command(argv)
        options: dict[str, Any] = {"working_dir": working_dir} if working_dir else {}
        self.with_kwargs(
            network_mode=f"container:{node_id}",
            network=None,  # no network of its own: Testcontainers then adds none either
            cap_add=["NET_ADMIN", "NET_RAW"],
            labels=labels,
            **options,
        )


def start_together(containers: Sequence[NodeContainer], timeout_s: float) -> None:
    """Start `containers` at once, each waiting for its readiness (the nodes of a KRaft quorum
    only finish starting together); the first failure is raised once all have returned."""
    for container in containers:
        container.waiting_for(readiness(container.plan.role, timeout_s))
    if not containers:
        return
    with ThreadPoolExecutor(len(containers)) as pool:
        outcomes = list(pool.map(_started, containers))
    failures = [outcome for outcome in outcomes if outcome is not None]
    if failures:
        raise failures[0]


def _started(container: NodeContainer) -> BaseException | None:
    """Start one container; the error it raised, else None."""
    try:
        container.start()
    except Exception as exc:
        return exc
    return None
