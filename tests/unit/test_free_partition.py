"""Where a disjoint schedule's role step acts: `free_partition` (the next partition whose role
names a free broker) and the free-node picks of `follower` and `random`, against oracles
written here from the documented rule; and a cascade's steps on distinct replicas."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.faults import FaultContext, FaultError
from harness.experiment.fields import PARTITION_TARGETS
from harness.experiment.model import FaultStep
from harness.nemesis.targets import free_partition, resolve_target, step_partition
from harness.platform.topology import PartitionState
from harness.rundir.events import EventType
from tests.unit.test_schedule import FakeCluster, FakeNode, run

BROKERS = (1, 2, 3)


class StatedCluster:
    """Three brokers whose partitions are the given states."""

    def __init__(self, states: list[PartitionState]):
        self.nodes = [FakeNode(i) for i in BROKERS]
        self.states = states

    def node(self, node_id: int) -> FakeNode:
        return self.nodes[node_id - 1]

    def partition_states(self, topic: str, timeout_s: float = 5.0) -> list[PartitionState]:
        return self.states


@st.composite
def partition_states(draw: st.DrawFn) -> list[PartitionState]:
    """1 to 4 partitions, each with 1 to 3 replicas in some order, a leader among them or
    none, and an ISR (the leader first when there is one) in some order."""
    states = []
    for p in range(draw(st.integers(1, 4))):
        replicas = tuple(draw(st.permutations(BROKERS))[: draw(st.integers(1, 3))])
        leader = draw(st.none() | st.sampled_from(replicas))
        others = [r for r in replicas if r != leader]
        in_sync = [r for r in draw(st.permutations(others)) if draw(st.booleans())]
        isr = tuple(([leader] if leader is not None else []) + in_sync)
        states.append(PartitionState(p, leader, replicas, isr))
    return states


def named_oracle(state: PartitionState, target: str) -> set[int]:
    """The brokers a partition role names, read from the targets' documented meanings."""
    non_leader_isr = [r for r in state.isr if r != state.leader]
    if target == "replica":
        return set(state.replicas)
    if target == "leader":
        return set() if state.leader is None else {state.leader}
    if target in ("follower", "followers"):
        return set() if state.leader is None else set(state.replicas) - {state.leader}
    if target == "isr":
        return set(non_leader_isr)
    if target == "successor":
        return set(non_leader_isr[:1])
    return set(state.replicas) - set(state.isr)  # out-of-sync


@given(
    partition_states(),
    st.sampled_from(PARTITION_TARGETS),
    st.integers(0, 3),
    st.sets(st.sampled_from(BROKERS)),
)
def test_a_held_role_moves_to_the_next_partition_that_names_a_free_broker(
    states: list[PartitionState], target: str, start: int, held_ids: set[int]
) -> None:
    start %= len(states)
    ctx = SimpleNamespace(cluster=StatedCluster(states), topic="t")
    held = frozenset(f"kafka-{i}" for i in held_ids)
    step = FaultStep(at_s=0, fault="kill", target=target, partition=start)
    expected = start  # the oracle: count on from `start`, wrapping
    for offset in range(len(states)):
        state = states[(start + offset) % len(states)]
        if named_oracle(state, target) - held_ids:
            expected = state.partition
            break
    assert free_partition(ctx, step, start, held) == expected  # type: ignore[arg-type]


@given(partition_states(), st.sets(st.sampled_from(BROKERS)), st.integers(0, 2**32))
def test_follower_and_random_pick_a_free_broker_when_one_is_named(
    states: list[PartitionState], held_ids: set[int], seed: int
) -> None:
    cluster = StatedCluster(states)
    ctx = FaultContext(cluster, "t", random.Random(seed))  # type: ignore[arg-type]
    avoid = frozenset(f"kafka-{i}" for i in held_ids)
    (picked,) = resolve_target(ctx, FaultStep(at_s=0, fault="kill", target="random"), avoid=avoid)
    assert picked.node_id not in held_ids or set(BROKERS) <= held_ids
    state = states[0]
    followers = named_oracle(state, "follower")
    if not followers:
        return  # no leader or no other replica: resolve_target says so (tested elsewhere)
    step = FaultStep(at_s=0, fault="kill", target="follower", partition=0)
    (picked,) = resolve_target(ctx, step, partition=0, avoid=avoid)
    assert picked.node_id in followers
    assert picked.node_id not in held_ids or followers <= held_ids


