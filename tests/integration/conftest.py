"""Fixtures for tests against real brokers: one image per session, one cluster per module."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.platform.cluster import KafkaCluster
from harness.platform.engine import ensure_engine
from harness.platform.image import ensure_image
from harness.platform.leftovers import remove_leftovers
from tests.integration.support import wait_until


@pytest.fixture(scope="session")
def broker_image() -> str:
    """The broker image tag (built once if missing); fails, never skips, without Docker."""
    ensure_engine()
    remove_leftovers()
    return ensure_image(log=lambda line: print(line)).tag


@pytest.fixture(scope="module")
def cluster(broker_image: str):
    """A started 3-node cluster shared by the tests of one module."""
    with KafkaCluster(image=broker_image) as started:
        yield started


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
