"""Graceful stop (SIGTERM, Kafka's controlled shutdown), then a start when healed."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultParams, start_stopped
from harness.chaos.faults.kill import SignalDetail
from harness.limits import MAX_DURATION_S, WHY_DURATION, at_most, whole
from harness.rundir.fault_classes import ClassKind

StopTimeout = Annotated[
    whole,
    Field(ge=1, description="seconds to shut down before SIGKILL"),
    at_most(MAX_DURATION_S, WHY_DURATION, "s"),
]


class StopParams(FaultParams):
    """How long a stopped broker may take for its controlled shutdown."""

    timeout_s: StopTimeout = 60


class StopDetail(SignalDetail):
    """SIGTERM, and how long each broker had for its controlled shutdown."""

    timeout_s: int


class Stop(Fault[StopParams]):
    """SIGTERM with time for controlled shutdown: leadership moves away before the exit."""

    name = "stop"
    Params = StopParams
    class_kinds = (ClassKind.STOP,)

    def inject(self) -> StopDetail:
        timeout_s = self.params.timeout_s
        for node in self.nodes:
            node.stop(timeout_s=timeout_s)
        return {"signal": "SIGTERM", "timeout_s": timeout_s}

    def heal(self) -> None:
        start_stopped(self.nodes)
