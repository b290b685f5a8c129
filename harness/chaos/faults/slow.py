"""A slow network: bandwidth limited with tbf; delay added with netem only where it exists."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultParams, HelperSite, run_in
from harness.limits import at_least, at_most, optional_whole, whole
from harness.rundir.events import FaultDetail
from harness.rundir.fault_classes import ClassKind

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode

REMOVE_QDISC = ["tc", "qdisc", "del", "dev", "eth0", "root"]
MAX_RATE_KBIT = 10_000_000
MAX_DELAY_MS = 600_000


class SlowParams(FaultParams):
    """The bandwidth left to the target and the delay added to its packets (tc takes wholes)."""

    rate_kbit: Annotated[
        whole,
        Field(ge=1, description="egress bandwidth left, whole kbit/s"),
        at_most(MAX_RATE_KBIT, "10 Gbit/s, more than any container link carries", "kbit/s"),
    ] = 256
    delay_ms: Annotated[
        optional_whole,
        Field(description="delay added to each packet, whole ms; needs netem"),
        at_least(0),
        at_most(MAX_DELAY_MS, "10 minutes, far beyond any client timeout", "ms"),
    ] = None


def netem_available(node: KafkaNode) -> bool:
    """Whether this kernel has the netem qdisc, found by trying it on a dummy-free probe."""
    code, _ = node.net_exec(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
    if code == 0:
        node.net_exec(["tc", "qdisc", "del", "dev", "lo", "root"])
    return code == 0


class SlowDetail(FaultDetail):
    """The rate left, the delay added (0 without netem), the qdisc, and whether netem is there."""

    rate_kbit: int
    qdisc: str
    netem_available: bool | None


class Slow(Fault[SlowParams]):
    """Egress of the target limited to params.rate_kbit (default 256); params.delay_ms via netem."""

    name = "slow"
    Params = SlowParams
    helper_site = HelperSite.BROKER_CONTAINER
    tools = ("tc",)
    class_kinds = (ClassKind.SLOW,)
    on_packets = True
    residue_cleanup = f"{shlex.join(REMOVE_QDISC)} 2>/dev/null"

    def inject(self) -> SlowDetail:
        rate = self.params.rate_kbit
        delay_ms = self.params.delay_ms or 0
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
                node.net_exec(REMOVE_QDISC)
