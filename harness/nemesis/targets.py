"""What a schedule step's target names when the step acts: the nodes (or consumer members) of
`leader`, `follower`, `isr`, `successor`, `controller`, `txn-coordinator`, `node:<id>`,
`@name` and the rest, resolved against the cluster as it is then, and whether a step hit the
whole cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.chaos.coordinators import CONSUMER_OFFSETS, TRANSACTION_STATE, coordinator_of
from harness.chaos.faults import FAULT_TYPES, FaultContext, FaultError, consumer_members
from harness.chaos.faults.base import Fault, share_node
from harness.experiment.fields import AWAY_FROM_CONTROLLER, PARTITION_TARGETS
from harness.experiment.model import FaultStep
from harness.platform.node import KafkaNode
from harness.platform.topology import PartitionState, away_from


def resolve_target(
    ctx: FaultContext,
    step: FaultStep,
    bindings: dict[str, list[KafkaNode]] | None = None,
    partition: int | None = None,
    avoid: frozenset[str] = frozenset(),
    states: Sequence[PartitionState] | None = None,
) -> list[KafkaNode]:
    """The nodes `step.target` names right now; FaultError if there is none (e.g. no leader).

    `partition` is the step's partition resolved (for `@name`); None: `step.partition`. A
    target that picks one node at random (`random`, `follower`, `replica`) picks among the
    hosts not in `avoid` when any is left (a disjoint schedule's held nodes). `states`: the
    topic's partitions as the caller read them for this step (None: read them now), so that
    the roles a step records and the nodes it hits come from one reading."""
    cluster, target = ctx.cluster, step.target
    if (name := step.bound_target) is not None:
        if bindings is None or name not in bindings:
            raise FaultError(f"@{name} is not bound: the step that binds it did not act")
        return list(bindings[name])
    if FAULT_TYPES[step.fault].acts_on_consumers:  # group members, which act like nodes
        return consumer_members(ctx, target)
    if target in ("all", "brokers") or FAULT_TYPES[step.fault].hits_whole_cluster(step.params):
        return list(cluster.nodes)
    if target.startswith("node:"):
        return [cluster.node(int(target.split(":", 1)[1]))]
    if target.startswith("zookeeper:"):
        return [cluster.zookeeper(int(target.split(":", 1)[1]))]
    if target == "zookeeper":
        return list(cluster.ensemble)
    if target == "controllers":
        return list(cluster.quorum)
    if target == "random":
        return [ctx.rng.choice(_unless(list(cluster.nodes), avoid))]
    if target in COORDINATORS:
        return [cluster.node(_coordinator(ctx, target))]
    if target == "controller":
        controller = cluster.active_controller()
        if controller is None:
            raise FaultError("no active controller to target")
        return [cluster.node(controller)]
    if target == "controller-follower":
        active = cluster.active_controller()
        standby = [node for node in cluster.quorum if node.node_id != active]
        if not standby:
            raise FaultError("no KRaft controller other than the active one to target")
        return [ctx.rng.choice(standby)]
    p = int(step.partition) if partition is None else partition
    state = (cluster.partition_states(ctx.topic) if states is None else states)[p]
    if target in ("leader", "follower", "followers") and state.leader is None:
        raise FaultError(f"partition {p} has no leader, so no {target} to target")
    ids = state.named(target)
    if not ids:
        raise FaultError(f"partition {p} has no {target} replica to target")
    if target in ("follower", "replica"):
        return [ctx.rng.choice(_unless([cluster.node(i) for i in sorted(ids)], avoid))]
    return [cluster.node(node_id) for node_id in ids]


def step_partition(
    ctx: FaultContext,
    step: FaultStep,
    led: Mapping[str, Sequence[int]],
    states: Sequence[PartitionState] | None = None,
) -> int:
    """The step's partition: its number; for `@name`, the lowest partition `name`'s nodes led
    when bound (`led`: name → those partitions); for `away-from-controller`, the lowest whose
    leader and successor are not the active controller, in `states` (None: read now)."""
    if step.partition == AWAY_FROM_CONTROLLER:
        states = ctx.cluster.partition_states(ctx.topic) if states is None else states
        return away_from(states, ctx.cluster.active_controller())
    name = step.partition_binding
    if name is None:
        return int(step.partition)
    if not led.get(name):
        raise FaultError(f"@{name} led no partition of the topic when it was bound")
    return led[name][0]


def _unless(nodes: list[KafkaNode], avoid: frozenset[str]) -> list[KafkaNode]:
    """`nodes` whose hosts are not in `avoid`; all of them when none is left."""
    return [n for n in nodes if n.hostname not in avoid] or nodes


# target → (internal topic, the FaultContext field holding the id it coordinates)
COORDINATORS = {
    "txn-coordinator": (TRANSACTION_STATE, "transactional_id"),
    "group-coordinator": (CONSUMER_OFFSETS, "group_id"),
}


def _coordinator(ctx: FaultContext, target: str) -> int:
    """The broker id coordinating the workload's id for `target`, as the metadata says now."""
    topic, field = COORDINATORS[target]
    key = getattr(ctx, field)
    if key is None:
        raise FaultError(f"{target}: the workload has no {field.replace('_', '.')}")
    return coordinator_of(ctx.cluster, topic, key)


def free_partition(
    ctx: FaultContext,
    step: FaultStep,
    partition: int,
    held: frozenset[str],
    states: Sequence[PartitionState] | None = None,
) -> int:
    """For a step on a partition's role (`leader`, `follower` ...): the first partition of the
    topic, counting on from `partition` and wrapping, whose role names a broker whose host is
    not in `held`, in `states` (None: read now); `partition` when none does, for any other
    step, or when the metadata cannot be read. A disjoint schedule thereby hits the same role
    elsewhere rather than skip the step."""
    if step.target not in PARTITION_TARGETS:
        return partition
    try:
        states = ctx.cluster.partition_states(ctx.topic) if states is None else states
    except Exception:  # the step reads the metadata again, and says what failed
        return partition
    for offset in range(len(states)):
        state = states[(partition + offset) % len(states)]
        named = {ctx.cluster.node(i).hostname for i in state.named(step.target)}
        if named - held:
            return state.partition
    return partition


def whole_cluster(ctx: FaultContext, step: FaultStep, nodes: Sequence[KafkaNode]) -> bool:
    """Whether the step hit every broker, by its type or its resolved target: each partition
    is then judged by the "all" column (a power loss of all is not its leader's power loss)."""
    hit = {n.node_id for n in nodes if n.role.is_broker}
    every = bool(hit) and hit == {n.node_id for n in ctx.cluster.nodes}
    return every or FAULT_TYPES[step.fault].hits_whole_cluster(step.params)


def held_against(step: FaultStep, in_force: Sequence[Fault]) -> frozenset[str]:
    """The host names of the nodes that the faults `in_force` hold against `step` (a disjoint
    schedule): every node they act on, but those they share with it (share_node)."""
    coming = FAULT_TYPES[step.fault]
    return frozenset(
        node.hostname
        for fault in in_force
        if not share_node(type(fault), coming)
        for node in fault.nodes
    )
