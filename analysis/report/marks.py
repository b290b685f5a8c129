"""What a repetition's timeline marks: fault windows, the spans a node stood stopped with no
fault acting on it (analysis.judge.stopped), and leader changes (analysis.judge.history), from
its events."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.judge.history import LeaderChange, leader_changes
from analysis.judge.outcomes import Events
from analysis.judge.stopped import unexplained_stops
from analysis.model.evidence import RunEvidence

__all__ = ["STOPPED", "FaultWindow", "LeaderChange", "fault_windows", "leader_changes"]


STOPPED = "stopped on its own"  # a FaultWindow's target for a node no fault stopped


@dataclass(frozen=True)
class FaultWindow:
    """One injected fault, from its fault_start to its fault_end (None: never healed); or a
    node that stood stopped with no fault acting on it (fault: its host, target: STOPPED)."""

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


def fault_windows(events: Events) -> list[FaultWindow]:
    """Fault windows in start order, each start paired with the fault_end of its fault_id,
    and the unexplained stops among them (from the last sample that saw the node up)."""
    evidence = RunEvidence.coerce(events)
    ends = {e.fault_id: e.ts_us or 0 for e in evidence.fault_ends}
    windows = [
        FaultWindow(fault=host, target=STOPPED, nodes=(), start_us=down, end_us=up)
        for host, down, up in unexplained_stops(evidence)
    ]
    for e in sorted(evidence.fault_starts, key=lambda start: start.ts_us or 0):
        windows.append(
            FaultWindow(
                fault=e.fault or "",
                target=e.target or "",
                nodes=tuple(e.nodes),
                start_us=e.ts_us or 0,
                end_us=ends.get(e.fault_id),
            )
        )
    return sorted(windows, key=lambda window: window.start_us)
