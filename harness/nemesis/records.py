"""What the nemesis keeps and writes about the faults it injects: the faults in force, a step
as it acted (spec.json's resolved_schedule), and the fault_start fields naming the nodes hit
and the roles just before."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from harness.chaos.faults import Fault
from harness.experiment.model import FaultStep
from harness.platform.node import KafkaNode
from harness.platform.topology import PartitionState
from harness.rundir.events import PartitionRoles

# A step as it acted, in spec.json's resolved_schedule: an injection (its fault, target, hosts
# and the name it bound, `as`) or the heal of a named fault (heal: "@name").
ResolvedStep = TypedDict(
    "ResolvedStep",
    {"step": int, "fault_id": int, "fault": str, "target": str, "hosts": list[str], "t_s": float,
     "as": str, "heal": str},
    total=False,
)  # fmt: skip


@dataclass
class ActiveFault:
    """A fault that was injected and not yet healed."""

    fault_id: int
    step: FaultStep
    fault: Fault


class Faulted(TypedDict):
    """The event fields naming faulted nodes (see faulted)."""

    nodes: list[int]
    hosts: list[str]


class Roles(TypedDict, total=False):
    """The fault_start fields of the roles just before an injection: `partitions`, or why not
    (`partitions_error`, with the last snapshot taken as `partitions` when there was one)."""

    partitions: list[PartitionRoles]
    partitions_error: str


def faulted(nodes: Sequence[KafkaNode]) -> Faulted:
    """The event fields naming faulted nodes: `nodes` the broker ids (what the analysis reads
    leaders and ISRs against), `hosts` every node's name, controllers and ZooKeeper too."""
    return {
        "nodes": [n.node_id for n in nodes if n.role.is_broker],
        "hosts": [n.hostname for n in nodes],
    }


def led_by(roles: Roles, nodes: Sequence[KafkaNode]) -> list[int]:
    """The partitions one of `nodes` led in a roles snapshot ([] without one)."""
    ids = {n.node_id for n in nodes if n.role.is_broker}
    return sorted(p["partition"] for p in roles.get("partitions", []) if p["leader"] in ids)


def states_field(states: Sequence[PartitionState]) -> list[PartitionRoles]:
    """Partition states as events record them (the sampler's shape, with the replicas)."""
    return [
        {
            "partition": s.partition,
            "leader": s.leader,
            "isr": list(s.isr),
            "replicas": list(s.replicas),
        }
        for s in states
    ]
