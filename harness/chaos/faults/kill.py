"""SIGKILL of the broker process, then a restart of the same container when healed."""

from __future__ import annotations

from typing import Any

from harness.chaos.faults.base import Fault


class Kill(Fault):
    """SIGKILL: the process dies at once; the OS page cache (unflushed log data) survives."""

    kind = "kill"

    def inject(self) -> dict[str, Any]:
        for node in self.nodes:
            node.kill()
        return {"signal": "SIGKILL"}

    def heal(self) -> None:
        for node in self.nodes:
            if node.state() != "running":
                node.start()
