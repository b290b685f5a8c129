"""A lossy network: each packet of the target dropped at random (iptables statistic match)."""

from __future__ import annotations

from typing import Any

from harness.chaos.faults import netfilter
from harness.chaos.faults.base import Fault


class Loss(Fault):
    """Random packet loss of params.percent (default 30) on the target's interface."""

    kind = "loss"
    tools = ("iptables",)

    def inject(self) -> dict[str, Any]:
        percent = float(self.params.get("percent", 30))
        for node in self.nodes:
            netfilter.apply(node, netfilter.random_drop_rules(percent / 100.0))
        return {"percent": percent}

    def heal(self) -> None:
        for node in self.nodes:
            if node.state() == "running":
                netfilter.flush(node)