def test_a_cascade_takes_each_replica_once_in_either_direction(tmp_path):
    """Followers first: 2, 3, then the leader 1. Leader first: 1, then the successor the ISR
    names after it (3, once 2 leads), then the replica left (2, the leader now)."""
    for chain, expected in (
        (["follower", "follower", "leader"], None),
        (["leader", "successor", "replica"], [[1], [3], [2]]),
    ):
        steps = [
            FaultStep(at_s=0, fault="kill", target=role, as_=f"c0_{j}")
            for j, role in enumerate(chain)
        ]
        steps += [FaultStep(at_s=0, fault="heal", target=f"@c0_{j}") for j in (2, 0, 1)]
        run_dir = tmp_path / chain[0]
        run_dir.mkdir()
        nemesis, events = run(FakeCluster(), steps, run_dir, disjoint=True)
        assert nemesis.errors == []
        hit = [e["nodes"] for e in events if e["type"] == EventType.FAULT_START]
        assert sorted(n for (n,) in hit) == [1, 2, 3]
        if expected is not None:
            assert hit == expected
        else:
            assert hit[-1] == [1]


@given(partition_states(), st.sampled_from([None, 1, 2, 3, 101]), st.booleans())
def test_away_from_controller_is_the_lowest_partition_out_of_its_line(
    states, controller, read_now
) -> None:
    """Oracle: the partitions whose leader is not the active controller and whose successor
    (the first in-sync replica but the leader, in assignment order) is not either; the lowest
    of them, else the lowest partition. Read from `states` when given, from the cluster else."""
    cluster = StatedCluster(states)
    cluster.active_controller = lambda: controller  # type: ignore[attr-defined]
    ctx = SimpleNamespace(cluster=cluster, topic="t")
    step = FaultStep(fault="kill", target="leader", partition="away-from-controller")

    def line(s: PartitionState) -> set[int | None]:
        return {s.leader, *[r for r in s.replicas if r in s.isr and r != s.leader][:1]}

    clear = [s.partition for s in states if controller is None or controller not in line(s)]
    expected = min(clear or [s.partition for s in states])
    assert step_partition(ctx, step, {}, None if read_now else states) == expected
    assert step.partition_binding is None


def test_a_numbered_or_bound_partition_is_its_number_or_the_bound_nodes_lowest() -> None:
    ctx = SimpleNamespace(cluster=None, topic="t")
    bound = FaultStep(fault="kill", target="leader", partition="@a")
    assert step_partition(ctx, FaultStep(fault="kill", target="leader", partition=3), {}) == 3
    assert step_partition(ctx, bound, {"a": [2, 4]}) == 2
    with pytest.raises(FaultError, match="@a led no partition"):
        step_partition(ctx, bound, {"a": []})


@given(
    st.one_of(
        st.integers(-3, 10_003),
        st.booleans(),
        st.floats(allow_nan=False),
        st.sampled_from(["away-from-controller", "@a", "@b_2", "@B", "@", "away", "0", ""]),
        st.text(max_size=8),
    )
)
def test_a_step_partition_is_a_number_a_bound_name_or_away_from_controller(value) -> None:
    """Oracle: a whole number (not a bool) 0..9,999, "@" and a lowercase name, or the word
    away-from-controller; anything else is refused with the three forms named."""
    import re

    from pydantic import ValidationError

    ok = (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 9_999) or (
        isinstance(value, str)
        and (value == "away-from-controller" or re.fullmatch(r"@[a-z][a-z0-9_]*", value))
    )
    try:
        step = FaultStep(fault="kill", target="leader", partition=value)
    except ValidationError as exc:
        assert not ok
        assert '"@name"' in str(exc) and "away-from-controller" in str(exc)
    else:
        assert ok and step.partition == value and type(step.partition) is type(value)
