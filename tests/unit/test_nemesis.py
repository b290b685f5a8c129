"""The nemesis records every failure to inject or heal as a fault_error event (no Docker)."""

from __future__ import annotations

from types import SimpleNamespace

from harness.chaos.faults import RESIDUE_CLEANUP
from harness.chaos.heal import heal_all
from harness.experiment.model import FaultStep
from harness.nemesis.records import ActiveFault, faulted
from harness.nemesis.schedule import Nemesis
from harness.nemesis.targets import whole_cluster
from harness.platform import disk_layer
from harness.platform.topology import Role, hostname_of
from harness.rundir import layout
from harness.rundir.events import EventLog, EventType, load_events


def step(target: str = "node:9") -> FaultStep:
    return FaultStep(at_s=0, fault="kill", target=target, partition=0, duration_s=1)


class NoNodes:
    """A cluster that has no node with the id asked for."""

    def node(self, node_id: int):
        raise KeyError(f"no node {node_id}")


class StuckFault:
    """A fault whose heal fails, as `docker start` of a vanished container does."""

    nodes = (SimpleNamespace(node_id=2, hostname="kafka-2", role=Role.COMBINED),)

    def heal(self) -> None:
        raise RuntimeError("container kafka-2 is gone")

    def detail(self) -> dict:
        return {}


def nemesis_at(tmp_path) -> tuple[Nemesis, EventLog]:
    events = EventLog(tmp_path / layout.EVENTS)
    return Nemesis(SimpleNamespace(cluster=NoNodes(), topic="t"), [], events), events


def test_an_injection_failure_is_a_fault_error_of_stage_inject(tmp_path):
    nemesis, events = nemesis_at(tmp_path)
    assert nemesis.injected == 0
    assert nemesis._inject(0, step()) is None
    assert nemesis.injected == 1  # an attempt counts: it got a fault id
    events.close()
    (event,) = load_events(tmp_path)
    assert event["type"] == EventType.FAULT_ERROR
    assert (event["stage"], event["fault"], event["target"]) == ("inject", "kill", "node:9")
    assert "no node 9" in event["error"] and nemesis.errors


def test_a_heal_failure_is_a_fault_error_of_stage_heal(tmp_path):
    nemesis, events = nemesis_at(tmp_path)
    nemesis.active.append(ActiveFault(3, step("leader"), StuckFault()))
    nemesis.heal_active()
    events.close()
    error, end = load_events(tmp_path)
    assert error["type"] == "fault_error" and error["stage"] == "heal"
    assert (error["fault_id"], error["fault"], error["target"]) == (3, "kill", "leader")
    assert error["error"] == "container kafka-2 is gone"
    assert end["type"] == "fault_end" and nemesis.active == []
    assert nemesis.errors == ["heal of fault 3: container kafka-2 is gone"]


class FakeNode:
    """A node in `state` that records what the final heal does to it."""

    def __init__(
        self, node_id: int, state: str, role: Role = Role.COMBINED, disk_layered: bool = False
    ):
        self.node_id, self._state, self.calls = node_id, state, []
        self.role = role
        self.hostname = hostname_of(role, node_id)
        self.disk_layered = disk_layered

    def state(self) -> str:
        return self._state

    def start(self) -> None:
        self.calls.append("start")
        self._state = "running"

    def unpause(self) -> None:
        self.calls.append("unpause")
        self._state = "running"

    def exec(self, argv: list[str]) -> tuple[int, str]:
        self.calls.append(argv)
        return 0, ""

    net_exec = exec  # the node's network namespace: the node itself, in these fakes


def fake_cluster(nodes: list[FakeNode], helpers: int = 0) -> SimpleNamespace:
    """A cluster of `nodes` with `helpers` helper containers left by faults never healed."""
    return SimpleNamespace(all_nodes=nodes, remove_helpers=lambda: helpers)


def test_heal_all_brings_each_node_back_then_runs_every_fault_types_cleanup():
    nodes = [FakeNode(1, "running"), FakeNode(2, "paused"), FakeNode(3, "exited")]
    actions = heal_all(SimpleNamespace(cluster=fake_cluster(nodes)))
    assert actions == ["unpause kafka-2", "start kafka-3"]
    cleanup = ["sh", "-c", RESIDUE_CLEANUP]
    assert [node.calls for node in nodes] == [[cleanup], ["unpause", cleanup], ["start", cleanup]]


