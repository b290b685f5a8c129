"""A run's evidence beyond its Arrow files: its events.jsonl, parsed once into typed events.

`RunEvidence.read` is the one place the analysis reads events.jsonl; the Spark job reads it on the
driver and ships it with each task, so the checks and the judge receive the same object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.rundir.events import (
    ClientConfig,
    ConsumersDone,
    FaultEnd,
    FaultFailed,
    FaultStart,
    HarnessError,
    ReadbackDone,
    RecorderTally,
    RunEvents,
    Sample,
    SegmentsKept,
    parse_event_objects,
    read_events,
)

T = TypeVar("T")


@dataclass(frozen=True)
class RunEvidence:
    """One run directory's events, typed, with the questions every stage asks of them."""

    run_dir: Path
    events: RunEvents = field(default_factory=RunEvents)

    @classmethod
    def read(cls, run_dir: str | Path) -> RunEvidence:
        """The evidence of `run_dir` (no events when events.jsonl is missing)."""
        return cls(Path(run_dir), read_events(run_dir))

    @classmethod
    def coerce(cls, events: RunEvidence | Iterable[Mapping[str, Any]]) -> RunEvidence:
        """`events` as evidence: itself, or events written by hand (tests, tools) parsed by the
        same models (with no run directory)."""
        if isinstance(events, RunEvidence):
            return events
        return cls(Path(), parse_event_objects(events))

    @property
    def readback(self) -> ReadbackDone | None:
        """The last read-back event; None when the run never read back."""
        return _last(self.events.of(ReadbackDone))

    @property
    def segments(self) -> SegmentsKept | None:
        """The last `segments` event (whether the brokers' logs were kept)."""
        return _last(self.events.of(SegmentsKept))

    @property
    def consumers(self) -> ConsumersDone | None:
        """The last `consumers` event (whether the group caught up after the final heal)."""
        return _last(self.events.of(ConsumersDone))

    @property
    def fault_starts(self) -> list[FaultStart]:
        """Every injected fault, in file order."""
        return self.events.of(FaultStart)

    @property
    def fault_ends(self) -> list[FaultEnd]:
        """Every healed fault, in file order."""
        return self.events.of(FaultEnd)

    @property
    def fault_errors(self) -> list[FaultFailed]:
        """Every fault that could not be injected, healed or waited for."""
        return self.events.of(FaultFailed)

    @property
    def harness_errors(self) -> list[HarnessError]:
        """Every error that failed the repetition."""
        return self.events.of(HarnessError)

    @property
    def client_config(self) -> ClientConfig | None:
        """The settings the producer's client ran with, defaults resolved (None: not recorded)."""
        return _last(self.events.of(ClientConfig))

    @property
    def samples(self) -> list[Sample]:
        """The sampler's views of the topic, in file order."""
        return self.events.of(Sample)

    @property
    def tallies(self) -> list[RecorderTally]:
        """The recorders' tallies of delivery reports."""
        return self.events.of(RecorderTally)

    @property
    def faults_in_workload(self) -> list[FaultStart]:
        """The injected faults that began while the workload ran (between its first
        `workload-start` and last `workload-end` phase, where those were stamped), in file
        order."""
        starts, ends = self.phase_stamps("workload-start"), self.phase_stamps("workload-end")
        begin, end = (min(starts) if starts else None), (max(ends) if ends else None)
        return [
            fault
            for fault in self.fault_starts
            if fault.ts_us is not None
            and (begin is None or fault.ts_us >= begin)
            and (end is None or fault.ts_us <= end)
        ]

    def phase_stamps(self, phase: str) -> list[int]:
        """The `ts_us` of each `phase` event of one phase."""
        return [e.ts_us for e in self.events.phases(phase) if e.ts_us is not None]


def _last(events: list[T]) -> T | None:
    """The last of `events`; None for none."""
    return events[-1] if events else None
