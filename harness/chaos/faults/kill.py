"""SIGKILL of the broker process, then a restart of the same container when healed."""

from __future__ import annotations

from typing import Any

from harness.chaos.faults.base import Fault, FaultParams, NoParams, start_stopped
from harness.rundir.fault_classes import ClassKind


class Kill(Fault[NoParams]):
    """SIGKILL: the process dies at once; the OS page cache (unflushed log data) survives."""

    name = "kill"
    class_kinds = (ClassKind.KILL,)

    def inject(self) -> dict[str, Any]:
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
