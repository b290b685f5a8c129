"""The nemesis of a disjoint (generated) schedule, on the fake cluster of test_schedule.py:
concurrent faults on disjoint nodes; a step whose role names no node, whose metadata no broker
answers, or that the cluster refuses is skipped with its heal, where a written one fails."""

from __future__ import annotations

from confluent_kafka import KafkaException

from harness.experiment.model import FaultStep
from harness.platform.topology import PartitionState
from harness.rundir.events import EventType
from tests.unit.test_schedule import FakeCluster, run


def test_overlapping_generated_faults_act_on_disjoint_nodes(tmp_path):
    """A role step leaves out the nodes another fault in force holds; one left with none, or a
    whole-cluster step that would miss one, is skipped with its heal, and is no error."""
    steps = [
        FaultStep(at_s=0, fault="kill", target="node:2", as_="g0"),
        FaultStep(at_s=0, fault="kill", target="followers", as_="g1"),  # 2 is held: only 3
        FaultStep(at_s=0, fault="kill", target="node:3", as_="g2"),  # held: skipped
        FaultStep(at_s=0, fault="kill", target="all", as_="g3"),  # would miss 2 and 3
        FaultStep(at_s=0, fault="heal", target="@g2"),
        FaultStep(at_s=0, fault="heal", target="@g3"),
        FaultStep(at_s=0, fault="heal", target="@g1"),
        FaultStep(at_s=0, fault="heal", target="@g0"),
    ]
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    assert [n.actions for n in cluster.nodes] == [[], ["kill", "start"], ["kill", "start"]]
    skipped = [e for e in events if e["type"] == EventType.FAULT_SKIPPED]
    assert [(e["step"], "whole cluster" in e["reason"]) for e in skipped] == [
        (2, False),
        (3, True),
    ]
    started = [e["nodes"] for e in events if e["type"] == EventType.FAULT_START]
    assert started == [[2], [3]]


