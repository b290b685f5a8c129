"""Rolling restart: what an operator does for an upgrade, one broker at a time.

Each target in turn gets SIGTERM (controlled shutdown: its leaderships move first), is
started again, and must be back in the ISR of every partition of the topic before the next
one goes down. The active controller goes last, as operators do. The roll runs in its own
thread; healing stops it between steps and starts whatever is still down.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from harness.chaos.faults.base import Fault
from harness.platform.cluster import KafkaNode


class RollingRestart(Fault):
    """SIGTERM, start and wait for the ISR, node after node; heal ends the roll."""

    kind = "rolling-restart"

    def inject(self) -> dict[str, Any]:
        controller = self.ctx.cluster.active_controller()
        self.order = sorted(self.nodes, key=lambda n: (n.node_id == controller, n.node_id))
        self.restarted: list[int] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._roll, name="rolling-restart", daemon=True)
        self._thread.start()
        return {"order": [node.node_id for node in self.order], "controller": controller}

    def _roll(self) -> None:
        for node in self.order:
            if self._halt.is_set():
                return
            node.stop(timeout_s=int(self.params.get("timeout_s", 60)))
            node.start()
            self.restarted.append(node.node_id)
            self._wait_rejoined(node, float(self.params.get("rejoin_timeout_s", 60)))

    def _wait_rejoined(self, node: KafkaNode, timeout_s: float) -> None:
        """Until `node` is in the ISR of every partition it replicates (or halt/timeout)."""
        deadline = time.monotonic() + timeout_s
        while not self._halt.is_set() and time.monotonic() < deadline:
            try:
                states = self.ctx.cluster.partition_states(self.ctx.topic)
                if all(node.node_id in s.isr for s in states if node.node_id in s.replicas):
                    return
            except Exception:  # metadata is briefly unavailable while nodes restart
                pass
            self._halt.wait(0.5)

    def outcome(self) -> dict[str, Any]:
        """Which nodes were restarted before the heal, and whether that was all of them."""
        restarted = list(getattr(self, "restarted", []))
        return {"restarted": restarted, "completed": len(restarted) == len(self.nodes)}

    def heal(self) -> None:
        halt = getattr(self, "_halt", None)
        if halt is not None:
            halt.set()
            self._thread.join(timeout=float(self.params.get("timeout_s", 60)) + 30)
        for node in self.nodes:
            if node.state() not in ("running", "paused"):
                node.start()
