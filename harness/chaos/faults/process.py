"""Faults on a target's processes, undone when healed: SIGKILL (kill, kill-all), SIGTERM with
Kafka's controlled shutdown (stop), and the cgroup freezer (pause: a long GC pause or a hung
VM), on a broker node's container through the Docker engine. The consumer faults
(consumer.py) do the same to a consumer group member's process.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultParams, NoParams, P
from harness.limits import MAX_DURATION_S, WHY_DURATION, at_most, whole
from harness.rundir.events import FaultDetail
from harness.rundir.fault_classes import ClassKind

StopTimeout = Annotated[
    whole,
    Field(ge=1, description="seconds to shut down before SIGKILL"),
    at_most(MAX_DURATION_S, WHY_DURATION, "s"),
]


class SignalDetail(FaultDetail):
    """The signal a process got (kill and stop here, the consumer faults on group members)."""

    signal: str


class ProcessFault(Fault[P]):
    """One action on each target process, undone by the heal on each process still showing
    it; what differs between the types is data: the methods called and the states read (a
    broker node and a group member both have kill, pause, unpause, start and state)."""

    act: ClassVar[str]  # the process' method that injects the fault
    signal: ClassVar[str | None] = None  # what fault_start's detail records (None: nothing)
    undo: ClassVar[str] = "start"  # the process' method that heals it,
    undo_in: ClassVar[str | None] = None  # called in this state (None: any but running)

    def inject(self) -> FaultDetail:
        for process in self.nodes:
            getattr(process, self.act)()
        return FaultDetail() if self.signal is None else SignalDetail(signal=self.signal)

    def heal(self) -> None:
        for process in self.nodes:
            state = process.state()
            if (state == self.undo_in) if self.undo_in else (state != "running"):
                getattr(process, self.undo)()


class Kill(ProcessFault[NoParams]):
    """SIGKILL: the process dies at once; the OS page cache (unflushed log data) survives."""

    name = "kill"
    class_kinds = (ClassKind.KILL,)
    act, signal = "kill", "SIGKILL"


class KillAll(Kill):
    """SIGKILL of every broker at once (fault class all-kill), whatever the target says."""

    name = "kill-all"

    @classmethod
    def hits_whole_cluster(cls, params: FaultParams) -> bool:
        """Always: the point of this fault is that no broker survives to lead."""
        return True


class StopParams(FaultParams):
    """How long a stopped broker may take for its controlled shutdown."""

    timeout_s: StopTimeout = 60


class StopDetail(SignalDetail, total=False):
    """SIGTERM, how long each broker had for its controlled shutdown, and the brokers killed
    at that timeout instead (their shutdown unclean, as a kill's)."""

    timeout_s: int
    forced: list[str]


class Stop(ProcessFault[StopParams]):
    """SIGTERM with time for controlled shutdown: leadership moves away before the exit."""

    name = "stop"
    Params = StopParams
    class_kinds = (ClassKind.STOP,)

    def inject(self) -> StopDetail:
        timeout_s = self.params.timeout_s
        forced = [node.hostname for node in self.nodes if not node.stop(timeout_s=timeout_s)]
        detail: StopDetail = {"signal": "SIGTERM", "timeout_s": timeout_s}
        return {**detail, "forced": forced} if forced else detail

    def acted_as(self, detail: FaultDetail) -> dict[str, str]:
        """A stop the engine had to finish with SIGKILL was a kill (an unclean shutdown)."""
        return {"class_kind": ClassKind.KILL} if detail.get("forced") else {}


class Pause(ProcessFault[NoParams]):
    """docker pause (cgroup freezer): connections stay open but nothing answers."""

    name = "pause"
    class_kinds = (ClassKind.PAUSE,)
    act, undo, undo_in = "pause", "unpause", "paused"
