"""A lossy network: each packet of the target dropped at random (iptables statistic match)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from harness.chaos.faults import netfilter
from harness.chaos.faults.base import Fault, FaultParams, HelperSite
from harness.limits import param_number


class LossParams(FaultParams):
    """How many packets the target loses."""

    percent: Annotated[
        param_number, Field(ge=1, le=100, description="share of packets dropped, 1 to 100 %")
    ] = 30


class Loss(Fault[LossParams]):
    """Random packet loss of params.percent (default 30) on the target's interface."""

    name = "loss"
    Params = LossParams
    helper_site = HelperSite.BROKER_CONTAINER
    tools = ("iptables",)
    class_kinds = ("loss",)
    residue_cleanup = netfilter.CLEANUP

    def inject(self) -> dict[str, Any]:
        percent = float(self.params.percent)
        for node in self.nodes:
            netfilter.apply(node, netfilter.random_drop_rules(percent / 100.0))
        return {"percent": percent}

    def heal(self) -> None:
        for node in self.nodes:
            if node.state() == "running":
                netfilter.flush(node)
