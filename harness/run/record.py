"""A repetition's run directory while it runs, whoever drives it (the runner, or a test through
the pytest plugin): spec.json written first, events.jsonl open in between, and at the end the
broker logs kept and spec.json rewritten with how the repetition ended."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.rundir import layout
from harness.rundir.events import EventLog, PhaseEvent, now_us

if TYPE_CHECKING:
    from harness.nemesis.records import ResolvedStep
    from harness.platform.cluster import KafkaCluster
    from harness.run.resolved import SpecTimes

__all__ = ["RunRecord"]


class RunRecord:
    """The run directory of one repetition: created with spec.json's first version (its
    start, by `write_spec`) and events.jsonl open; `close` ends it."""

    def __init__(self, run_dir: Path, write_spec: Callable[[SpecTimes], None]):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self._write_spec = write_spec
        self.started_at_us = now_us()
        write_spec({"started_at_us": self.started_at_us})
        self.events = EventLog(run_dir / layout.EVENTS)

    def close(
        self,
        cluster: KafkaCluster,
        error: str | None,
        resolved_schedule: list[ResolvedStep],
        *,
        remove_cluster: bool,
    ) -> None:
        """Keep the broker logs (failing to is no error of the run), remove the cluster when
        `remove_cluster`, close events.jsonl, then rewrite spec.json with the end, `error` (the
        harness's, None when it had none) and the steps as they acted."""
        with contextlib.suppress(Exception):
            cluster.collect_logs(self.run_dir / layout.BROKER_LOGS)
        try:
            if remove_cluster:
                cluster.close()
                self.events.write(PhaseEvent(phase="cluster-removed"))
        finally:
            self.events.close()
            self._write_spec(
                {
                    "started_at_us": self.started_at_us,
                    "ended_at_us": now_us(),
                    "harness_error": error,
                    "resolved_schedule": resolved_schedule,
                }
            )
