"""Membership change: a partition's replicas moved while the workload runs (the admin API's
AlterPartitionReassignments), and moved back at heal.

`drop` takes the target nodes out of the partition's replica set: a target that led it gives
up leadership to an in-sync follower, and its copy of the partition is deleted; the heal adds
it back, and it copies the partition from the start. `move` puts another broker (one holding
no replica, seeded) in each target's place; it needs more brokers than replicas. Each inject
and heal waits until the reassignment has completed (at most `timeout_s`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from harness.chaos.faults.base import AdminFault, FaultError, FaultParams, FaultRefused
from harness.limits import admin_wait_s
from harness.rundir.events import FaultDetail, FaultEndDetail
from harness.rundir.fault_classes import ClassKind

ReassignMode = Literal["drop", "move"]


class ReassignParams(FaultParams):
    """Where the partition's replicas go, and how long a reassignment may take."""

    mode: Annotated[
        ReassignMode, Field(description="drop the targets from the replica set, or move them")
    ] = "drop"
    timeout_s: Annotated[
        admin_wait_s, Field(description="seconds each reassignment may take to complete")
    ] = 60


def new_replicas(
    replicas: list[int], targets: list[int], brokers: list[int], mode: str, pick: Any
) -> list[int]:
    """The replica set after the fault: `replicas` without `targets` (drop), or with each
    target replaced by a broker holding none (move, `pick` choosing among the candidates);
    ValueError saying why when there is no such set."""
    missing = [t for t in targets if t not in replicas]
    if missing:
        raise ValueError(
            f"node(s) {missing} hold no replica of the partition (replicas {replicas})"
        )
    if mode == "drop":
        kept = [r for r in replicas if r not in targets]
        if not kept:
            raise ValueError("dropping every replica would leave the partition none; aim at fewer")
        return kept
    spare = [b for b in brokers if b not in replicas]
    if len(spare) < len(targets):
        raise ValueError(
            f"move needs a broker without a replica for each target: {len(brokers)} brokers "
            f"for {len(replicas)} replicas; raise kafka.brokers or use mode drop"
        )
    chosen = {t: spare.pop(spare.index(pick(spare))) for t in targets}
    return [chosen.get(r, r) for r in replicas]


class ReassignDetail(FaultDetail):
    """The mode, the replica sets before and after, the ISR then, and how long it took."""

    mode: str
    before: list[int]
    after: list[int]
    isr: list[int]
    completed_ms: int


class ReassignEnd(FaultEndDetail, total=False):
    """The replica set restored at heal and how long that took (nothing when never moved)."""

    restored: list[int]
    restored_ms: int


class Reassign(AdminFault[ReassignParams]):
    """The step's partition reassigned away from the targets (params.mode), back at heal."""

    name = "reassign"
    Params = ReassignParams
    class_kinds = (ClassKind.REASSIGN,)
    # The replicas to restore (until restored), and what the heal restored.
    _before: list[int] | None = None
    _restored: ReassignEnd | None = None

    def inject(self) -> ReassignDetail:
        from harness.platform.admin import AdminError, reassign

        cluster, topic = self.ctx.cluster, self.ctx.topic
        state = cluster.partition_states(topic)[self.partition]
        self._before = list(state.replicas)
        targets = [n.node_id for n in self.nodes if n.role.is_broker]
        try:
            after = new_replicas(
                list(state.replicas),
                targets,
                [n.node_id for n in cluster.nodes],
                self.params.mode,
                self.ctx.rng.choice,
            )
        except ValueError as exc:  # before any change: the replica set does not allow it
            raise FaultRefused(f"reassign of partition {self.partition}: {exc}") from exc
        try:
            done = reassign(cluster, topic, self.partition, after, float(self.params.timeout_s))
        except AdminError as exc:
            raise FaultError(f"reassign of partition {self.partition}: {exc}") from exc
        return {
            "mode": self.params.mode,
            "before": list(done.before),
            "after": list(done.after),
            "isr": list(done.isr),
            "completed_ms": done.ms,
        }

    def heal(self) -> None:
        from harness.platform.admin import AdminError, reassign

        if (before := self._before) is None:
            return
        try:
            done = reassign(
                self.ctx.cluster,
                self.ctx.topic,
                self.partition,
                before,
                float(self.params.timeout_s),
            )
        except AdminError as exc:
            raise FaultError(f"moving partition {self.partition} back: {exc}") from exc
        self._restored = {"restored": list(done.after), "restored_ms": done.ms}
        self._before = None

    def detail(self) -> ReassignEnd:
        """The replica set restored at heal and how long copying it back took."""
        return self._restored or ReassignEnd()
