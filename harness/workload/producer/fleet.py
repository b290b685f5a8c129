"""The workload's senders as the runner drives them (`Producing`), and several producers at once
(`workload.producers` > 1) for every client: the `Fleet`.

Each member of a fleet sends its share of the workload from its own journal slot
(journal.ProducerSlot: msg_id base, key prefix, files), so a crash of one loses no more than
its own sends; `finalize.finalize` merges the journals into acked.parquet. A librdkafka member
is a Recorder in a process of its own (librdkafka.ProducerProcess), a program member a
CommandProducer (command.py). The runner sees the fleet as one recorder: summed live stats,
one summed recorder_tally with each member's part, one error.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from harness.rundir.events import ClientConfig, EventLog, PhaseEvent, ProducerTally, RecorderTally
from harness.rundir.records import Status
from harness.waiting import wait_for
from harness.workload.journal import SOLE, JournalError, ProducerSlot
from harness.workload.producer.recorder import RecorderStats, Workload

__all__ = [
    "ClientError",
    "Fleet",
    "FleetMember",
    "MemberEnd",
    "ProducerCrash",
    "Producing",
    "share_of",
    "shares",
    "sole_close",
    "summed_stats",
    "summed_tally",
]


class ProducerCrash(RuntimeError):
    """A producer died or failed before it finished: the repetition is incomplete."""


class ClientError(RuntimeError):
    """The client program broke the protocol or ended badly: the repetition is incomplete."""


class Producing(Protocol):
    """The workload's senders: one recorder or program, or a Fleet of them.

    Built before the run's `try` (nothing is started), then `start()`, `run(stop)` and, in
    `finally`, `close(events)`, which writes the recorder_tally event and never raises.
    """

    @property
    def stats(self) -> RecorderStats: ...
    def start(self) -> None: ...
    def run(self, stop: threading.Event) -> RecorderStats: ...
    def close(self, events: EventLog) -> Exception | None: ...


@dataclass(frozen=True)
class MemberEnd:
    """How a member of a fleet ended: its delivery reports by status, its journal's error, why
    its sends are incomplete (None: they are not), the settings it said it ran with, and its
    transactions by outcome (a transactional producer's; None: it has none)."""

    reports: dict[str, int]
    journal_error: str | None = None
    problem: str | None = None
    config: ClientConfig | None = None
    transactions: dict[str, int] | None = None


class FleetMember(Protocol):
    """One producer of a fleet: `start()` begins creating its client without waiting for it,
    `ready()` says whether it has one (ProducerCrash when it never will), `run(stop)` sends
    its share, `end()` stops it and closes its journal, never raising."""

    @property
    def stats(self) -> RecorderStats: ...
    @property
    def pid(self) -> int | None: ...
    def start(self) -> None: ...
    def ready(self) -> bool: ...
    def run(self, stop: threading.Event) -> RecorderStats: ...
    def end(self) -> MemberEnd: ...


def share_of(workload: Workload, producer: int, producers: int) -> Workload:
    """Producer `producer`'s part of the total workload: rate / producers, and the count split
    as evenly as whole messages allow (the first count % producers send one more); duration,
    size and keys are each producer's own."""
    rate = workload.rate / producers if workload.rate else workload.rate
    count = workload.count
    if count is not None:
        count = count // producers + (1 if producer < count % producers else 0)
        if not count:  # a count of 0 would mean "unbounded" to the recorder
            raise ValueError(f"{workload.count} messages cannot be shared by {producers} producers")
    return replace(workload, rate=rate, count=count)


def shares(workload: Workload, producers: int) -> list[tuple[ProducerSlot, Workload]]:
    """Each producer's slot and share of `workload` (the total); for one producer, the run's one
    slot (journal.SOLE) and all of it."""
    if producers == 1:
        return [(SOLE, workload)]
    return [(ProducerSlot(i), share_of(workload, i, producers)) for i in range(producers)]


def summed_stats(stats: Sequence[RecorderStats]) -> RecorderStats:
    """Sends and outcomes added up over producers."""
    return RecorderStats(
        sum(s.sent for s in stats),
        sum(s.ok for s in stats),
        sum(s.failed for s in stats),
        sum(s.indeterminate for s in stats),
    )


def summed_tally(tallies: Sequence[dict[str, int]]) -> dict[str, int]:
    """Delivery reports by status added up over producers."""
    return {status.value: sum(t.get(status.value, 0) for t in tallies) for status in Status}


class Fleet:
    """n producers of one client run side by side, seen as one `Producing`."""

    READY_TIMEOUT_S = 60.0

    def __init__(self, members: Sequence[FleetMember], events: EventLog):
        self.members = list(members)
        self.events = events

    @property
    def stats(self) -> RecorderStats:
        """Sends and outcomes so far, summed over the members."""
        return summed_stats([member.stats for member in self.members])

    def start(self) -> None:
        """Start every member, then wait until each has its client; ProducerCrash as soon as
        one crashed, or when they are not all ready within READY_TIMEOUT_S."""
        for member in self.members:
            member.start()
        if not wait_for(self._ready, self.READY_TIMEOUT_S, interval_s=0.1):
            raise ProducerCrash(f"producers not ready within {self.READY_TIMEOUT_S:g} s")
        pids = [member.pid for member in self.members]
        if pids and all(pid is not None for pid in pids):  # programs start in run()
            self.events.write(PhaseEvent(phase="producers-ready", pids=pids))

    def _ready(self) -> bool:
        # Every member is asked, so that each crash is seen (and recorded) at once.
        return all([member.ready() for member in self.members])

    def run(self, stop: threading.Event) -> RecorderStats:
        """Let every member send its share, each in a thread; return once all have ended."""
        threads = [
            threading.Thread(target=member.run, args=(stop,), name=f"producer-{i}", daemon=True)
            for i, member in enumerate(self.members)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return self.stats

    def close(self, events: EventLog) -> Exception | None:
        """End every member, write one summed recorder_tally with each member's part (and the
        first client_config a member reported); the fleet's error, or None. Never raises.

        The error is a ProducerCrash naming every member whose sends are incomplete, else a
        JournalError naming every journal that missed reports."""
        ends = [member.end() for member in self.members]
        journal_errors = [
            f"producer {i}: {end.journal_error}" for i, end in enumerate(ends) if end.journal_error
        ]
        journal_error = "; ".join(journal_errors) or None
        parts = [
            ProducerTally(
                producer=i,
                reports=end.reports,
                journal_error=end.journal_error,
                problem=end.problem,
            )
            for i, end in enumerate(ends)
        ]
        reports = summed_tally([end.reports for end in ends])
        tally = RecorderTally(reports=reports, journal_error=journal_error, producers=parts)
        _report(events, ends, tally)
        problems = [f"producer {i}: {end.problem}" for i, end in enumerate(ends) if end.problem]
        if problems:
            return ProducerCrash("; ".join(problems))
        return None if journal_error is None else JournalError(journal_error)


def sole_close(end: MemberEnd, events: EventLog) -> Exception | None:
    """Close as the one producer of a run that ended as `end`, as before several producers
    existed: its recorder_tally (no `producers` part) and client_config; its error: its
    journal's (JournalError), else its client's (ClientError), else None. Never raises."""
    tally = RecorderTally(reports=end.reports, journal_error=end.journal_error)
    if end.transactions is not None:  # set only then: an unset field stays out of the line
        tally = tally.model_copy(update={"transactions": end.transactions})
    _report(events, [end], tally)
    if end.journal_error is not None:
        return JournalError(end.journal_error)
    return ClientError(end.problem) if end.problem else None


def _report(events: EventLog, ends: Sequence[MemberEnd], tally: RecorderTally) -> None:
    """Write the recorder_tally event and the first client_config a producer reported. Never
    raises."""
    with contextlib.suppress(Exception):
        events.write(tally)
        config = next((end.config for end in ends if end.config is not None), None)
        if config is not None:
            events.write(config)
