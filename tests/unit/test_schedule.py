"""Schedules that express loss mechanisms: partition targets, names, open faults, heal steps
and `after:` conditions; validated in the spec, run by the nemesis (a fake cluster: no Docker).
"""

from __future__ import annotations

import random
import time
from types import SimpleNamespace
from typing import Any

import pytest

from harness.chaos.conditions import ClusterView, ConditionError, parse_condition
from harness.chaos.faults import FaultContext, FaultError
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.model import FaultStep
from harness.experiment.plan import fault_class, schedule_for
from harness.experiment.problems import SpecError
from harness.nemesis.schedule import Nemesis
from harness.nemesis.targets import resolve_target
from harness.platform.topology import PartitionState, Role
from harness.rundir import layout
from harness.rundir.events import EventLog, EventType, load_events


def doc(schedule: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": "s",
        "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 1},
        "workload": {"rate": 100, "duration_s": 60},
        "faults": {"schedule": schedule},
        **extra,
    }


def problems_of(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        expand(parse_experiment(data))
    return str(caught.value)


def steps_of(data: dict[str, Any]) -> list[FaultStep]:
    (cell,) = expand(parse_experiment(data))
    return schedule_for(cell, 1)


UNCLEAN = [
    {"at_s": 5, "fault": "kill", "target": "followers", "as": "stale"},
    {"fault": "kill", "target": "leader", "as": "old_leader", "after": "isr_size(0) == 1"},
    {"fault": "heal", "target": "@stale", "after": "after_s(2)"},
    {"fault": "heal", "target": "@old_leader", "after": "not leader_is(@old_leader)"},
]


# --- conditions --------------------------------------------------------------------------------


def view(**changes: Any) -> ClusterView:
    base = {
        "leaders": {0: 1, 1: 2},
        "isrs": {0: [1, 2, 3], 1: [2]},
        "brokers": frozenset({1, 2, 3}),
        "bindings": {"old": [1], "pair": [2, 3]},
        "leaders_before": {0: 1, 1: 3},
        "since_previous_s": 4.0,
    }
    return ClusterView(**{**base, **changes})


@pytest.mark.parametrize(
    ("text", "met"),
    [
        ("isr_size(0) == 3", True),
        ("isr_size(1) == 1", True),
        ("isr_size(1) >= 2", False),
        ("isr_size(0) != 3", False),
        ("leader_changed(0)", False),
        ("leader_changed(1)", True),
        ("leader_is(@old)", True),  # the step's partition, 0
        ("leader_is(@old, 1)", False),
        ("not leader_is(@old, 1)", True),
        ("in_isr(@pair)", True),
        ("in_isr(@pair, 1)", False),
        ("has_leader(1)", True),
        ("has_leader()", True),
        ("isr_size() == 3", True),
        ("registered(@pair)", True),
        ("after_s(4)", True),
        ("after_s(4.5)", False),
        ("isr_size(0) == 3 and leader_changed(1)", True),
        ("isr_size(0) == 3 and leader_changed(0)", False),
        # `and` binds tighter than `or`.
        ("isr_size(0) == 1 or after_s(4)", True),
        ("isr_size(0) == 1 or after_s(5)", False),
        ("leader_changed(0) and after_s(1) or isr_size(1) == 1", True),
        ("isr_size(1) == 1 and leader_changed(0) or after_s(9)", False),
    ],
)
def test_a_condition_is_evaluated_against_a_view(text: str, met: bool):
    assert (parse_condition(text).unmet(view(), default_partition=0) == []) is met


def test_unmet_names_the_clauses_still_false():
    condition = parse_condition("isr_size(0) == 1 and has_leader(1) and after_s(9)")
    assert condition.unmet(view(), 0) == ["isr_size(0) == 1", "after_s(9)"]


def test_unmet_names_the_false_clauses_of_every_alternative_until_one_holds():
    condition = parse_condition("isr_size(0) == 1 and has_leader(1) or after_s(9)")
    assert condition.unmet(view(), 0) == ["isr_size(0) == 1", "after_s(9)"]
    assert condition.unmet(view(since_previous_s=9.0), 0) == []


def test_without_metadata_only_time_is_known():
    blind = ClusterView.unanswered({"old": [1]}, since_previous_s=3.0)
    assert parse_condition("after_s(2)").unmet(blind, 0) == []
    for text in ("has_leader(0)", "not has_leader(0)", "isr_size(0) == 0", "not leader_is(@old)"):
        assert parse_condition(text).unmet(blind, 0) == [text]


def test_a_node_no_longer_registered_fails_registered():
    assert parse_condition("registered(@pair)").unmet(view(brokers=frozenset({1, 2})), 0)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty condition"),
        ("isr_size(0)", "needs a comparison"),
        ("leader_changed(0) == 1", "takes no comparison"),
        ("leader_is(old)", "bound name first"),
        ("isr_size(x) == 1", "must be a number"),
        ("registered(@a, 1)", "takes no partition"),
        ("after_s(nan)", "0..86400"),
        ("after_s(1, 2)", "one number"),
        ("isr_sise(0) == 1", "cannot read"),
        ("isr_size(0) == 1 and ", "empty condition or clause"),
        ("isr_size(0) == 1 or ", "empty condition or clause"),
        ("or after_s(1)", "cannot read"),
    ],
)
def test_a_bad_condition_says_what_is_wrong(text: str, fragment: str):
    with pytest.raises(ConditionError) as caught:
        parse_condition(text)
    assert fragment in str(caught.value)


