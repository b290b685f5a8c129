"""iptables rules in a node's own network namespace, kept in one chain so heal is a flush.

Each broker container runs with NET_ADMIN and has iptables; the rules live in chain
KCHAOS, jumped to from INPUT and OUTPUT, so removing every fault means flushing one chain.
All rules for a node go in one `docker exec` (each costs ~0.2 s): a fault must start when
the schedule says, not seconds later.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from harness.chaos.faults.base import run_in

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode

CHAIN = "KCHAOS"
IPT = "iptables -w"
ENSURE_CHAIN = (
    f"{{ {IPT} -n -L {CHAIN} >/dev/null 2>&1 || {IPT} -N {CHAIN}; }}",
    f"{{ {IPT} -C INPUT -j {CHAIN} 2>/dev/null || {IPT} -I INPUT 1 -j {CHAIN}; }}",
    f"{{ {IPT} -C OUTPUT -j {CHAIN} 2>/dev/null || {IPT} -I OUTPUT 1 -j {CHAIN}; }}",
)

# For the final heal: empties the chain if it exists, and fails nothing when it does not.
CLEANUP = f"{{ {IPT} -n -L {CHAIN} >/dev/null 2>&1 && {IPT} -F {CHAIN}; }}"


def apply(node: KafkaNode, rules: list[list[str]]) -> None:
    """Append `rules` (argument lists after `iptables -A KCHAOS`) in `node`, in one exec."""
    lines = [*ENSURE_CHAIN, *(f"{IPT} -A {CHAIN} {shlex.join(rule)}" for rule in rules)]
    run_in(node, ["sh", "-c", " && ".join(lines)])


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


def flush(node: KafkaNode) -> None:
    """Remove every rule this harness added in `node` (no-op when the chain is absent)."""
    run_in(node, ["sh", "-c", f"{IPT} -n -L {CHAIN} >/dev/null 2>&1 || exit 0; {IPT} -F {CHAIN}"])
