"""The price of safety of one run (the types; analysis.checks.availability measures them, and its
docstring defines every figure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

__all__ = [
    "Availability",
    "AvailabilityError",
    "AvailabilityJson",
    "FaultLatency",
    "Gap",
    "HealRecovery",
    "Latency",
    "PartitionAvailability",
]


class AvailabilityError(ValueError):
    """The run directory cannot be measured; the message names the file and the problem."""


class GapJson(TypedDict):
    """A gap in results.json: its length, its ends in seconds of the window and in epoch µs."""

    seconds: float
    start_s: float
    end_s: float
    start_us: int
    end_us: int


class PartitionAvailabilityJson(TypedDict):
    """One partition in results.json: its sends by Status (ok, failed, indeterminate) and its
    longest gap."""

    ok: int
    failed: int
    indeterminate: int
    longest_gap_s: float
    longest_gap: GapJson


class HealRecoveryJson(TypedDict):
    """One heal in results.json; `first_ack_by_partition` keyed by the partition as text."""

    fault_id: int | None
    fault: str
    heal_us: int
    heal_s: float | None
    during_workload: bool
    first_ack_s: float | None
    every_partition_s: float | None
    first_ack_by_partition: dict[str, float | None]


class LatencyJson(TypedDict):
    """Produce latency in results.json: sends and percentiles in ms (None without sends)."""

    sends: int
    p50_ms: float | None
    p99_ms: float | None


class FaultLatencyJson(LatencyJson):
    """The latency while one fault was in force, in results.json."""

    fault_id: int | None
    fault: str
    start_us: int
    end_us: int


class LatencySplitJson(TypedDict):
    """results.json's `availability.latency`: outside every fault, and per fault."""

    outside_faults: LatencyJson | None
    faults: list[FaultLatencyJson]


class AvailabilityJson(TypedDict):
    """results.json's `availability` object (docs/verdicts.md, "The price of safety"); the
    send counts are keyed by Status (ok, failed, indeterminate)."""

    workload_start_us: int | None
    workload_end_us: int | None
    window_from_events: bool
    ok: int
    failed: int
    indeterminate: int
    failed_without_partition: int
    indeterminate_without_partition: int
    longest_gap_s: float | None
    longest_gap: GapJson | None
    longest_partition_gap_s: float | None
    partitions: dict[str, PartitionAvailabilityJson]
    heals: list[HealRecoveryJson]
    latency: LatencySplitJson


@dataclass(frozen=True)
class Gap:
    """An interval inside the workload window without an acknowledged send.

    `start_us`/`end_us` are epoch µs; `start_s`/`end_s` the same moments in seconds since the
    workload window's start. The start is an ack time or the window's start, the end an ack
    time or the window's end.
    """

    start_us: int
    end_us: int
    start_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        """The gap's length in seconds."""
        return (self.end_us - self.start_us) / 1e6

    def as_json(self) -> GapJson:
        """The results.json form."""
        return {
            "seconds": self.seconds,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "start_us": self.start_us,
            "end_us": self.end_us,
        }


@dataclass(frozen=True)
class PartitionAvailability:
    """One partition: its ok / failed / indeterminate sends and its longest gap."""

    partition: int
    ok: int
    failed: int
    indeterminate: int
    longest_gap: Gap

    def as_json(self) -> PartitionAvailabilityJson:
        """The results.json form."""
        return {
            "ok": self.ok,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "longest_gap_s": self.longest_gap.seconds,
            "longest_gap": self.longest_gap.as_json(),
        }


