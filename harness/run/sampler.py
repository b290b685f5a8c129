"""The sampler: leader and ISR of every partition, recorded while a repetition runs."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from harness.chaos.faults import FaultContext
from harness.rundir.events import EventLog, Sample


class Sampler:
    """Records leader/ISR of every partition about once a second, the controller every 5th."""

    def __init__(self, ctx: FaultContext, events: EventLog, interval_s: float = 1.0):
        self.ctx = ctx
        self.events = events
        self.interval_s = interval_s
        self.latest: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        tick = 0
        while not self._stop.is_set():
            self.sample(with_controller=tick % 5 == 0)
            tick += 1
            self._stop.wait(self.interval_s)

    def sample(self, with_controller: bool = False) -> None:
        """Write one `sample` event; metadata errors are recorded, not raised."""
        try:
            states = self.ctx.cluster.partition_states(self.ctx.topic, timeout_s=2.0)
        except Exception as exc:
            self.events.write(Sample(error=str(exc), partitions=[]))
            return
        self.latest = [
            {"partition": s.partition, "leader": s.leader, "isr": list(s.isr)} for s in states
        ]
        fields: dict[str, Any] = {"partitions": self.latest}
        if with_controller:
            with contextlib.suppress(Exception):
                fields["controller"] = self.ctx.cluster.active_controller()
        self.events.write(Sample(**fields))

    def stop(self) -> None:
        """Stop sampling (a no-op when never started)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(10)
