"""What happened to each partition in a repetition, read from its events: which faults hit
which of its replicas in which role, how its leader changed, and what its ISR was.

The roles come from the leader/ISR/replicas snapshot the nemesis records with every
fault_start (`partitions`), so a fault on "the follower of partition 0" that also led
partition 2 counts as a leader fault for partition 2. Runs recorded before that snapshot
existed have no roles: `partition_histories` returns None and the judge falls back to the
cell's fault class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from analysis.model.evidence import RunEvidence
from harness.rundir.events import FaultEnd, FaultStart, Sample
from harness.rundir.fault_classes import deciding_class

__all__ = [
    "FaultHit",
    "IsrSample",
    "LeaderChange",
    "PartitionHistory",
    "leader_changes",
    "partition_fault_class",
    "partition_histories",
    "timeline_t",
]

LEADER: Final = "leader"
FOLLOWER: Final = "follower"
WHOLE: Final = "all"  # a fault on every broker, whatever the partition
QUORUM_CHANGE: Final = "quorum-change"  # the class kind of remove-controller


@dataclass(frozen=True)
class FaultHit:
    """One fault on replicas of one partition, with the role they had when it began."""

    fault_id: int
    fault: str  # the fault type, e.g. kill
    kind: str  # its fault-class kind, e.g. partition-quorum
    role: str  # leader (the leader was among the nodes), follower, or all
    nodes: tuple[int, ...]  # the partition's replicas it hit
    ts_us: int
    healed_us: int | None = None  # when it was healed (its fault_end); None: not recorded
    replicas: tuple[int, ...] = ()  # the partition's replicas when it began (its snapshot)
    # The partition's leader and ISR as the nemesis read them just before the fault: a
    # reading newer than the sampler's last when no broker has answered the sampler since.
    at_start: IsrSample | None = None

    @property
    def fault_class(self) -> str:
        """'<role>-<kind>', the guarantee table's key."""
        return f"{self.role}-{self.kind}"

    @classmethod
    def of(
        cls,
        event: FaultStart,
        role: str,
        nodes: tuple[int, ...],
        kind: str = "",
        healed_us: int | None = None,
        replicas: tuple[int, ...] = (),
        at_start: IsrSample | None = None,
    ) -> FaultHit:
        """The hit of fault_start `event` on `nodes` in `role`, of the event's class kind
        unless `kind` says otherwise."""
        kind = kind or event.class_kind or event.fault or ""
        fault, ts_us = event.fault or "", _ts(event)
        return cls(
            event.fault_id or 0, fault, kind, role, nodes, ts_us, healed_us, replicas, at_start
        )


@dataclass(frozen=True)
class LeaderChange:
    """A partition's leader differing between two successive samples."""

    ts_us: int
    partition: int
    old: int | None
    new: int | None
    isr_before: tuple[int, ...] = ()  # the ISR the previous sample showed

    @property
    def label(self) -> str:
        """'p0 2→3', with 'none' for a partition without leader."""
        return f"p{self.partition} {_node(self.old)}→{_node(self.new)}"


@dataclass(frozen=True)
class IsrSample:
    """The leader and ISR of a partition in one sample."""

    ts_us: int
    leader: int | None
    isr: tuple[int, ...]


@dataclass(frozen=True)
class PartitionHistory:
    """Everything the judge reads about one partition, in time order."""

    partition: int
    hits: tuple[FaultHit, ...]
    leader_changes: tuple[LeaderChange, ...]
    samples: tuple[IsrSample, ...]
    # Changes of the KRaft quorum's voters during the run (remove-controller): they move no
    # replica, so they are no hit, but a loss near one names it.
    quorum_changes: tuple[FaultHit, ...] = ()

    def leader_hits(self) -> tuple[FaultHit, ...]:
        """The faults that hit this partition's leader (or every broker), in time order."""
        return tuple(h for h in self.hits if h.role in (LEADER, WHOLE))


def timeline_t(ts_us: float | None, origin_us: float) -> str:
    """'t=12.0 s': when `ts_us` falls on the run's timeline, whose t=0 is `origin_us` (the
    timeline's clock every reason uses); 't=?' when it was not stamped."""
    return "t=?" if ts_us is None else f"t={(ts_us - origin_us) / 1e6:.1f} s"


def _node(node: int | None) -> str:
    return "none" if node is None or node < 0 else str(node)


def _ts(event: Sample | FaultStart | FaultEnd) -> int:
    return event.ts_us or 0


def _samples(events: RunEvidence) -> list[Sample]:
    return sorted(events.samples, key=_ts)