# --- validation ----------------------------------------------------------------------------------


def test_a_mechanism_schedule_is_valid_and_kept_in_file_order():
    steps = steps_of(doc(UNCLEAN))
    assert [(s.fault, s.target) for s in steps] == [
        ("kill", "followers"),
        ("kill", "leader"),
        ("heal", "@stale"),
        ("heal", "@old_leader"),
    ]
    assert steps[0].duration_s is None and steps[0].as_ == "stale"
    assert steps[1].condition is not None and steps[1].condition.names == ()


@pytest.mark.parametrize(
    ("schedule", "fragments"),
    [
        (
            [{"at_s": 1, "fault": "kill", "target": "@late"}, {**UNCLEAN[0], "as": "late"}],
            ("faults.schedule[0]", "@late is used before", "bound later"),
        ),
        (
            [{"at_s": 1, "fault": "heal", "target": "@nobody"}],
            ("faults.schedule[0]", "@nobody is used before"),
        ),
        (
            [
                {"at_s": 1, "fault": "kill", "target": "leader", "duration_s": 3, "as": "x"},
                {"fault": "heal", "target": "@x"},
            ],
            ("faults.schedule[1].target", "nothing to heal"),
        ),
        (
            [
                UNCLEAN[0],
                {"fault": "heal", "target": "@stale"},
                {"fault": "heal", "target": "@stale"},
            ],
            ("faults.schedule[2].target", "nothing to heal"),
        ),
        (
            [{"at_s": 1, "fault": "heal", "target": "leader"}],
            ("faults.schedule[0].target", "names the fault it ends as @name"),
        ),
        (
            [UNCLEAN[0], {"fault": "heal", "target": "@stale", "duration_s": 2}],
            ("faults.schedule[1]", "takes no duration_s"),
        ),
        (
            [UNCLEAN[0], {**UNCLEAN[0], "at_s": 6}],
            ("faults.schedule[1].as", "already bound by step 0"),
        ),
        (
            [{"at_s": 1, "fault": "kill", "target": "leader", "after": "isr_size(7) == 1"}],
            ("faults.schedule[0].after", "partition 7", "topic.partitions is 3"),
        ),
        (
            [{"at_s": 1, "fault": "kill", "target": "leader", "after": "leader_is(@ghost)"}],
            ("faults.schedule[0]", "@ghost is used before"),
        ),
        (
            [{"at_s": 1, "fault": "kill", "target": "isr", "partition": 5}],
            ("faults.schedule[0].partition", "partition 5 does not exist"),
        ),
        (
            [{"at_s": 1, "fault": "kill", "target": "leader", "after": "isr_size(0)"}],
            ("faults.schedule[0].after", "needs a comparison"),
        ),
        (
            [{"at_s": 1, "fault": "kill", "target": "leader", "as": "Old"}],
            ("faults.schedule[0].as", "is not a name"),
        ),
        (
            [{"at_s": 1, "fault": "heal", "target": "@x", "params": {"mode": "full"}}],
            ("faults.schedule[0].params", "takes no params"),
        ),
        (
            [{"at_s": 70, "fault": "kill", "target": "leader"}],
            ("faults.schedule[0].at_s", "after the workload ends"),
        ),
    ],
)
def test_every_misuse_is_explained(schedule: list[dict[str, Any]], fragments: tuple[str, ...]):
    message = problems_of(doc(schedule))
    for fragment in fragments:
        assert fragment in message, message


def test_a_generator_cannot_heal_or_use_names():
    generate = {
        "mean_interval_s": 5,
        "faults": ["kill", "heal"],
        "targets": ["leader", "@x"],
        "duration_s": [1, 2],
    }
    data = doc([])
    data["faults"] = {"generate": generate}
    message = problems_of(data)
    assert "faults.generate.faults" in message and "faults.generate.targets" in message