def test_a_generated_step_whose_role_names_no_node_is_skipped_not_failed(tmp_path):
    """All replicas down: `leader` names nobody. A generated schedule skips that step and its
    heal; an explicit one fails it, as before."""
    steps = [
        FaultStep(at_s=0, fault="kill", target="followers", as_="g0"),
        FaultStep(at_s=0, fault="kill", target="leader", as_="g1"),
        FaultStep(at_s=0, fault="kill", target="leader", as_="g2"),  # no leader now
        FaultStep(at_s=0, fault="heal", target="@g2"),
        FaultStep(at_s=0, fault="heal", target="@g1"),
        FaultStep(at_s=0, fault="heal", target="@g0"),
    ]
    nemesis, events = run(FakeCluster(), steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    (skipped,) = [e for e in events if e["type"] == EventType.FAULT_SKIPPED]
    assert skipped["step"] == 2 and "no leader" in skipped["reason"]
    (tmp_path / "explicit").mkdir()
    explicit, events = run(FakeCluster(), steps, tmp_path / "explicit")
    assert [e.split(":")[0] for e in explicit.errors] == ["step 2 (kill leader)"]
    assert [e["stage"] for e in events if e["type"] == EventType.FAULT_ERROR] == ["inject"]


def test_a_generated_step_skips_when_no_broker_answers_for_its_role(tmp_path):
    """Every broker down: the role's metadata cannot be read. Disjoint, the step is skipped."""

    class Unanswered(FakeCluster):
        def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
            raise KafkaException("Failed to get metadata: Local: Broker transport failure")

    steps = [FaultStep(at_s=0, fault="kill", target="leader", as_="g0"),
             FaultStep(at_s=0, fault="heal", target="@g0")]  # fmt: skip
    nemesis, events = run(Unanswered(), steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    (skipped,) = [e for e in events if e["type"] == EventType.FAULT_SKIPPED]
    assert "Broker transport failure" in skipped["reason"]


def test_a_fault_the_cluster_refuses_is_skipped_when_generated_and_failed_when_written(
    tmp_path, monkeypatch
):
    """FaultRefused (nothing done: a replica set left empty) skips a disjoint step; any other
    inject error stays a failure, disjoint or not."""
    from harness.chaos.faults import FAULT_TYPES, FaultRefused

    def refuse(self):
        raise FaultRefused("reassign of partition 0: dropping every replica")

    monkeypatch.setattr(FAULT_TYPES["kill"], "inject", refuse)
    steps = [FaultStep(at_s=0, fault="kill", target="leader", as_="g0"),
             FaultStep(at_s=0, fault="heal", target="@g0")]  # fmt: skip
    nemesis, events = run(FakeCluster(), steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    assert [e["type"] for e in events if "fault" in e.get("type", "")] == [EventType.FAULT_SKIPPED]
    (tmp_path / "written").mkdir()
    written, _ = run(FakeCluster(), steps, tmp_path / "written")
    assert len(written.errors) == 1 and "dropping every replica" in written.errors[0]


class ThreePartitions(FakeCluster):
    """p0, p1, p2 led by nodes 1, 2, 3, as the metadata still says just after a kill."""

    def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
        orders = [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
        return [PartitionState(p, order[0], order, order) for p, order in enumerate(orders)]


def fault_id(event: dict) -> int:
    return event["fault_id"]


def test_a_role_held_on_its_partition_is_taken_on_the_next_partition(tmp_path):
    """p0's leader (1) is held: the leader step hits p1's (2), and records p1; when every
    partition's leader is held, it is skipped."""
    steps = [
        FaultStep(at_s=0, fault="kill", target="node:1", as_="g0"),
        FaultStep(at_s=0, fault="kill", target="leader", partition=0, as_="g1"),
        FaultStep(at_s=0, fault="kill", target="leader", partition=0, as_="g2"),
        FaultStep(at_s=0, fault="kill", target="leader", partition=0, as_="g3"),
        *(FaultStep(at_s=0, fault="heal", target=f"@g{i}") for i in (3, 2, 1, 0)),
    ]
    nemesis, events = run(ThreePartitions(), steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    # In step order (fault ids): injections run apart may return, and be written, in any order.
    starts = sorted((e for e in events if e["type"] == EventType.FAULT_START), key=fault_id)
    assert [(e["partition"], e["nodes"]) for e in starts] == [(0, [1]), (1, [2]), (2, [3])]
    (skipped,) = [e for e in events if e["type"] == EventType.FAULT_SKIPPED]
    assert skipped["step"] == 3 and "held" in skipped["reason"]


def test_a_random_pick_takes_a_node_no_fault_holds(tmp_path):
    """`follower` and `random` pick among the free nodes only."""
    steps = [
        FaultStep(at_s=0, fault="kill", target="node:2", as_="g0"),
        FaultStep(at_s=0, fault="kill", target="follower", as_="g1"),  # followers 2, 3: only 3
        FaultStep(at_s=0, fault="heal", target="@g1"),
        FaultStep(at_s=0, fault="kill", target="node:1", as_="g2"),
        FaultStep(at_s=0, fault="kill", target="random", as_="g3"),  # 1 and 2 held: only 3
        *(FaultStep(at_s=0, fault="heal", target=f"@g{i}") for i in (3, 2, 0)),
    ]
    nemesis, events = run(ThreePartitions(), steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    started = [e["nodes"] for e in events if e["type"] == EventType.FAULT_START]
    assert started == [[2], [3], [1], [3]]


def test_a_node_down_outside_any_fault_takes_no_generated_step(tmp_path):
    """A broker that halted by itself (its disk failed after a fault ended) is skipped like a
    held one: an exec in a stopped container would fail the step."""
    cluster = ThreePartitions()
    cluster.node(2).running = False
    steps = [
        FaultStep(at_s=0, fault="kill", target="node:2", as_="g0"),
        FaultStep(at_s=0, fault="heal", target="@g0"),
    ]
    nemesis, events = run(cluster, steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    (skipped,) = [e for e in events if e["type"] == EventType.FAULT_SKIPPED]
    assert "held or down" in skipped["reason"]
    assert cluster.node(2).actions == []


def test_packet_faults_share_a_node_when_one_is_shaped_and_nothing_else_does(tmp_path, monkeypatch):
    """A delay acts on a node a cut holds, and a second delay beside it; a second cut there is
    skipped, and so is a kill: it would restart the namespace their rules live in."""
    from harness.chaos.faults import FAULT_TYPES

    for kind in ("delay", "partition"):

        def inject(self, kind=kind):
            for node in self.nodes:
                node.actions.append(kind)
            return {}

        monkeypatch.setattr(FAULT_TYPES[kind], "inject", inject)
        monkeypatch.setattr(FAULT_TYPES[kind], "heal", lambda self: None)
    steps = [
        FaultStep(at_s=0, fault="partition", target="node:2", as_="g0"),
        FaultStep(at_s=0, fault="delay", target="node:2", as_="g1"),
        FaultStep(at_s=0, fault="delay", target="node:2", as_="g2"),
        FaultStep(at_s=0, fault="partition", target="node:2", as_="g3"),  # two cuts: apart
        FaultStep(at_s=0, fault="kill", target="node:2", as_="g4"),
        *(FaultStep(at_s=0, fault="heal", target=f"@g{i}") for i in (4, 3, 2, 1, 0)),
    ]
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps, tmp_path, disjoint=True)
    assert nemesis.errors == []
    assert cluster.node(2).actions == ["partition", "delay", "delay"]
    skipped = [e["step"] for e in events if e["type"] == EventType.FAULT_SKIPPED]
    assert skipped == [3, 4]
