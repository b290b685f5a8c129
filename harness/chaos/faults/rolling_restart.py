"""Rolling restart: what an operator does for an upgrade, one broker at a time.

Each target in turn gets SIGTERM (controlled shutdown: its leaderships move first), is
started again, and must be back in the ISR of every partition of the topic before the next
one goes down. The active controller goes last, as operators do. The roll runs in its own
thread; healing stops it between steps and starts whatever is still down.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from harness.chaos.faults.base import Fault, FaultParams
from harness.chaos.faults.process import StopTimeout
from harness.limits import MAX_DURATION_S, WHY_DURATION, at_most, param_number
from harness.rundir.events import FaultDetail, FaultEndDetail
from harness.rundir.fault_classes import ClassKind
from harness.waiting import wait_for

if TYPE_CHECKING:
    from harness.platform.node import KafkaNode


class RollingRestartParams(FaultParams):
    """How long each broker may take to go down and to come back."""

    timeout_s: StopTimeout = 60
    rejoin_timeout_s: Annotated[
        param_number,
        Field(
            gt=0,
            description="seconds a restarted node may take to rejoin the ISR before the next "
            "goes down",
        ),
        at_most(MAX_DURATION_S, WHY_DURATION, "s"),
    ] = 60


class RollingDetail(FaultDetail):
    """The order of the roll (the active controller last) and that controller (None: none)."""

    order: list[int]
    controller: int | None


class RollingEnd(FaultEndDetail):
    """The nodes restarted before the heal, and whether that was all of them."""

    restarted: list[int]
    completed: bool


class RollingRestart(Fault[RollingRestartParams]):
    """SIGTERM, start and wait for the ISR, node after node; heal ends the roll."""

    name = "rolling-restart"
    Params = RollingRestartParams
    class_kinds = (ClassKind.ROLLING_RESTART,)
    # The nodes restarted so far, and what tells the roll to stop (once injected).
    restarted: tuple[int, ...] = ()
    _halt: threading.Event | None = None

    def inject(self) -> RollingDetail:
        controller = self.ctx.cluster.active_controller()
        self.order = sorted(self.nodes, key=lambda n: (n.node_id == controller, n.node_id))
        self._halt = halt = threading.Event()
        self._thread = threading.Thread(
            target=self._roll, args=(halt,), name="rolling-restart", daemon=True
        )
        self._thread.start()
        return {"order": [node.node_id for node in self.order], "controller": controller}

    def _roll(self, halt: threading.Event) -> None:
        for node in self.order:
            if halt.is_set():
                return
            node.stop(timeout_s=self.params.timeout_s)
            node.start()
            self.restarted = (*self.restarted, node.node_id)
            self._wait_rejoined(node, self.params.rejoin_timeout_s, halt)

    def _wait_rejoined(self, node: KafkaNode, timeout_s: float, halt: threading.Event) -> None:
        """Until `node` is in the ISR of every partition it replicates (or halt/timeout)."""
        wait_for(
            lambda: halt.is_set() or self._rejoined(node),
            timeout_s,
            interval_s=0.5,
            retry_on=lambda exc: True,  # metadata is briefly unavailable while nodes restart
            pause=halt.wait,  # a heal ends the wait at once
        )

    def _rejoined(self, node: KafkaNode) -> bool:
        """True when `node` is in the ISR of every partition of the topic it replicates."""
        states = self.ctx.cluster.partition_states(self.ctx.topic)
        return all(node.node_id in s.isr for s in states if node.node_id in s.replicas)

    def detail(self) -> RollingEnd:
        """Which nodes were restarted before the heal, and whether that was all of them."""
        restarted = list(self.restarted)
        return {"restarted": restarted, "completed": len(restarted) == len(self.nodes)}

    def heal(self) -> None:
        if self._halt is not None:
            self._halt.set()
            self._thread.join(timeout=self.params.timeout_s + 30)
        for node in self.nodes:
            if node.state() not in ("running", "paused"):
                node.start()