def test_replicated_targets_need_a_replica():
    data = doc([{"at_s": 1, "fault": "kill", "target": "followers", "duration_s": 2}])
    data["topic"] = {"partitions": 1, "replication_factor": 1, "min_insync_replicas": 1}
    assert "needs topic.replication_factor >= 2" in problems_of(data)


def test_fault_class_reads_through_names_and_skips_heals():
    steps = steps_of(doc([UNCLEAN[0], {"fault": "pause", "target": "@stale", "duration_s": 2}]))
    assert fault_class(steps) == "mixed"
    kill_only = steps_of(doc([UNCLEAN[0], {"fault": "kill", "target": "@stale", "duration_s": 2},
                              {"fault": "heal", "target": "@stale"}]))  # fmt: skip
    assert fault_class(kill_only) == "follower-kill"
    assert fault_class(steps_of(doc(UNCLEAN))) == "mixed"


# --- target resolution ---------------------------------------------------------------------------


class FakeNode:
    """A broker that records what faults do to it."""

    def __init__(self, node_id: int):
        self.node_id, self.hostname, self.role = node_id, f"kafka-{node_id}", Role.COMBINED
        self.actions: list[str] = []
        self.running = True

    def kill(self) -> None:
        self.running = False
        self.actions.append("kill")

    def start(self) -> None:
        self.running = True
        self.actions.append("start")

    def state(self) -> str:
        return "running" if self.running else "exited"


class FakeCluster:
    """Three brokers; partition 0 led by the first live replica, the ISR the live ones."""

    def __init__(self, isr_of_0: tuple[int, ...] = (1, 2, 3), ordered: bool = True):
        self.nodes = [FakeNode(i) for i in (1, 2, 3)]
        self.isr_of_0 = isr_of_0
        self.ordered = ordered  # replicas (1, 2, 3) in assignment order, or as a set

    def node(self, node_id: int) -> FakeNode:
        return self.nodes[node_id - 1]

    def _live(self) -> list[int]:
        return [n.node_id for n in self.nodes if n.running]

    def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
        isr = tuple(i for i in self.isr_of_0 if i in self._live())
        leader = isr[0] if isr else None
        return [PartitionState(0, leader, (1, 2, 3), isr, self.ordered)]

    def metadata(self, topic: str | None = None, timeout_s: float = 5.0) -> Any:
        (state,) = self.partition_states("t")
        partition = SimpleNamespace(
            id=0, leader=state.leader if state.leader is not None else -1, isrs=list(state.isr)
        )
        topics = {topic: SimpleNamespace(partitions={0: partition})}
        return SimpleNamespace(topics=topics, brokers={i: None for i in self._live()})


def context(cluster: FakeCluster) -> FaultContext:
    return FaultContext(cluster, "t", random.Random(7))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "isr", "ordered", "expected"),
    [
        ("leader", (1, 2, 3), True, [1]),
        ("followers", (1, 2, 3), True, [2, 3]),
        ("isr", (1, 3), True, [3]),
        ("out-of-sync", (1, 3), True, [2]),
        ("successor", (1, 2, 3), True, [2]),
        ("successor", (1, 3), True, [3]),
        ("successor", (1, 3, 2), True, [2]),  # the assignment's order, not the ISR's
        ("successor", (1, 3, 2), False, [3]),  # replicas as a set: the ISR's order
    ],
)
def test_partition_targets_resolve_against_the_partition_now(target, isr, ordered, expected):
    cluster = FakeCluster(isr, ordered)
    nodes = resolve_target(context(cluster), FaultStep(at_s=0, fault="kill", target=target))
    assert [n.node_id for n in nodes] == expected


@pytest.mark.parametrize("target", ["follower", "followers"])
def test_a_partition_without_a_leader_has_no_followers(target: str):
    """Not every replica: a step on the followers of a leaderless partition would otherwise
    pause or stop the whole replica set."""
    with pytest.raises(FaultError):
        resolve_target(context(FakeCluster(isr_of_0=())), FaultStep(fault="kill", target=target))


def test_an_empty_target_is_a_fault_error():
    with pytest.raises(FaultError, match="no out-of-sync replica"):
        resolve_target(context(FakeCluster()), FaultStep(fault="kill", target="out-of-sync"))


def test_the_seeded_follower_choice_is_deterministic():
    picks = {
        resolve_target(context(FakeCluster()), FaultStep(fault="kill", target="follower"))[
            0
        ].node_id
        for _ in range(5)
    }
    assert len(picks) == 1


