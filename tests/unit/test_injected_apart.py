"""Injections run apart (harness/nemesis/schedule.py, `_injected_apart`): a fault left open
under a name, followed by a timed step, is injected in a thread of its own, so the next step
keeps its planned clock however long the injection takes; a heal of the name, and the final
heal, wait for it (a fake cluster whose kills take time: no Docker)."""

from __future__ import annotations

import time

from harness.chaos.faults import FaultRefused
from harness.experiment.model import FaultStep
from harness.rundir.events import EventType
from tests.unit.test_schedule import FakeCluster, FakeNode, run

INJECTION_S = 0.8  # how long a slow node's kill takes to return


class SlowNode(FakeNode):
    """A broker whose kill returns after INJECTION_S (a stop's controlled shutdown, a torn
    write's restart)."""

    def kill(self) -> None:
        time.sleep(INJECTION_S)
        super().kill()


class RefusingNode(FakeNode):
    """A broker whose state refuses the kill after a while."""

    def kill(self) -> None:
        time.sleep(INJECTION_S / 4)
        raise FaultRefused("not now")


def cascade(gap_s: float) -> list[FaultStep]:
    """Node 1 then node 2 killed `gap_s` apart, both bound, healed in turn a second later."""
    return [
        FaultStep(at_s=0, fault="kill", target="node:1", **{"as": "c0"}),
        FaultStep(at_s=gap_s, fault="kill", target="node:2", **{"as": "c1"}),
        FaultStep(at_s=gap_s + 0.05, fault="heal", target="@c0"),
        FaultStep(at_s=gap_s + 0.1, fault="heal", target="@c1"),
    ]


def starts(events: list[dict]) -> dict[int, dict]:
    return {e["step"]: e for e in events if e["type"] == EventType.FAULT_START}


def test_the_next_step_begins_before_a_slow_injection_returns(tmp_path):
    cluster = FakeCluster()
    cluster.nodes[0] = SlowNode(1)
    nemesis, events = run(cluster, cascade(0.1), tmp_path)
    assert nemesis.errors == []
    first, second = starts(events)[0], starts(events)[1]
    # Run in turn, the second could only begin once the first's kill had returned.
    assert second["ts_us"] < first["injected_us"]
    assert first["injected_us"] - first["ts_us"] >= INJECTION_S * 1e6
    # The heal of c0, due while its kill was under way, waited for it: killed, then started.
    assert cluster.node(1).actions == ["kill", "start"]
    assert cluster.node(2).actions == ["kill", "start"]
    ends = [e for e in events if e["type"] == EventType.FAULT_END]
    assert [e["nodes"] for e in ends] == [[1], [2]]
    assert ends[0]["ts_us"] >= first["injected_us"]
    assert nemesis.active == []


def test_a_step_with_a_condition_next_still_waits_for_the_injection(tmp_path):
    """`after:` conditions read the cluster as the last injection left it."""
    cluster = FakeCluster()
    cluster.nodes[0] = SlowNode(1)
    steps = [
        FaultStep(at_s=0, fault="kill", target="node:1", **{"as": "c0"}),
        FaultStep(fault="kill", target="node:2", after="after_s(0)", **{"as": "c1"}),
        FaultStep(fault="heal", target="@c0"),
        FaultStep(fault="heal", target="@c1"),
    ]
    nemesis, events = run(cluster, steps, tmp_path)
    assert nemesis.errors == []
    assert starts(events)[1]["ts_us"] >= starts(events)[0]["injected_us"]


def test_a_refused_injection_apart_is_said_once_and_its_heal_ends_nothing(tmp_path):
    cluster = FakeCluster()
    cluster.nodes[0] = RefusingNode(1)
    nemesis, events = run(cluster, cascade(0.05), tmp_path)
    (error,) = nemesis.errors
    assert "step 0" in error and "inject" in error and "not now" in error
    assert cluster.node(1).actions == []  # refused: nothing to start again
    assert cluster.node(2).actions == ["kill", "start"]
    assert [e["step"] for e in events if e["type"] == EventType.FAULT_START] == [1]
    assert nemesis.active == []
