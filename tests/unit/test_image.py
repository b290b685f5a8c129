"""The broker image recipe: env-to-properties mapping of the entrypoint, and the recipe hash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.platform import topology as cluster
from harness.platform.image import RECIPE_FILES, image_tag, recipe_hash
from harness.platform.topology import Topology, broker_env, property_env_name
from harness.settings import REPO_ROOT

ENTRYPOINT = REPO_ROOT / "compose" / "kafka-entrypoint.sh"


def rendered(env: dict[str, str]) -> dict[str, str]:
    """server.properties as the entrypoint renders it from exactly `env`."""
    out = subprocess.run(
        ["bash", str(ENTRYPOINT), "--print-properties"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def test_kafka_variables_become_properties_like_the_apache_image():
    props = rendered(
        {
            "KAFKA_NODE_ID": "1",
            "KAFKA_LOG_DIRS": "/data",
            "KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE": "true",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "A:PLAINTEXT,B:PLAINTEXT",
        }
    )
    assert props == {
        "node.id": "1",
        "log.dirs": "/data",
        "unclean.leader.election.enable": "true",
        "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
    }


def test_double_and_triple_underscores_map_to_underscore_and_dash():
    props = rendered({"KAFKA_A__B": "1", "KAFKA_C___D": "2", "KAFKA_E__F___G_H": "3"})
    assert props == {"a_b": "1", "c-d": "2", "e_f-g.h": "3"}


def test_launcher_variables_and_other_variables_are_not_properties():
    props = rendered(
        {
            "KAFKA_HEAP_OPTS": "-Xmx1g",
            "KAFKA_OPTS": "-Dx",
            "KAFKA_VERSION": "4",
            "CLUSTER_ID": "abc",
            "PATH": "/usr/bin",
            "KAFKA_NODE_ID": "2",
        }
    )
    assert props == {"node.id": "2"}


def test_values_keep_equals_signs_and_spaces():
    assert rendered({"KAFKA_SASL_JAAS_CONFIG": "a=b c=d"}) == {"sasl.jaas.config": "a=b c=d"}


@pytest.mark.parametrize(
    "prop",
    [
        "min.insync.replicas",
        "log.flush.interval.messages",
        "a_b.c",
        "x-y.z",
        "replica.lag.time.max.ms",
    ],
)
def test_property_env_name_round_trips_through_the_entrypoint(prop):
    assert rendered({property_env_name(prop): "v"}) == {prop: "v"}


def test_broker_env_advertises_the_fixed_host_port_and_all_voters():
    env = broker_env(
        2, 40123, Topology(brokers=3), "cid", {"replica.lag.time.max.ms": 10000, "x.enable": True}
    )
    props = rendered({k: v for k, v in env.items()})
    assert "EXTERNAL://127.0.0.1:40123" in props["advertised.listeners"]
    assert props["controller.quorum.voters"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
    assert props["replica.lag.time.max.ms"] == "10000"
    assert props["x.enable"] == "true"
    assert env["CLUSTER_ID"] == "cid"


def test_a_remote_docker_host_is_advertised_and_published_on_all_interfaces(monkeypatch):
    monkeypatch.setattr(cluster.TestcontainersClient, "__init__", lambda self: None)
    monkeypatch.setattr(cluster.TestcontainersClient, "host", lambda self: "docker.internal")
    assert cluster.docker_host() == "docker.internal"
    assert cluster.publish_address("docker.internal") == "0.0.0.0"
    env = broker_env(1, 40123, Topology(brokers=3), "cid", advertised_host="docker.internal")
    assert env["KAFKA_ADVERTISED_LISTENERS"].endswith(",EXTERNAL://docker.internal:40123")


def test_a_local_engine_keeps_brokers_on_loopback(monkeypatch):
    monkeypatch.setattr(cluster.TestcontainersClient, "__init__", lambda self: None)
    monkeypatch.setattr(cluster.TestcontainersClient, "host", lambda self: "localhost")
    assert cluster.docker_host() == "127.0.0.1"  # not "localhost": librdkafka tries ::1 first
    assert cluster.publish_address("127.0.0.1") == "127.0.0.1"


def copy_recipe(tmp_path: Path) -> Path:
    for name in RECIPE_FILES:
        shutil.copy(REPO_ROOT / "compose" / name, tmp_path / name)
    return tmp_path


def test_recipe_hash_is_stable_for_the_same_inputs(tmp_path):
    recipe = copy_recipe(tmp_path)
    assert image_tag("4.3.1", recipe) == image_tag("4.3.1", REPO_ROOT / "compose")
    assert image_tag("4.3.1", recipe).startswith("kafka-chaos/kafka:4.3.1-")


def test_recipe_hash_changes_with_any_recipe_file_or_the_version(tmp_path):
    recipe = copy_recipe(tmp_path)
    before = recipe_hash(recipe, RECIPE_FILES, "4.3.1")
    assert recipe_hash(recipe, RECIPE_FILES, "4.2.0") != before
    for name in RECIPE_FILES:
        original = (recipe / name).read_bytes()
        (recipe / name).write_bytes(original + b"\n# changed\n")
        assert recipe_hash(recipe, RECIPE_FILES, "4.3.1") != before, name
        (recipe / name).write_bytes(original)
    assert recipe_hash(recipe, RECIPE_FILES, "4.3.1") == before


def test_cluster_ids_never_start_with_a_dash(monkeypatch):
    import uuid

    from harness.platform import topology as cluster

    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))  # base64 of 0xfb... starts with '-'
    fresh = iter([dash_first, uuid.UUID(int=1)])
    monkeypatch.setattr(cluster.uuid, "uuid4", lambda: next(fresh))
    cluster_id = cluster.new_cluster_id()
    assert not cluster_id.startswith("-") and len(cluster_id) == 22
