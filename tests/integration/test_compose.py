"""compose/docker-compose.yml, brought up with the Compose the project installs itself.

The three brokers must form one cluster and an RF=3 topic must reach a full ISR; `down`
must then leave no container, network or volume of the project behind, also on failure.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from harness.platform.compose import COMPOSE_VERSION, ensure_compose
from harness.platform.topology import port_in_use
from harness.settings import load_settings
from tests.integration.support import wait_until

pytestmark = pytest.mark.chaos

CLIENT_PORTS = (19092, 19093, 19094)  # what compose/docker-compose.yml publishes
BOOTSTRAP = ",".join(f"127.0.0.1:{port}" for port in CLIENT_PORTS)


@pytest.fixture(scope="module")
def compose_binary() -> Path:
    """The project's Compose, installed into the cache folder on first use."""
    return ensure_compose(load_settings().cache_dir)


def compose(binary: Path, project: str, image: str, *args: str) -> subprocess.CompletedProcess:
    """Run `docker compose` on the shipped file for `project`, with the broker image given."""
    compose_file = load_settings().compose_dir / "docker-compose.yml"
    return subprocess.run(
        [str(binary), "-f", str(compose_file), "-p", project, *args],
        env={**os.environ, "KAFKA_IMAGE": image},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@contextlib.contextmanager
def compose_up(binary: Path, image: str) -> Iterator[str]:
    """`up -d` a fresh project; `down` it whatever happens; yield the project name."""
    project = f"kchaos-compose-{uuid.uuid4().hex[:8]}"
    try:
        up = compose(binary, project, image, "up", "-d")
        assert up.returncode == 0, f"compose up failed:\n{up.stderr[-2000:]}"
        yield project
    finally:
        down = compose(binary, project, image, "down", "-v", "--remove-orphans", "-t", "10")
        assert down.returncode == 0, f"compose down failed:\n{down.stderr[-2000:]}"


def registered_brokers(admin: AdminClient) -> set[int]:
    """Ids of the brokers the cluster's metadata lists (empty while none answers)."""
    with contextlib.suppress(KafkaException):
        return set(admin.list_topics(timeout=3).brokers)
    return set()


def full_isr(admin: AdminClient, topic: str) -> bool:
    """Whether every partition of `topic` has a leader and all 3 replicas in sync."""
    with contextlib.suppress(KafkaException, KeyError):
        partitions = admin.list_topics(topic, timeout=3).topics[topic].partitions.values()
        return bool(partitions) and all(
            p.leader >= 0 and len(p.replicas) == 3 and set(p.isrs) == set(p.replicas)
            for p in partitions
        )
    return False


def project_leftovers(project: str) -> list[str]:
    """Containers, networks and volumes Docker still has for the Compose `project`."""
    client = docker.from_env()
    label = {"label": f"com.docker.compose.project={project}"}
    return (
        [c.name for c in client.containers.list(all=True, filters=label)]
        + [n.name for n in client.networks.list(filters=label)]
        + [v.name for v in client.volumes.list(filters=label)]
    )


def test_the_compose_file_forms_a_cluster_with_a_full_isr(broker_image, compose_binary):
    version = subprocess.run(
        [str(compose_binary), "version", "--short"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip().lstrip("v") == COMPOSE_VERSION
    busy = [port for port in CLIENT_PORTS if port_in_use(port)]
    assert not busy, f"ports {busy} are taken; the compose file needs them free"

    with compose_up(compose_binary, broker_image) as project:
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "log_level": 0})
        wait_until(lambda: registered_brokers(admin) == {1, 2, 3}, 120, "3 brokers to register")
        futures = admin.create_topics([NewTopic("compose-check", 3, 3)])
        futures["compose-check"].result(timeout=30)
        wait_until(lambda: full_isr(admin, "compose-check"), 60, "a full ISR on compose-check")
        running = docker.from_env().containers.list(
            filters={"label": f"com.docker.compose.project={project}"}
        )
        assert {c.attrs["Config"]["Image"] for c in running} == {broker_image}
    assert project_leftovers(project) == []
