"""Network partitions: a node cut off from the other brokers, fully isolated, or groups."""

from __future__ import annotations

import contextlib
from typing import Any

from harness.chaos.faults import netfilter
from harness.chaos.faults.base import Fault, FaultError


class Partition(Fault):
    """Cut links between nodes with iptables in their namespaces.

    mode `from-brokers` (default): each target loses every other broker but clients on the
    host still reach it through its published port, the zombie-leader case. `full`: the target
    loses everyone, clients included. `groups`: params.groups, lists of node ids; links across
    groups are cut, nodes in no group form one more group.
    """

    kind = "partition"
    tools = ("iptables",)

    def inject(self) -> dict[str, Any]:
        mode = self.params.get("mode", "from-brokers")
        if mode == "full":
            for node in self.nodes:
                netfilter.apply(node, netfilter.interface_rules())
            return {"mode": mode}
        groups = self._groups() if mode == "groups" else self._target_vs_rest()
        self._cut(groups)
        return {"mode": mode, "groups": groups}

    def _target_vs_rest(self) -> list[list[int]]:
        targets = sorted(node.node_id for node in self.nodes)
        rest = [node.node_id for node in self.ctx.cluster.nodes if node.node_id not in targets]
        return [targets, rest]

    def _groups(self) -> list[list[int]]:
        groups = [sorted(int(i) for i in group) for group in self.params.get("groups", [])]
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
        ips = cluster.node_ips()
        for group in sorted(groups, key=len)[:-1]:
            outside = [ip for node_id, ip in ips.items() if node_id not in group]
            for node_id in group:
                netfilter.apply(cluster.node(node_id), netfilter.peer_rules(outside))

    def heal(self) -> None:
        for node in self.ctx.cluster.nodes:
            with contextlib.suppress(Exception):
                if node.state() == "running":
                    netfilter.flush(node)