@dataclass(frozen=True)
class HealRecovery:
    """How long acknowledged sends took to come back after one heal (fault_end event).

    Each figure is seconds from the heal to the first ok ack at or after it; None when no ack
    came before the recording ended. `every_partition_s` is the latest of the per-partition
    figures (None if any is None): the time until every partition acknowledged again.
    """

    fault_id: int | None
    fault: str
    heal_us: int
    heal_s: float | None  # seconds since the workload window's start
    during_workload: bool  # the heal came inside the workload window
    first_ack_s: float | None
    first_ack_by_partition: Mapping[int, float | None]

    @property
    def every_partition_s(self) -> float | None:
        """Seconds until every partition had acknowledged again; None if one never did."""
        values = list(self.first_ack_by_partition.values())
        if not values or any(v is None for v in values):
            return None
        return max(v for v in values if v is not None)

    def as_json(self) -> HealRecoveryJson:
        """The results.json form."""
        return {
            "fault_id": self.fault_id,
            "fault": self.fault,
            "heal_us": self.heal_us,
            "heal_s": self.heal_s,
            "during_workload": self.during_workload,
            "first_ack_s": self.first_ack_s,
            "every_partition_s": self.every_partition_s,
            "first_ack_by_partition": {
                str(p): s for p, s in sorted(self.first_ack_by_partition.items())
            },
        }


@dataclass(frozen=True)
class Latency:
    """The produce latency (ack time minus send time) of the ok sends made in an interval:
    how many, and the nearest-rank 50th and 99th percentiles in ms (None without sends)."""

    sends: int
    p50_ms: float | None
    p99_ms: float | None

    def as_json(self) -> LatencyJson:
        """The results.json form."""
        return {"sends": self.sends, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms}


@dataclass(frozen=True)
class FaultLatency:
    """The latency of the sends made while one fault was in force (from its injection to its
    heal, or to the workload's end when it was never healed)."""

    fault_id: int | None
    fault: str
    start_us: int
    end_us: int
    latency: Latency

    def as_json(self) -> FaultLatencyJson:
        """The results.json form."""
        return {
            "fault_id": self.fault_id,
            "fault": self.fault,
            "start_us": self.start_us,
            "end_us": self.end_us,
            **self.latency.as_json(),
        }


@dataclass(frozen=True)
class Availability:
    """The price of safety of one repetition (module docstring: what each figure means)."""

    workload_start_us: int | None  # None: no event and no row to place the window
    workload_end_us: int | None
    window_from_events: bool  # False: the window was inferred from the rows (a crashed run)
    ok: int
    failed: int
    indeterminate: int
    failed_without_partition: int
    indeterminate_without_partition: int
    longest_gap: Gap | None  # no partition acknowledged anything; None without a window
    partitions: tuple[PartitionAvailability, ...] = ()
    heals: tuple[HealRecovery, ...] = ()
    # Produce latency while each fault was in force, and of the sends made outside every fault.
    fault_latency: tuple[FaultLatency, ...] = ()
    latency_outside_faults: Latency | None = None

    @property
    def longest_partition_gap(self) -> PartitionAvailability | None:
        """The partition with the longest gap (lowest partition on a tie); None without any."""
        return max(self.partitions, key=lambda p: p.longest_gap.seconds, default=None)

    def as_json(self) -> AvailabilityJson:
        """The results.json `availability` object (docs/verdicts.md, "The price of safety")."""
        worst = self.longest_partition_gap
        return {
            "workload_start_us": self.workload_start_us,
            "workload_end_us": self.workload_end_us,
            "window_from_events": self.window_from_events,
            "ok": self.ok,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "failed_without_partition": self.failed_without_partition,
            "indeterminate_without_partition": self.indeterminate_without_partition,
            "longest_gap_s": None if self.longest_gap is None else self.longest_gap.seconds,
            "longest_gap": None if self.longest_gap is None else self.longest_gap.as_json(),
            "longest_partition_gap_s": None if worst is None else worst.longest_gap.seconds,
            "partitions": {str(p.partition): p.as_json() for p in self.partitions},
            "heals": [heal.as_json() for heal in self.heals],
            "latency": {
                "outside_faults": (
                    None
                    if self.latency_outside_faults is None
                    else self.latency_outside_faults.as_json()
                ),
                "faults": [fault.as_json() for fault in self.fault_latency],
            },
        }
