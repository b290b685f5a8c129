"""Membership change of the KRaft controller quorum (KIP-853: a dynamic quorum, Kafka 3.9+,
dedicated controllers): a controller taken out of the voter set through the admin API while
the workload runs, and added back at heal.

The removed controller keeps running and goes on fetching the metadata log as an observer,
which is what lets the heal add it back: the quorum's leader only takes a new voter that has
caught up. Removing the active controller makes it resign once the change is committed, and
the remaining voters elect a leader among themselves. Of three controllers, one removed
leaves a quorum of two, where one more controller down stops every metadata change (ISR
changes, leader elections) until the heal.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field

from harness.chaos.faults.base import AdminFault, FaultError, FaultParams
from harness.limits import admin_wait_s
from harness.rundir.events import FaultDetail, FaultEndDetail
from harness.rundir.fault_classes import ClassKind


class RemoveControllerParams(FaultParams):
    """Which way the voter changes reach the quorum, and how long each may take."""

    via: Annotated[
        Literal["controllers", "brokers"],
        Field(
            description="ask the controllers themselves (kafka-metadata-quorum "
            "--bootstrap-controller) or the brokers, which forward to the active controller "
            "(--bootstrap-server)"
        ),
    ] = "controllers"
    timeout_s: Annotated[
        admin_wait_s, Field(description="seconds the removal, and the heal's addition, may take")
    ] = 60


class RemovedDetail(FaultDetail):
    """The controller removed, the voters and leader before and after, how long it took, and
    how often the leader refused first and why (last), how many admin clients were new."""

    controller: int
    voters_before: list[int]
    leader_before: int
    voters_after: list[int]
    leader_after: int
    completed_ms: int
    refusals: NotRequired[int]
    last_refusal: NotRequired[str]
    new_clients: NotRequired[int]


class RestoredDetail(FaultEndDetail, total=False):
    """The same of the heal's addition (nothing when no controller was removed)."""

    voters_restored: list[int]
    leader_restored: int
    restored_ms: int
    restore_refusals: int
    restore_last_refusal: str
    restore_new_clients: int


class RemoveController(AdminFault[RemoveControllerParams]):
    """The targeted KRaft controller removed from the voter set, added back at heal."""

    name = "remove-controller"
    Params = RemoveControllerParams
    class_kinds = (ClassKind.QUORUM_CHANGE,)
    # The controller removed (until added back), and what the heal restored.
    _removed: int | None = None
    _restored: RestoredDetail | None = None
    needs_dynamic_quorum = True

    def inject(self) -> RemovedDetail:
        from harness.platform.admin import AdminError, remove_voter
        from harness.platform.topology import Role, directory_id

        cluster = self.ctx.cluster
        if not cluster.dynamic_quorum:
            raise FaultError("remove-controller needs a dynamic quorum: set kafka.quorum dynamic")
        controllers = [node for node in self.nodes if node.role is Role.CONTROLLER]
        if len(controllers) != 1:
            raise FaultError(
                "remove-controller takes out one dedicated KRaft controller: target "
                "`controller` or `controller-follower`"
            )
        node = controllers[0]
        try:
            after = remove_voter(
                cluster,
                node.node_id,
                directory_id(cluster.cluster_id, node.node_id),
                self.params.via,
                float(self.params.timeout_s),
            )
        except AdminError as exc:
            raise FaultError(f"remove-controller of {node.hostname}: {exc}") from exc
        self._removed = node.node_id
        before = after.before or after
        detail: RemovedDetail = {
            "controller": node.node_id,
            "voters_before": before.voter_ids,
            "leader_before": before.leader,
            "voters_after": after.voter_ids,
            "leader_after": after.leader,
            "completed_ms": after.ms,
        }
        if after.refusals:
            detail |= {"refusals": after.refusals, "last_refusal": after.last_refusal}
        if after.new_clients:
            detail["new_clients"] = after.new_clients
        return detail

    def heal(self) -> None:
        from harness.platform.admin import AdminError, add_voter
        from harness.platform.topology import CONTROLLER_PORT, directory_id

        if (node_id := self._removed) is None:
            return
        cluster = self.ctx.cluster
        node = cluster.node(node_id)
        try:
            after = add_voter(
                cluster,
                node_id,
                directory_id(cluster.cluster_id, node_id),
                (node.hostname, CONTROLLER_PORT),
                self.params.via,
                float(self.params.timeout_s),
            )
        except AdminError as exc:
            raise FaultError(f"adding {node.hostname} back to the quorum: {exc}") from exc
        restored: RestoredDetail = {
            "voters_restored": after.voter_ids,
            "leader_restored": after.leader,
            "restored_ms": after.ms,
        }
        if after.refusals:
            restored |= {
                "restore_refusals": after.refusals,
                "restore_last_refusal": after.last_refusal,
            }
        if after.new_clients:
            restored["restore_new_clients"] = after.new_clients
        self._restored, self._removed = restored, None

    def detail(self) -> RestoredDetail:
        """The voter set restored at heal and how long adding the controller back took."""
        return self._restored or RestoredDetail()
