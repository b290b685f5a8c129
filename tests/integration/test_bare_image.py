"""Network faults on a broker image without iptables, tc or Python (as the stock apache/kafka
image is): the harness runs them from helpers in the nodes' network namespaces.

No registry is reachable here, so the stock image cannot be pulled; the test derives one from
the locally built broker image by deleting those tools, which is what matters to the faults.
"""

from __future__ import annotations

import io
import random

import docker
import pytest

from harness.chaos.faults import FAULT_TYPES, FaultContext, check_tools
from harness.chaos.heal import heal_all
from harness.platform.cluster import KafkaCluster
from harness.platform.sidecar import HELPER_LABEL_SUFFIX
from tests.integration.support import wait_until
from tests.integration.test_faults import connects

pytestmark = pytest.mark.chaos

STRIP = "rm -f /usr/sbin/iptables* /usr/sbin/ip6tables* /usr/sbin/xtables* /usr/sbin/tc " \
    "/usr/bin/python3*"  # fmt: skip


@pytest.fixture(scope="module")
def bare_cluster(broker_image: str):
    """A 3-node cluster of an image derived from the broker image, its network tools gone."""
    tag = "kafka-chaos/bare:" + broker_image.rsplit(":", 1)[1]
    dockerfile = f"FROM {broker_image}\nRUN {STRIP}\n".encode()
    docker.from_env().images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
    with KafkaCluster(image=tag) as started:
        yield started


def helpers(cluster: KafkaCluster) -> list:
    label = cluster.settings.label
    return docker.from_env().containers.list(
        all=True, filters={"label": [f"{label}={cluster.cluster_id}", label + HELPER_LABEL_SUFFIX]}
    )


def test_partition_loss_and_delay_run_on_an_image_without_the_tools(bare_cluster):
    first, second = bare_cluster.nodes[0], bare_cluster.nodes[1]
    code, _ = first.exec(["sh", "-c", "command -v iptables || command -v tc"])
    assert code != 0  # the image really lacks them
    faults = [FAULT_TYPES[name] for name in ("partition", "loss", "slow", "delay")]
    check_tools(first, faults, "kafka-chaos/bare")  # passes: the helpers bring them
    ctx = FaultContext(bare_cluster, "t", random.Random(1))
    assert connects(first, second)
    partition = FAULT_TYPES["partition"](ctx, [first])
    partition.inject()
    try:
        assert not connects(first, second)
        assert not connects(second, first)
    finally:
        partition.heal()
    assert connects(first, second)
    delay = FAULT_TYPES["delay"](ctx, [first], FAULT_TYPES["delay"].parse_params({}))
    assert first.hostname in delay.inject()["rules"]
    delay.heal()
    assert delay.detail()["shaper"][first.hostname] is not None


def test_the_final_heal_clears_rules_left_in_a_bare_node(bare_cluster):
    first, second = bare_cluster.nodes[0], bare_cluster.nodes[1]
    ctx = FaultContext(bare_cluster, "t", random.Random(2))
    FAULT_TYPES["partition"](ctx, [first]).inject()  # never healed by itself
    assert not connects(second, first)
    heal_all(ctx)
    assert connects(second, first)


def test_a_killed_and_restarted_bare_node_gets_a_fresh_helper(bare_cluster):
    first, second = bare_cluster.nodes[0], bare_cluster.nodes[1]
    ctx = FaultContext(bare_cluster, "t", random.Random(3))
    FAULT_TYPES["partition"](ctx, [first]).inject()
    first.kill()
    first.start()  # a new network namespace: the old rules and the old helper's view are gone
    wait_until(lambda: connects(second, first), 60, "the restarted broker to listen")
    partition = FAULT_TYPES["partition"](ctx, [first])
    partition.inject()
    try:
        assert not connects(second, first)
    finally:
        partition.heal()
    assert connects(second, first)
    bare_cluster.close()
    assert helpers(bare_cluster) == []