def test_an_unbound_name_is_a_fault_error():
    with pytest.raises(FaultError, match="@x is not bound"):
        resolve_target(context(FakeCluster()), FaultStep(fault="kill", target="@x"), {})


# --- the nemesis runs a mechanism schedule -------------------------------------------------------


def run(
    cluster: FakeCluster, steps: list[FaultStep], tmp_path, disjoint: bool = False
) -> tuple[Nemesis, list[dict]]:
    events = EventLog(tmp_path / layout.EVENTS)
    nemesis = Nemesis(context(cluster), steps, events, disjoint=disjoint)
    nemesis.start(time.monotonic())
    assert nemesis._thread is not None
    nemesis._thread.join(20)
    assert not nemesis._thread.is_alive()
    events.close()
    return nemesis, load_events(tmp_path)


def test_open_faults_stay_until_their_heal_step_in_the_order_chosen(tmp_path):
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps_of(doc(UNCLEAN)), tmp_path)
    assert nemesis.errors == []
    # The followers died first, then the leader once it was alone; the followers came back
    # first (while the old leader was still down), then the old leader.
    assert all(n.actions == ["kill", "start"] for n in cluster.nodes)
    kinds = [(e["type"], e.get("nodes"), e.get("condition")) for e in events]
    assert kinds == [
        (EventType.FAULT_START, [2, 3], None),
        (EventType.CONDITION, None, "isr_size(0) == 1"),
        (EventType.FAULT_START, [1], None),
        (EventType.CONDITION, None, "after_s(2)"),
        (EventType.FAULT_END, [2, 3], None),
        (EventType.CONDITION, None, "not leader_is(@old_leader)"),
        (EventType.FAULT_END, [1], None),
    ]
    first = events[0]
    assert first["as"] == "stale" and first["open"] is True
    assert first["partitions"] == [
        {"partition": 0, "leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]}
    ]
    assert [r.get("hosts") or r["heal"] for r in nemesis.resolved] == [
        ["kafka-2", "kafka-3"],
        ["kafka-1"],
        "@stale",
        "@old_leader",
    ]


def test_a_condition_that_times_out_skips_the_rest_and_says_which(tmp_path):
    steps = steps_of(
        doc(
            [
                {"at_s": 0, "fault": "kill", "target": "node:3", "as": "x"},
                {
                    "fault": "kill",
                    "target": "leader",
                    "after": "isr_size(0) == 0",
                    "timeout_s": 0.6,
                },
                {"fault": "heal", "target": "@x"},
            ]
        )
    )
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps, tmp_path)
    (error,) = [e for e in events if e["type"] == EventType.FAULT_ERROR]
    assert error["stage"] == "condition" and error["step"] == 1
    assert "isr_size(0) == 0" in error["error"] and "not met within 0.6 s" in error["error"]
    # The leader was never killed; the open fault was still healed at the end.
    assert cluster.node(1).actions == [] and cluster.node(3).actions == ["kill", "start"]
    assert nemesis.errors and nemesis.active == []


def test_a_partition_can_be_the_one_a_bound_node_led(tmp_path):
    steps = steps_of(
        doc(
            [
                {"at_s": 0, "fault": "kill", "target": "node:1", "as": "old"},
                {"fault": "kill", "target": "successor", "partition": "@old", "as": "next"},
                {"fault": "heal", "target": "@old"},
                {"fault": "heal", "target": "@next"},
            ]
        )
    )
    cluster = FakeCluster()
    nemesis, events = run(cluster, steps, tmp_path)
    assert nemesis.errors == []
    starts = [e for e in events if e["type"] == EventType.FAULT_START]
    # node 1 led partition 0 when bound; the fake moves leadership at once (to 2), so the
    # successor there is then node 3, the next in-sync replica in replica order
    assert [(s["nodes"], s["partition"]) for s in starts] == [([1], 0), ([3], 0)]


def test_a_partition_name_must_be_bound_before():
    message = problems_of(
        doc([{"at_s": 1, "fault": "kill", "target": "leader", "partition": "@x"}])
    )
    assert "@x is used before" in message


def test_a_node_that_led_nothing_gives_no_partition(tmp_path):
    steps = steps_of(
        doc(
            [
                {"at_s": 0, "fault": "kill", "target": "node:3", "as": "idle"},
                {"fault": "kill", "target": "leader", "partition": "@idle"},
                {"fault": "heal", "target": "@idle"},
            ]
        )
    )
    _, events = run(FakeCluster(), steps, tmp_path)
    (error,) = [e for e in events if e["type"] == EventType.FAULT_ERROR]
    assert "@idle led no partition" in error["error"] and error["stage"] == "inject"
