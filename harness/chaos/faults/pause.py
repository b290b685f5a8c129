"""Freeze every process of a node (a long GC pause or a hung VM), thaw when healed."""

from __future__ import annotations

from harness.chaos.faults.base import Fault, NoParams
from harness.rundir.events import FaultDetail
from harness.rundir.fault_classes import ClassKind


class Pause(Fault[NoParams]):
    """docker pause (cgroup freezer): connections stay open but nothing answers."""

    name = "pause"
    class_kinds = (ClassKind.PAUSE,)

    def inject(self) -> FaultDetail:
        for node in self.nodes:
            node.pause()
        return {}

    def heal(self) -> None:
        for node in self.nodes:
            if node.state() == "paused":
                node.unpause()
