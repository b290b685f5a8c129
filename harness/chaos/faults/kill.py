"""SIGKILL of the broker process, then a restart of the same container when healed."""

from __future__ import annotations

from harness.chaos.faults.base import Fault, FaultParams, NoParams, start_stopped
from harness.rundir.events import FaultDetail
from harness.rundir.fault_classes import ClassKind


class SignalDetail(FaultDetail):
    """The signal a process got (kill and stop here, the consumer faults on group members)."""

    signal: str


class Kill(Fault[NoParams]):
    """SIGKILL: the process dies at once; the OS page cache (unflushed log data) survives."""

    name = "kill"
    class_kinds = (ClassKind.KILL,)

    def inject(self) -> SignalDetail:
        for node in self.nodes:
            node.kill()
        return {"signal": "SIGKILL"}

    def heal(self) -> None:
        start_stopped(self.nodes)


class KillAll(Kill):
    """SIGKILL of every broker at once (fault class all-kill), whatever the target says."""

    name = "kill-all"

    @classmethod
    def hits_whole_cluster(cls, params: FaultParams) -> bool:
        """Always: the point of this fault is that no broker survives to lead."""
        return True
