"""A lossy network: each packet of the target dropped at random.

To and from everyone (`to: all`, the default): iptables' statistic match on the interface, both
directions. To chosen peers (`to: [brokers, controllers, clients]`): the target's outgoing
packets to them, dropped by the userspace shaper in a helper container (shape.py), as the
other shaped faults do.
"""

from __future__ import annotations

from harness.chaos.faults import netfilter
from harness.chaos.faults.base import Fault, HelperSite
from harness.chaos.faults.shape import LossParams, PeerDrop, ShapedDetail
from harness.rundir.events import FaultDetail, FaultEndDetail
from harness.rundir.fault_classes import ClassKind


class LossDetail(FaultDetail):
    """The share of packets dropped on the target's interface, %."""

    percent: float


class Loss(netfilter.Ruled, Fault[LossParams]):
    """Random packet loss of params.percent (default 30): on the target's interface, or of
    its packets to params.to only."""

    name = "loss"
    Params = LossParams
    helper_site = HelperSite.BROKER_CONTAINER
    tools = ("iptables",)
    class_kinds = (ClassKind.LOSS,)
    on_packets = True
    residue_cleanup = netfilter.CLEANUP
    _peers: PeerDrop | None = None  # the shaped drop to chosen peers, once injected

    def inject(self) -> LossDetail | ShapedDetail:
        percent = float(self.params.percent)
        if self.params.to != ["all"]:
            self._peers = PeerDrop(self.ctx, self.nodes, self.params, self.partition)
            return self._peers.inject()
        for node in self.nodes:
            self.rules.apply(node, netfilter.random_drop_rules(percent / 100.0))
        return {"percent": percent}

    def heal(self) -> None:
        if self._peers is not None:
            self._peers.heal()
            return
        self.rules.release()

    def detail(self) -> FaultEndDetail:
        """With peers: what the shaper dropped (packets seen, dropped)."""
        return {} if self._peers is None else self._peers.detail()
