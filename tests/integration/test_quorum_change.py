"""The remove-controller fault on a real dynamic quorum (KIP-853, dedicated controllers): the
active controller leaves the voter set while acks=all writes go on, the two voters left
elect a leader and keep serving metadata, and the heal adds it back as a voter."""

from __future__ import annotations

import random

import pytest

from harness.chaos.faults import FAULT_TYPES, FaultContext
from harness.platform.admin import quorum
from harness.platform.cluster import KafkaCluster
from harness.platform.topology import directory_id
from tests.integration.conftest import known_to_every_broker
from tests.integration.support import read_all, wait_until
from tests.integration.test_reassign import write

pytestmark = pytest.mark.chaos
CONTROLLERS = [101, 102, 103]


def test_removing_the_active_controller_moves_the_quorum_and_heal_adds_it_back(broker_image):
    with KafkaCluster(image=broker_image, mode="kraft-dedicated", dynamic_quorum=True) as cluster:
        described = quorum(cluster)
        assert described.voter_ids == CONTROLLERS
        # The voters carry the directory ids the harness formatted them with.
        assert {(v[0], v[1]) for v in described.voters} == {
            (i, directory_id(cluster.cluster_id, i)) for i in CONTROLLERS
        }
        cluster.create_topic("quorum", 3, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: known_to_every_broker(cluster, "quorum", 3), 30, "the topic")
        acked = write(cluster, "quorum", range(0, 300))
        active = described.leader
        ctx = FaultContext(cluster, "quorum", random.Random(3))
        fault = FAULT_TYPES["remove-controller"](ctx, [cluster.node(active)])
        detail = fault.inject()
        others = [i for i in CONTROLLERS if i != active]
        assert detail["voters_before"] == CONTROLLERS and detail["voters_after"] == others
        assert detail["leader_before"] == active and detail["leader_after"] in others
        # Two voters still make a quorum: metadata changes go on (a topic is created) ...
        cluster.create_topic("during", 1, 3, {})
        wait_until(lambda: known_to_every_broker(cluster, "during", 1), 30, "a topic created")
        # ... and the removed controller follows the log as an observer, which heal needs.
        observers = [o[0] for o in quorum(cluster).observers]
        assert active in observers
        acked += write(cluster, "quorum", range(300, 600))
        fault.heal()
        assert fault.detail()["voters_restored"] == CONTROLLERS
        assert quorum(cluster).voter_ids == CONTROLLERS
        fault.heal()  # a second heal does nothing
        acked += write(cluster, "quorum", range(600, 900))
        assert len(acked) == 900
        read = read_all(cluster.bootstrap_servers, "quorum", 3)
        assert set(acked) <= {int(value) for (_, value) in read.values()}
