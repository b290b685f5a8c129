"""A step's roles are read once (harness/nemesis/schedule.py, `_inject`): the partition the
step moves to, the nodes it hits and the roles fault_start records all come from that one
reading, however the metadata moves between reads (a fake cluster whose leader changes at
every read: no Docker)."""

from __future__ import annotations

import pytest

from harness.experiment.model import FaultStep
from harness.platform.topology import PartitionState
from harness.rundir.events import EventType
from tests.unit.test_schedule import FakeCluster, run


class Restless(FakeCluster):
    """Partition 0's leader is the next live broker at each read (a controller moving it)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
        self.reads += 1
        live = self._live()
        leader = live[self.reads % len(live)]
        return [PartitionState(0, leader, (1, 2, 3), tuple(live))]


@pytest.mark.parametrize("disjoint", [False, True])
@pytest.mark.parametrize("target", ["leader", "successor", "follower"])
def test_the_node_hit_is_the_role_the_step_recorded(tmp_path, target, disjoint):
    cluster = Restless()
    steps = [FaultStep(at_s=0, fault="kill", target=target, partition=0, duration_s=0.05)]
    nemesis, events = run(cluster, steps, tmp_path, disjoint=disjoint)
    assert nemesis.errors == []
    (start,) = [e for e in events if e["type"] == EventType.FAULT_START]
    (roles,) = start["partitions"]
    leader, isr = roles["leader"], roles["isr"]
    (hit,) = start["nodes"]
    if target == "leader":
        assert hit == leader
    elif target == "successor":
        assert hit == next(n for n in isr if n != leader)
    else:
        assert hit != leader and hit in isr
