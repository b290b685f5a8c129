"""Graceful stop (SIGTERM, Kafka's controlled shutdown), then a start when healed."""

from __future__ import annotations

from typing import Any

from harness.chaos.faults.base import Fault


class Stop(Fault):
    """SIGTERM with time for controlled shutdown: leadership moves away before the exit."""

    kind = "stop"

    def inject(self) -> dict[str, Any]:
        timeout_s = int(self.params.get("timeout_s", 60))
        for node in self.nodes:
            node.stop(timeout_s=timeout_s)
        return {"signal": "SIGTERM", "timeout_s": timeout_s}

    def heal(self) -> None:
        for node in self.nodes:
            if node.state() != "running":
                node.start()
