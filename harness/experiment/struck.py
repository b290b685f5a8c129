"""A run's faults aimed at the partition its failure struck.

The generic nemesis aims a fault at a role of a partition drawn with it: the follower of
partition 0, say. The loss it sets off may strike another partition, through the role the
node held there. KAFKA-1211's find killed partition 0's follower and, 2 s later, its leader:
they were partition 2's leader and the replica Kafka elects next, and partition 2 lost what its
last follower truncated. Replayed, partition 0's roles fall on other nodes, and the draw seldom
meets partition 2's state again. Aimed, each fault names the role its nodes held, when it was
injected, in the struck partition, and every replay (every repeated round) strikes that
partition's roles again.

A step keeps its target when it is a heal, when it chose its node by a role of the cluster (the
controller, a coordinator, every broker: that role is why it was chosen), when its nodes held
none of AIMED_ROLES in the struck partition (one of two in-sync followers that is not the
successor), or when the run holds no reading of that partition for it.

The controller's place is kept too. KAFKA-1211's find struck a partition whose line of
succession (leader, successor) the active controller stood outside of; replayed, 10 of 18
rounds killed the controller as the successor, and no election ran until its session expired.
An aimed step whose run found the controller (a broker, the latest the run read before the
injection) among the struck partition's replicas but out of its line names the partition
`away-from-controller`: in the replay, the lowest partition whose line the controller is out of.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence

from harness.experiment.fields import AWAY_FROM_CONTROLLER, PARTITION_TARGETS
from harness.experiment.model import FaultStep
from harness.platform.topology import PartitionState
from harness.platform.versions import Feature, supports
from harness.rundir.events import FaultStart, PartitionRoles
from harness.rundir.release import KafkaVersion

__all__ = [
    "AIMED_ROLES",
    "AWAY_FROM_CONTROLLER",
    "aimed_at",
    "controller_at",
    "role_held",
    "struck_partition",
]

# The partition roles that name one set of nodes (not one chosen at random), in the order a
# node set is matched against them: a partition of one follower names it as both successor
# and followers, and the successor is the narrower role.
AIMED_ROLES: tuple[str, ...] = ("leader", "successor", "followers", "isr", "out-of-sync")
# Targets that chose their nodes by a partition's roles or by chance, not by a cluster role.
_AIMABLE = frozenset((*PARTITION_TARGETS, "random"))


def struck_partition(*by_partition: Mapping[str, int]) -> int | None:
    """The partition with the most messages in the counts `by_partition` (a run's lost and
    diverged, keyed by partition number as a string), the lowest on a tie; None when they count
    none."""
    struck: dict[int, int] = {}
    for counts in by_partition:
        for p, n in counts.items():
            struck[int(p)] = struck.get(int(p), 0) + n
    held = sorted(p for p, n in struck.items() if n > 0)
    return max(held, key=lambda p: struck[p]) if held else None


def role_held(state: PartitionState, nodes: Iterable[int]) -> str | None:
    """The first of AIMED_ROLES that names exactly `nodes` (broker ids) in `state`; None when
    none does or `nodes` is empty."""
    wanted = set(nodes)
    return next((r for r in AIMED_ROLES if wanted and set(state.named(r)) == wanted), None)


def aimed_at(
    steps: Sequence[FaultStep],
    starts: Iterable[FaultStart],
    partition: int,
    version: str,
    controllers: Sequence[tuple[int, int]] = (),
) -> tuple[FaultStep, ...]:
    """`steps` (the run's schedule, on Kafka `version`) with each fault step that chose its
    nodes by a partition role or at random, and whose fault_start event read `partition`,
    aimed at the role its nodes held there then: that role as target, and as partition
    `partition`, or `away-from-controller` where the controller was out of its line (the
    module's docstring; `controllers`: the run's (ts_us, controller id) readings, in time
    order). Every other step unchanged, in the same order."""
    met = {s.step: s for s in starts if s.step is not None}
    ordered = supports(KafkaVersion.parse(version), Feature.ASSIGNMENT_ORDER)
    return tuple(
        _aim(step, met.get(index), partition, ordered, controllers)
        for index, step in enumerate(steps)
    )


def _aim(
    step: FaultStep,
    start: FaultStart | None,
    partition: int,
    ordered: bool,
    controllers: Sequence[tuple[int, int]],
) -> FaultStep:
    """`step` aimed as aimed_at says, given its own fault_start event `start`."""
    if start is None or (state := _state_met(step, start, partition, ordered)) is None:
        return step
    if (role := role_held(state, start.nodes)) is None:
        return step
    controller = controller_at(controllers, start.ts_us)
    clear = controller in state.replicas and not state.in_line(controller)
    where = AWAY_FROM_CONTROLLER if clear else partition
    aimed = {**step.model_dump(by_alias=True), "target": role, "partition": where}
    return FaultStep.model_validate(aimed)  # validated again, as a file's step is


def controller_at(controllers: Sequence[tuple[int, int]], ts_us: int | None) -> int | None:
    """The controller id of the latest reading in `controllers` ((ts_us, id), in time order)
    taken at or before `ts_us`; None when none was, or `ts_us` is None."""
    if ts_us is None:
        return None
    at = bisect.bisect_right(controllers, ts_us, key=lambda reading: reading[0])
    return controllers[at - 1][1] if at else None


def _state_met(
    step: FaultStep, start: FaultStart, partition: int, ordered: bool
) -> PartitionState | None:
    """`partition`'s state when `step` was injected, as `start` read it (its replicas in
    assignment order when `ordered`); None when the step keeps its target (a heal, a cluster
    role, a whole-cluster fault, no reading, or an event of another step)."""
    if step.heals or step.target not in _AIMABLE or start.whole_cluster:
        return None
    if (start.fault, start.target) != (step.fault, step.target):
        return None
    reading = next((r for r in start.partitions or () if r.get("partition") == partition), None)
    return None if reading is None else _state(partition, reading, ordered)


def _state(partition: int, reading: PartitionRoles, ordered: bool) -> PartitionState:
    """A fault_start's reading of one partition as the metadata's state of it."""
    return PartitionState(
        partition=partition,
        leader=reading.get("leader"),
        replicas=tuple(reading.get("replicas") or ()),
        isr=tuple(reading.get("isr") or ()),
        in_assignment_order=ordered,
    )
