"""A slow network: bandwidth limited with tbf; delay added with netem only where it exists."""

from __future__ import annotations

from typing import Any

from harness.chaos.faults.base import Fault, run_in
from harness.platform.cluster import KafkaNode


def netem_available(node: KafkaNode) -> bool:
    """Whether this kernel has the netem qdisc, found by trying it on a dummy-free probe."""
    code, _ = node.exec(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
    if code == 0:
        node.exec(["tc", "qdisc", "del", "dev", "lo", "root"])
    return code == 0


class Slow(Fault):
    """Egress of the target limited to params.rate_kbit (default 256); params.delay_ms via netem."""

    kind = "slow"
    tools = ("tc",)

    def inject(self) -> dict[str, Any]:
        rate = int(self.params.get("rate_kbit", 256))
        delay_ms = int(self.params.get("delay_ms", 0))
        if delay_ms and self.ctx.netem is None:
            self.ctx.netem = netem_available(self.nodes[0])
        use_netem = bool(delay_ms and self.ctx.netem)
        # netem shapes rate and delay together; tbf (always present) shapes rate only.
        qdisc = (
            ["netem", "delay", f"{delay_ms}ms", "rate", f"{rate}kbit"]
            if use_netem
            else ["tbf", "rate", f"{rate}kbit", "burst", "32kbit", "latency", "400ms"]
        )
        for node in self.nodes:
            run_in(node, ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", *qdisc])
        return {
            "rate_kbit": rate,
            "delay_ms": delay_ms if use_netem else 0,
            "qdisc": "netem" if use_netem else "tbf",
            "netem_available": self.ctx.netem,
        }

    def heal(self) -> None:
        for node in self.nodes:
            if node.state() == "running":
                node.exec(["tc", "qdisc", "del", "dev", "eth0", "root"])
