"""iptables rules in a node's own network namespace, kept in one chain so heal is a flush.

Each broker container runs with NET_ADMIN and has iptables; the rules live in chain
KCHAOS, jumped to from INPUT and OUTPUT, so removing every fault means flushing one chain.
"""

from __future__ import annotations

from harness.cluster import KafkaNode
from harness.faults.base import run_in

CHAIN = "KCHAOS"


def ensure_chain(node: KafkaNode) -> None:
    """Create the KCHAOS chain and its jumps in `node` if they are missing."""
    code, _ = node.exec(["iptables", "-w", "-n", "-L", CHAIN])
    if code != 0:
        run_in(node, ["iptables", "-w", "-N", CHAIN])
    for hook in ("INPUT", "OUTPUT"):
        code, _ = node.exec(["iptables", "-w", "-C", hook, "-j", CHAIN])
        if code != 0:
            run_in(node, ["iptables", "-w", "-I", hook, "1", "-j", CHAIN])


def drop_peer(node: KafkaNode, peer_ip: str) -> None:
    """Drop every packet between `node` and `peer_ip`, both directions."""
    ensure_chain(node)
    run_in(node, ["iptables", "-w", "-A", CHAIN, "-s", peer_ip, "-j", "DROP"])
    run_in(node, ["iptables", "-w", "-A", CHAIN, "-d", peer_ip, "-j", "DROP"])


def drop_interface(node: KafkaNode, interface: str = "eth0") -> None:
    """Drop everything in or out of `interface` (clients included): full isolation."""
    ensure_chain(node)
    run_in(node, ["iptables", "-w", "-A", CHAIN, "-i", interface, "-j", "DROP"])
    run_in(node, ["iptables", "-w", "-A", CHAIN, "-o", interface, "-j", "DROP"])


def drop_randomly(node: KafkaNode, probability: float, interface: str = "eth0") -> None:
    """Drop each packet on `interface` with `probability` (iptables statistic match)."""
    ensure_chain(node)
    for direction in ("-i", "-o"):
        run_in(node, ["iptables", "-w", "-A", CHAIN, direction, interface, "-m", "statistic",
                      "--mode", "random", "--probability", f"{probability:.4f}", "-j", "DROP"])


def flush(node: KafkaNode) -> None:
    """Remove every rule this harness added in `node` (no-op when the chain is absent)."""
    code, _ = node.exec(["iptables", "-w", "-n", "-L", CHAIN])
    if code == 0:
        run_in(node, ["iptables", "-w", "-F", CHAIN])
