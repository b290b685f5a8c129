"""Network partitions: a node cut off from the other brokers, fully isolated, or groups."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from harness.chaos.faults import netfilter
from harness.chaos.faults.base import Fault, FaultError, FaultParams, FaultRefused, HelperSite
from harness.limits import shown
from harness.rundir.events import FaultDetail
from harness.rundir.fault_classes import ClassKind

PartitionMode = Literal["from-brokers", "from-quorum", "full", "groups"]
# The <kind> of the fault class each mode yields: an isolated node differs from a zombie
# leader that clients still reach, and groups cut the whole cluster.
CLASS_KIND_OF_MODE: dict[str, ClassKind] = {
    "from-brokers": ClassKind.PARTITION,
    "from-quorum": ClassKind.PARTITION_QUORUM,
    "full": ClassKind.ISOLATE,
    "groups": ClassKind.PARTITION_GROUPS,
}
GROUPS_SHAPE = "must be a list of lists of node ids, e.g. [[1], [2, 3]]"


def _node_groups(groups: Any) -> Any:
    """Refuse anything but non-empty lists of distinct node ids >= 1, each id in one group."""
    if groups is None:
        return groups
    if not isinstance(groups, list) or not groups:
        raise ValueError(GROUPS_SHAPE)
    seen: set[int] = set()
    for group in groups:
        if not isinstance(group, list) or not group:
            raise ValueError(GROUPS_SHAPE)
        for node in group:
            if isinstance(node, bool) or not isinstance(node, int) or node < 1:
                raise ValueError(f"{GROUPS_SHAPE} (got {shown(node)})")
            if node in seen:
                raise ValueError(f"node {node} appears in two groups; list it once")
            seen.add(node)
    return groups


class PartitionParams(FaultParams):
    """Who is cut off from whom."""

    mode: Annotated[
        PartitionMode,
        Field(description="how the target is cut off"),
    ] = "from-brokers"
    groups: Annotated[
        list[list[int]] | None,
        BeforeValidator(_node_groups),
        Field(description="with mode groups: lists of node ids; the rest form one more group"),
    ] = None

    @model_validator(mode="after")
    def _groups_only_with_mode_groups(self) -> PartitionParams:
        if self.mode == "groups" and self.groups is None:
            raise ValueError("params.mode groups needs params.groups, e.g. [[1], [2, 3]]")
        if self.mode != "groups" and self.groups is not None:
            raise ValueError("params.groups is only used with params.mode: groups; remove it")
        return self


class PartitionDetail(FaultDetail, total=False):
    """The mode, and who was cut: the groups of node ids, or (from-quorum) the quorum's hosts."""

    mode: str
    groups: list[list[int]]
    cut_from: list[str]


class Partition(netfilter.Ruled, Fault[PartitionParams]):
    """Cut links between nodes with iptables in their namespaces.

    mode `from-brokers` (default): each target loses every other broker but clients on the
    host still reach it through its published port, the zombie-leader case. `full`: the target
    loses everyone, clients included. `groups`: params.groups, lists of node ids; links across
    groups are cut, nodes in no group form one more group.
    """

    name = "partition"
    Params = PartitionParams
    helper_site = HelperSite.BROKER_CONTAINER
    tools = ("iptables",)
    class_kinds = tuple(CLASS_KIND_OF_MODE.values())
    on_packets = True
    residue_cleanup = netfilter.CLEANUP

    @classmethod
    def class_kind(cls, params: PartitionParams) -> str:  # type: ignore[override]
        """partition, isolate (mode full) or partition-groups."""
        return CLASS_KIND_OF_MODE[params.mode]

    @classmethod
    def hits_whole_cluster(cls, params: PartitionParams) -> bool:  # type: ignore[override]
        """Groups cut the cluster as a whole; the step's target does not matter."""
        return params.mode == "groups"

    @classmethod
    def cluster_problems(  # type: ignore[override]
        cls, params: PartitionParams, brokers: int
    ) -> Iterator[tuple[str, str]]:
        """Group members beyond the cluster, or groups that leave nothing to cut."""
        groups = params.groups or []
        if not groups:
            return
        listed = set(itertools.chain.from_iterable(groups))
        for node in sorted(listed):
            if node > brokers:
                yield (
                    "params.groups",
                    f"node {shown(node)} does not exist: kafka.brokers is {brokers}",
                )
        # Nodes in no group form one more group; a partition needs at least two sides.
        if len(groups) + (len(listed) < brokers) < 2:
            reason = "all brokers are in one group, so nothing is cut; list at least two groups"
            yield "params.groups", reason

    def inject(self) -> PartitionDetail:
        mode = self.params.mode
        if mode == "full":
            for node in self.nodes:
                self.rules.apply(node, netfilter.interface_rules())
            return {"mode": mode}
        if mode == "from-quorum":
            return {"mode": mode, "cut_from": self._cut_from_quorum()}
        groups = self._groups() if mode == "groups" else self._target_vs_rest()
        self._cut(groups)
        return {"mode": mode, "groups": groups}

    def _cut_from_quorum(self) -> list[str]:
        """Cut each target off the metadata quorum (dedicated controllers, ZooKeeper servers;
        in combined KRaft the other combined nodes) while brokers and clients still reach it."""
        cluster = self.ctx.cluster
        targets = {id(node) for node in self.nodes}
        quorum = [n for n in (*cluster.ensemble, *cluster.quorum) if id(n) not in targets]
        if not quorum:
            raise FaultRefused("the cluster has no metadata quorum node besides the target")
        # A quorum node that is down has no address (and is cut off already).
        ips = [ip for node in quorum if (ip := node.ip(cluster.network_name))]
        for node in self.nodes:
            self.rules.apply(node, netfilter.peer_rules(ips))
        return [node.hostname for node in quorum]

    def _target_vs_rest(self) -> list[list[int]]:
        targets = sorted(node.node_id for node in self.nodes)
        rest = [node.node_id for node in self.ctx.cluster.nodes if node.node_id not in targets]
        return [targets, rest]

    def _groups(self) -> list[list[int]]:
        groups = [sorted(group) for group in self.params.groups or []]
        named = {i for group in groups for i in group}
        rest = [n.node_id for n in self.ctx.cluster.nodes if n.node_id not in named]
        if rest:
            groups.append(rest)
        if len(groups) < 2:
            raise FaultError("a partition needs at least two groups of nodes; fix params.groups")
        return groups

    def _cut(self, groups: list[list[int]]) -> None:
        """Drop cross-group traffic on the nodes of every group but the largest.

        Rules on one side of a link cut both directions, so the largest group (the healthy
        majority) is left untouched and the cut takes one exec per minority node.
        """
        cluster = self.ctx.cluster
        ips = cluster.node_ips()  # running nodes only: one that is down takes no rule
        for group in sorted(groups, key=len)[:-1]:
            outside = [ip for node_id, ip in ips.items() if node_id not in group]
            for node_id in group:
                if node_id in ips:
                    self.rules.apply(cluster.node(node_id), netfilter.peer_rules(outside))

    def heal(self) -> None:
        """Remove this cut's rules, wherever it put them; any other cut in force stays."""
        self.rules.release()
