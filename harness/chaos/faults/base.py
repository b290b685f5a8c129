"""The one interface every fault type implements: inject on resolved nodes, then heal."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from harness.platform.cluster import KafkaCluster, KafkaNode


class FaultError(RuntimeError):
    """A fault could not be injected or healed; the message names the node and the command."""


@dataclass
class FaultContext:
    """What a fault needs to act: the cluster, the experiment topic and a seeded RNG."""

    cluster: KafkaCluster
    topic: str
    rng: random.Random = field(default_factory=random.Random)
    netem: bool | None = None  # detected once per cluster, never assumed


class Fault(ABC):
    """One injected fault on concrete nodes; `heal` undoes it and is safe to call twice."""

    kind: str = ""
    tools: tuple[str, ...] = ()  # commands the broker image must have for this fault

    def __init__(self, ctx: FaultContext, nodes: list[KafkaNode], params: dict[str, Any]):
        self.ctx = ctx
        self.nodes = nodes
        self.params = params

    @abstractmethod
    def inject(self) -> dict[str, Any]:
        """Start the fault; return details worth recording in events.jsonl."""

    @abstractmethod
    def heal(self) -> None:
        """End the fault."""

    def outcome(self) -> dict[str, Any]:
        """After heal: what the fault ended up doing, worth recording (empty by default)."""
        return {}


def run_in(node: KafkaNode, argv: list[str]) -> str:
    """Run `argv` in `node`; raise FaultError with its output when it fails."""
    code, out = node.exec(argv)
    if code != 0:
        raise FaultError(f"kafka-{node.node_id}: `{' '.join(argv)}` exited {code}: {out.strip()}")
    return out


def check_tools(node: KafkaNode, faults: list[type[Fault]], image: str) -> None:
    """Raise FaultError naming what is missing when `node` lacks a tool the faults need."""
    needed = sorted({tool for fault in faults for tool in fault.tools})
    if not needed:
        return
    code, _ = node.exec(["sh", "-c", " && ".join(f"command -v {tool}" for tool in needed)])
    if code != 0:
        kinds = ", ".join(sorted({fault.kind for fault in faults if fault.tools}))
        raise FaultError(
            f"image {image} lacks {' or '.join(needed)}, which the {kinds} faults of this "
            "experiment run inside the broker container; use the locally built image "
            "(drop --image / kafka.image) or an image that has them"
        )
