"""Fixtures for tests against real brokers: one image per session, one cluster per module."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.chaos.faults import FaultContext
from harness.chaos.heal import heal_all
from harness.platform.cluster import READY_TOPIC, KafkaCluster
from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image
from harness.platform.leftovers import remove_leftovers
from tests.integration.support import wait_until

STAGES = ("integration", "chaos")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a real-broker test that names no stage, or both: each runs in exactly one of
    the gate (`integration`) and the chaos stage (`chaos`), so none is left out of both."""
    here = str(config.rootpath / "tests" / "integration")
    wrong = [
        item.nodeid
        for item in items
        if str(item.path).startswith(here)
        and sum(item.get_closest_marker(stage) is not None for stage in STAGES) != 1
    ]
    if wrong:
        raise pytest.UsageError(
            "each test under tests/integration carries exactly one of the markers "
            f"{' or '.join(STAGES)}; these do not: {', '.join(wrong)}"
        )


@pytest.fixture(scope="session")
def broker_image() -> str:
    """The broker image tag (built once if missing); fails, never skips, without Docker."""
    ensure_engine()
    remove_leftovers()
    return ensure_image(log=lambda line: print(line)).tag


class SharedCluster:
    """The session's default 3-node cluster, lent to one module at a time: healed and checked
    healthy at each module boundary, and replaced by a new one when it is not."""

    READY_S = 60.0

    def __init__(self, image: str):
        self.image = image
        self.current: KafkaCluster | None = None
        self.starts = 0

    def lend(self) -> KafkaCluster:
        """A healthy cluster for the next module: the last one healed, or a fresh one."""
        if self.current is not None and not self._healed(self.current):
            self.close()
        if self.current is None:
            self.current = KafkaCluster(image=self.image).start()
            self.starts += 1
        return self.current

    @classmethod
    def _healed(cls, cluster: KafkaCluster) -> bool:
        """Heal every fault the last module may have left, then whether every node runs and
        the cluster is ready (all brokers registered, a full ISR) within READY_S."""
        actions = heal_all(FaultContext(cluster, READY_TOPIC))
        if any("heal failed" in action for action in actions):
            return False
        if any(node.state() != "running" for node in cluster.all_nodes):
            return False
        try:
            cluster.wait_ready(timeout_s=cls.READY_S)
        except Exception:
            return False
        return True

    def close(self) -> None:
        """Remove the current cluster, if any."""
        if self.current is not None:
            self.current.close()
            self.current = None


@pytest.fixture(scope="session")
def shared_cluster(broker_image: str):
    """The session's shared default cluster (see SharedCluster); removed at the end."""
    shared = SharedCluster(broker_image)
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def cluster(shared_cluster: SharedCluster) -> KafkaCluster:
    """A started, healthy 3-node cluster for the tests of one module (shared across modules)."""
    return shared_cluster.lend()


def known_to_every_broker(cluster: KafkaCluster, topic: str, partitions: int) -> bool:
    """Whether each broker's own metadata has a leader for every partition of `topic`.

    Metadata reaches brokers one by one: a leader that has not applied a new topic yet
    refuses writes to it, which acks=0 never reports.
    """
    for node in cluster.nodes:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.host_port}", "log_level": 0})
        try:
            meta = admin.list_topics(topic, timeout=3).topics[topic]
        except KafkaException:
            return False
        if meta.error is not None or len(meta.partitions) != partitions:
            return False
        if any(p.leader < 0 for p in meta.partitions.values()):
            return False
    return True


@pytest.fixture
def topic(cluster: KafkaCluster) -> str:
    """A fresh RF=3 topic with 3 partitions and min.insync.replicas=2, known to every broker."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, 3, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: known_to_every_broker(cluster, name, 3), 30, f"every broker to know {name}")
    return name