def leader_changes(events: RunEvidence | Sequence[Mapping[str, Any]]) -> list[LeaderChange]:
    """Leader changes per partition between successive `sample` events, in time order."""
    last: dict[int, tuple[int | None, tuple[int, ...]]] = {}
    changes = []
    for sample in _samples(RunEvidence.coerce(events)):
        for state in sample.partitions:
            partition = int(state["partition"])
            leader, isr = state.get("leader"), tuple(state.get("isr") or ())
            if partition in last and last[partition][0] != leader:
                old, isr_before = last[partition]
                changes.append(LeaderChange(_ts(sample), partition, old, leader, isr_before))
            last[partition] = (leader, isr)
    return changes


def _hit(
    event: FaultStart, partition: Mapping[str, Any], healed_us: int | None = None
) -> FaultHit | None:
    """The fault_start `event` as a hit on `partition` (a snapshot entry), healed at
    `healed_us`; None if it missed."""
    replicas = tuple(partition.get("replicas") or ())
    nodes = tuple(n for n in event.nodes if n in replicas)
    # Runs recorded before the nemesis marked every fault on all brokers as whole_cluster: a
    # target naming every broker says the same.
    if event.whole_cluster or event.target in ("all", "brokers"):
        role = WHOLE
    elif not nodes:
        return None
    else:
        role = LEADER if partition.get("leader") in nodes else FOLLOWER
    # A snapshot the nemesis could not take repeats an older one, and says so: not a reading.
    at_start = None
    if event.partitions_error is None:
        isr = tuple(partition.get("isr") or ())
        at_start = IsrSample(_ts(event), partition.get("leader"), isr)
    return FaultHit.of(
        event, role, nodes, healed_us=healed_us, replicas=replicas, at_start=at_start
    )


def partition_histories(
    events: RunEvidence | Sequence[Mapping[str, Any]],
) -> dict[int, PartitionHistory] | None:
    """Each partition's history; None when a fault_start lacks its roles snapshot."""
    evidence = RunEvidence.coerce(events)
    starts = sorted(evidence.fault_starts, key=_ts)
    if any(e.partitions is None for e in starts):
        return None
    healed = {e.fault_id: _ts(e) for e in evidence.fault_ends if e.fault_id is not None}
    hits: dict[int, list[FaultHit]] = {}
    for event in starts:
        for partition in event.partitions or ():
            healed_us = healed.get(event.fault_id) if event.fault_id is not None else None
            if (hit := _hit(event, partition, healed_us)) is not None:
                hits.setdefault(int(partition["partition"]), []).append(hit)
    samples: dict[int, list[IsrSample]] = {}
    for sample in _samples(evidence):
        for state in sample.partitions:
            entry = IsrSample(_ts(sample), state.get("leader"), tuple(state.get("isr") or ()))
            samples.setdefault(int(state["partition"]), []).append(entry)
    changes: dict[int, list[LeaderChange]] = {}
    for change in leader_changes(evidence):
        changes.setdefault(change.partition, []).append(change)
    known = set(hits) | set(samples) | set(changes)
    quorum = tuple(_quorum_change(event) for event in starts if event.class_kind == QUORUM_CHANGE)
    return {
        p: PartitionHistory(
            p,
            tuple(hits.get(p, ())),
            tuple(changes.get(p, ())),
            tuple(samples.get(p, ())),
            quorum,
        )
        for p in sorted(known)
    }


def _quorum_change(event: FaultStart) -> FaultHit:
    """A change of the quorum's voters as a hit on the controllers it named (`hosts`, as
    controller-<id>: `nodes` lists brokers only)."""
    ids = [int(host.rsplit("-", 1)[1]) for host in event.hosts if host.startswith("controller-")]
    return FaultHit.of(event, "controllers", tuple(ids or event.nodes), QUORUM_CHANGE)


def partition_fault_class(hits: Iterable[FaultHit]) -> str:
    """The fault class of what hit one partition, by the roles its replicas had then.

    'none' when nothing hit it; '<role>-<kind>' when every hit is that, on the same nodes;
    'follower-<kind>' when only followers were hit (every follower row says the same);
    'all-power-loss' when one hit was that, else a '<role>-corruption' one when one hit was
    silent corruption; else 'mixed' (e.g. two leaders killed one after
    the other: several nodes, as the table's multi-node rows mean).
    """
    hits = list(hits)
    classes = {hit.fault_class for hit in hits}
    if not classes:
        return "none"
    if deciding := deciding_class(classes):  # the weakest guarantee of any mix decides
        return deciding
    if len(classes) == 1 and len({hit.nodes for hit in hits}) == 1:
        return classes.pop()
    if all(hit.role == FOLLOWER for hit in hits):
        return hits[0].fault_class
    return "mixed"
