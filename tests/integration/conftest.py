"""Fixtures for tests against real brokers: one image per session, one cluster per module."""

from __future__ import annotations

import uuid

import pytest

from harness.cluster import KafkaCluster, remove_leftovers
from harness.engine import ensure_engine
from harness.image import ensure_image


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


@pytest.fixture
def topic(cluster: KafkaCluster) -> str:
    """A fresh RF=3 topic with 3 partitions and min.insync.replicas=2."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, 3, 3, {"min.insync.replicas": "2"})
    return name