def test_heal_all_turns_the_disk_faults_off_in_the_nodes_with_a_disk_layer_only():
    nodes = [FakeNode(1, "running", disk_layered=True), FakeNode(2, "exited")]
    heal_all(SimpleNamespace(cluster=fake_cluster(nodes)))
    cleanup = ["sh", "-c", RESIDUE_CLEANUP]
    assert nodes[0].calls == [cleanup, disk_layer.HEAL]
    assert nodes[1].calls == ["start", cleanup]
    # In the node itself (the control socket is in its file system), and never a failure.
    assert disk_layer.HEAL[:2] == ["sh", "-c"] and disk_layer.CONTROL in disk_layer.HEAL[2]


def test_heal_all_also_brings_back_zookeeper_servers_and_controllers():
    nodes = [
        FakeNode(1, "exited", Role.ZOOKEEPER),
        FakeNode(101, "paused", Role.CONTROLLER),
        FakeNode(1, "running", Role.BROKER),
    ]
    actions = heal_all(SimpleNamespace(cluster=fake_cluster(nodes)))
    assert actions == ["start zookeeper-1", "unpause controller-101"]


def test_a_fault_on_every_broker_is_whole_cluster_whatever_its_target_said():
    brokers = [FakeNode(i, "running", Role.BROKER) for i in (1, 2, 3)]
    ctx = SimpleNamespace(cluster=SimpleNamespace(nodes=brokers))
    loss = FaultStep(fault="lose-unsynced", target="all", at_s=1, duration_s=1)
    assert whole_cluster(ctx, loss, brokers)
    assert not whole_cluster(ctx, loss, brokers[:2])
    controller = FakeNode(101, "running", Role.CONTROLLER)
    assert not whole_cluster(ctx, loss, [controller])  # no broker hit
    kill_all = FaultStep(fault="kill-all", target="all", at_s=1, duration_s=1)
    assert whole_cluster(ctx, kill_all, brokers[:1])  # by its type


def test_fault_events_name_broker_ids_apart_from_other_nodes():
    nodes = [FakeNode(1, "running", Role.ZOOKEEPER), FakeNode(2, "running", Role.BROKER)]
    assert faulted(nodes) == {"nodes": [2], "hosts": ["zookeeper-1", "kafka-2"]}


def test_heal_all_removes_the_helpers_a_fault_left_and_says_so():
    actions = heal_all(SimpleNamespace(cluster=fake_cluster([FakeNode(1, "running")], helpers=2)))
    assert actions == ["removed 2 helper container(s)"]


class Answers:
    """A cluster whose partition states come from `states` until it stops answering."""

    def __init__(self) -> None:
        self.up = True

    def partition_states(self, topic: str, timeout_s: float = 0):
        if not self.up:
            raise RuntimeError("Failed to get metadata: Local: Broker transport failure")
        return [SimpleNamespace(partition=0, leader=1, isr=[1, 2], replicas=[1, 2, 3])]


def test_roles_fall_back_to_the_last_snapshot_marked_stale_when_no_broker_answers(tmp_path):
    cluster = Answers()
    nemesis = Nemesis(SimpleNamespace(cluster=cluster, topic="t"), [], EventLog(tmp_path / "e"))
    cluster.up = False
    assert nemesis._roles() == ({"partitions_error": "Failed to get metadata: Local: Broker "
                                 "transport failure"}, None)  # fmt: skip
    cluster.up = True
    fresh, states = nemesis._roles()
    assert fresh["partitions"][0]["leader"] == 1 and "partitions_error" not in fresh
    assert states is not None and states[0].leader == 1  # what the step resolves its target on
    cluster.up = False
    stale, unread = nemesis._roles()
    assert stale["partitions"] == fresh["partitions"] and unread is None
    assert stale["partitions_error"].startswith("Failed to get metadata")
    assert "partitions: the roles seen" in stale["partitions_error"]
