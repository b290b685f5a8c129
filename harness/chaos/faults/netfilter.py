"""iptables rules in a node's own network namespace, each fault's in a chain of its own.

Each broker container runs with NET_ADMIN and has iptables. Chain KCHAOS is jumped to from
INPUT and OUTPUT; each fault's rules live in a chain KCHAOS-<id> that KCHAOS jumps to, so a
fault's heal removes its own rules and leaves those of a fault still in force (a cut of
another node, in an overlapping schedule), and the final heal empties KCHAOS and drops every
such chain. All rules for a node go in one `docker exec` (each costs ~0.2 s): a fault must
start when the schedule says, not seconds later.
"""

from __future__ import annotations

import shlex
import uuid
from functools import cached_property
from typing import TYPE_CHECKING

from harness.chaos.faults.base import FaultError, run_in

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode

CHAIN = "KCHAOS"
IPT = "iptables -w"
ENSURE_CHAIN = (
    f"{{ {IPT} -n -L {CHAIN} >/dev/null 2>&1 || {IPT} -N {CHAIN}; }}",
    f"{{ {IPT} -C INPUT -j {CHAIN} 2>/dev/null || {IPT} -I INPUT 1 -j {CHAIN}; }}",
    f"{{ {IPT} -C OUTPUT -j {CHAIN} 2>/dev/null || {IPT} -I OUTPUT 1 -j {CHAIN}; }}",
)

# For the final heal: empties KCHAOS if it exists, then empties and drops every fault's chain,
# and fails nothing when there is none.
CLEANUP = (
    f"{{ {IPT} -n -L {CHAIN} >/dev/null 2>&1 && {IPT} -F {CHAIN}; }}; "
    f"{{ {IPT} -S 2>/dev/null | while read -r op name rest; do "
    f'[ "$op" = -N ] && case "$name" in {CHAIN}-*) {IPT} -F "$name"; {IPT} -X "$name";; esac; '
    "done; }"
)


class Rules:
    """The iptables rules of one fault, in its own chain on each node it applies them to."""

    def __init__(self) -> None:
        self.chain = f"{CHAIN}-{uuid.uuid4().hex[:8]}"
        self.nodes: dict[str, KafkaNode] = {}  # by host name: each node once

    def apply(self, node: KafkaNode, rules: list[list[str]]) -> None:
        """Add `rules` (argument lists after `iptables -A <chain>`) in `node`, in one exec:
        the chain filled first, then jumped to, so the rules start acting together."""
        self.nodes[node.hostname] = node  # first: a heal after a half-done apply removes it
        chain = self.chain
        lines = [
            *ENSURE_CHAIN,
            f"{{ {IPT} -n -L {chain} >/dev/null 2>&1 || {IPT} -N {chain}; }}",
            *(f"{IPT} -A {chain} {shlex.join(rule)}" for rule in rules),
            f"{{ {IPT} -C {CHAIN} -j {chain} 2>/dev/null || {IPT} -A {CHAIN} -j {chain}; }}",
        ]
        run_in(node, ["sh", "-c", " && ".join(lines)])

    def release(self) -> None:
        """Remove this fault's rules from every node it applied them to that runs (a node
        restarted since lost them with its namespace), leaving every other fault's; FaultError
        naming the nodes where that failed, after trying them all."""
        chain = self.chain
        line = (
            f"{IPT} -n -L {chain} >/dev/null 2>&1 || exit 0; "
            f"{IPT} -D {CHAIN} -j {chain} 2>/dev/null; {IPT} -F {chain} && {IPT} -X {chain}"
        )
        failed = []
        for node in self.nodes.values():
            try:
                if node.state() == "running":
                    run_in(node, ["sh", "-c", line])
            except Exception as exc:  # the other nodes still get theirs removed
                failed.append(str(exc))
        if failed:
            raise FaultError("; ".join(failed))


class Ruled:
    """A fault whose effect is iptables rules: `rules` in inject, `rules.release()` its heal
    (nothing when it added none)."""

    @cached_property
    def rules(self) -> Rules:
        return Rules()


def peer_rules(peer_ips: list[str]) -> list[list[str]]:
    """Rules that drop every packet to or from each of `peer_ips`."""
    return [
        rule for ip in peer_ips for rule in (["-s", ip, "-j", "DROP"], ["-d", ip, "-j", "DROP"])
    ]


def interface_rules(interface: str = "eth0") -> list[list[str]]:
    """Rules that drop everything in or out of `interface` (clients included)."""
    return [["-i", interface, "-j", "DROP"], ["-o", interface, "-j", "DROP"]]


def random_drop_rules(probability: float, interface: str = "eth0") -> list[list[str]]:
    """Rules that drop each packet on `interface` with `probability` (statistic match)."""
    return [
        [
            direction,
            interface,
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            f"{probability:.4f}",
            "-j",
            "DROP",
        ]
        for direction in ("-i", "-o")
    ]
