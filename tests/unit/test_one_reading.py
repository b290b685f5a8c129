"""A step's roles are read once (harness/nemesis/schedule.py, `_inject`): the partition the
step moves to, the nodes it hits and the roles fault_start records all come from that one
reading, however the metadata moves between reads (a fake cluster whose leader changes at
every read: no Docker)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness.experiment.model import FaultStep
from harness.nemesis.schedule import Nemesis
from harness.platform.topology import PartitionState
from harness.rundir import layout
from harness.rundir.events import EventLog, EventType, load_events
from harness.waiting import wait_for
from tests.unit.test_schedule import FakeCluster, context, run


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


def test_a_step_still_waiting_when_the_schedule_ends_says_what_it_waited_for(tmp_path):
    """A pinned replay whose state never came shows the step it missed, and why."""

    class Watched(FakeCluster):
        views = 0

        def metadata(self, topic: str | None = None, timeout_s: float = 5.0) -> Any:
            self.views += 1
            return super().metadata(topic, timeout_s)

    cluster, log = Watched(), EventLog(tmp_path / layout.EVENTS)
    steps = [FaultStep(at_s=0, fault="kill", target="leader", after="isr_size(0) == 1")]
    nemesis = Nemesis(context(cluster), steps, log)  # type: ignore[arg-type]
    nemesis.start(time.monotonic())
    assert wait_for(lambda: cluster.views >= 2, 5)  # the unmet condition polled
    nemesis.stop()
    log.close()
    (skipped,) = [e for e in load_events(tmp_path) if e["type"] == EventType.FAULT_SKIPPED]
    assert skipped["step"] == 0 and "isr_size(0) == 1" in skipped["reason"]
    assert skipped["reason"].startswith("the schedule ended after")
    assert "still false: isr_size(0) == 1" in skipped["reason"]
