"""What a repetition's timeline marks: fault windows and leader changes (analysis.judge.history),
from its events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis.judge.history import LeaderChange, leader_changes
from analysis.judge.verdicts import Event
from harness.rundir.events import EventType

__all__ = ["FaultWindow", "LeaderChange", "fault_windows", "leader_changes"]


@dataclass(frozen=True)
class FaultWindow:
    """One injected fault, from its fault_start to its fault_end (None: never healed)."""

    fault: str
    target: str
    nodes: tuple[int, ...]
    start_us: int
    end_us: int | None

    @property
    def label(self) -> str:
        """'kill leader (node 2)': what was done to whom."""
        nodes = ", ".join(str(n) for n in self.nodes)
        plural = "s" if len(self.nodes) > 1 else ""
        where = f" (node{plural} {nodes})" if nodes else ""
        return f"{self.fault} {self.target}{where}".strip()


def fault_windows(events: Sequence[Event]) -> list[FaultWindow]:
    """Fault windows in start order, each start paired with the fault_end of its fault_id."""
    ends = {
        e.get("fault_id"): int(e["ts_us"]) for e in events if e.get("type") == EventType.FAULT_END
    }
    windows = []
    for e in sorted((e for e in events if e.get("type") == EventType.FAULT_START), key=_ts):
        windows.append(
            FaultWindow(
                fault=str(e.get("fault", "")),
                target=str(e.get("target", "")),
                nodes=tuple(int(n) for n in e.get("nodes") or []),
                start_us=int(e["ts_us"]),
                end_us=ends.get(e.get("fault_id")),
            )
        )
    return windows


def _ts(event: Event) -> int:
    """Sort key: the event's timestamp."""
    return int(event.get("ts_us", 0))
