"""Several producers at once (`workload.producers` > 1): each a Recorder in its own OS process.

In one process the recorders would take turns on the GIL (each spends ~5 µs of client CPU per
message), so each runs in a process of its own, started with `spawn`: librdkafka's threads do
not survive a fork. Each has its own crash-safe journal (journal.ProducerSlot: its msg_id base,
key prefix and files), so a crash of a producer or of the harness loses no more than the one
recorder's would; `journal.finalize` merges the journals into acked.parquet.

The runner sees the fleet as one recorder: summed live stats, one summed tally, one stop. A
producer ends when its share is sent, when the harness sets the shared stop (an interrupt: it
settles in about a second, as the one recorder does), when the harness process is gone, or on
SIGTERM. It ignores SIGINT: Ctrl-C reaches the whole process group, and the harness decides.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Protocol

from harness.experiment.fields import Scalar
from harness.rundir.events import (
    EventLog,
    PhaseEvent,
    ProducerCrashed,
    ProducerTally,
    RecorderTally,
)
from harness.rundir.records import Status
from harness.waiting import Deadline, wait_for
from harness.workload.journal import (
    AckJournal,
    JournalError,
    ProducerSlot,
    close_journal,
    write_meta,
)
from harness.workload.processes import child_setup, forward_logs, sigint_held
from harness.workload.producer.recorder import (
    DeliveryTally,
    Recorder,
    RecorderStats,
    Workload,
    status_of,
)

log = logging.getLogger("kafka_chaos.producers")
# librdkafka starts threads of its own: a forked child would inherit a client without them.
CONTEXT = multiprocessing.get_context("spawn")
# A producer's shared counters: its live stats, its delivery tally, and whether it is ready.
SENT, OK, FAILED, INDETERMINATE, TALLY_OK, TALLY_FAILED, TALLY_INDETERMINATE, READY = range(8)
SHARE_EVERY_S = 0.2


class ProducerCrash(RuntimeError):
    """A producer process died or failed before it finished: the repetition is incomplete."""


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


@dataclass(frozen=True)
class ProducerTask:
    """What one producer process is to do (pickled to it)."""

    slot: ProducerSlot
    workload: Workload  # its share
    bootstrap: str
    topic: str
    producer_config: dict[str, Scalar]
    run_dir: Path
    parent_pid: int
    log_level: int


def producer_tasks(
    producers: int,
    workload: Workload,
    bootstrap: str,
    topic: str,
    producer_config: dict[str, Scalar],
    run_dir: Path,
) -> list[ProducerTask]:
    """One task per producer, each with its slot and share of `workload` (the total)."""
    level = logging.getLogger("kafka_chaos").getEffectiveLevel()
    return [
        ProducerTask(
            ProducerSlot(index),
            share_of(workload, index, producers),
            bootstrap,
            topic,
            producer_config,
            run_dir,
            os.getpid(),
            level,
        )
        for index in range(producers)
    ]


@dataclass(frozen=True)
class ProducerOutcome:
    """What a producer process reports as it ends (a crashed one reports nothing)."""

    index: int
    stats: RecorderStats
    tally: dict[str, int]
    journal_error: str | None
    error: str | None  # the exception that ended it early


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


# ---------------------------------------------------------------------------------------------
# The workload as the runner drives it


class Producing(Protocol):
    """The workload's senders: the one recorder in the harness process (the runner's), or a
    ProducerFleet.

    Built before the run's `try` (nothing is started), then `start()`, `run(stop)` and, in
    `finally`, `close(events)`, which writes the recorder_tally event and never raises.
    """

    @property
    def stats(self) -> RecorderStats: ...
    def start(self) -> None: ...
    def run(self, stop: threading.Event) -> RecorderStats: ...
    def close(self, events: EventLog) -> Exception | None: ...


# ---------------------------------------------------------------------------------------------
# In the producer process


def produce(task: ProducerTask, go: Any, stop_all: Any, counters: Any, outcomes: Any, logs: Any):
    """A producer process's body: wait for `go`, record its share, then report its outcome."""
    stop = child_setup(logs, task.log_level)
    index = task.slot.index if task.slot.index is not None else 0
    journal = AckJournal(task.run_dir, task.workload.keys, status_of, task.slot)
    recorder: Recorder | None = None
    error = None
    done = threading.Event()
    try:
        recorder = Recorder(
            task.bootstrap, task.topic, task.producer_config, task.workload, journal
        )
        threading.Thread(
            target=_share,
            args=(recorder, counters, stop_all, stop, done, task.parent_pid),
            daemon=True,
        ).start()
        counters[READY] = 1
        while not go.wait(SHARE_EVERY_S) and not stop.is_set():
            pass
        recorder.run(stop)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.exception("producer %d failed", index)
    finally:
        done.set()
        journal_error = close_journal(journal)
        stats = recorder.stats if recorder is not None else RecorderStats()
        tally = (recorder.tally if recorder is not None else DeliveryTally()).as_dict()
        _publish(counters, stats, tally)
        outcomes.put(ProducerOutcome(index, stats, tally, journal_error, error))


def _share(
    recorder: Recorder,
    counters: Any,
    stop_all: Any,
    stop: threading.Event,
    done: threading.Event,
    parent_pid: int,
) -> None:
    """Publish the live counters; turn the harness's stop, or its death, into `stop`."""
    while not done.wait(SHARE_EVERY_S):
        _publish(counters, recorder.stats, recorder.tally.as_dict())
        if stop_all.is_set() or os.getppid() != parent_pid:
            stop.set()


def _publish(counters: Any, stats: RecorderStats, tally: dict[str, int]) -> None:
    counters[SENT], counters[OK] = stats.sent, stats.ok
    counters[FAILED], counters[INDETERMINATE] = stats.failed, stats.indeterminate
    counters[TALLY_OK] = tally[Status.OK.value]
    counters[TALLY_FAILED] = tally[Status.FAILED.value]
    counters[TALLY_INDETERMINATE] = tally[Status.INDETERMINATE.value]


# ---------------------------------------------------------------------------------------------
# In the harness


class ProducerFleet:
    """The producer processes of one repetition, driven as one recorder.

    `start()` spawns them and waits until each has its client; `run(stop)` lets them send and
    waits until all have ended (after `stop`, at most STOP_GRACE_S more); `close(events)`
    ends any still running, writes the summed recorder_tally and gives the error to raise
    once the read-back is done. Each crash is an event when it is seen.
    """

    READY_TIMEOUT_S = 60.0
    # After a stop each producer settles in about 2 × Recorder.INTERRUPTED_FLUSH_S (serve, purge)
    # and closes its client; one still running after this is ended.
    STOP_GRACE_S = 10.0
    KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL of a producer that will not end

    def __init__(self, tasks: Sequence[ProducerTask], events: EventLog):
        self.tasks = list(tasks)
        self.events = events
        self.outcomes: dict[int, ProducerOutcome] = {}
        self.crashes: dict[int, str] = {}  # producer: what happened to it
        self._go, self._stop = CONTEXT.Event(), CONTEXT.Event()
        self._outcomes, self._logs = CONTEXT.Queue(), CONTEXT.Queue()
        self._counters = [CONTEXT.RawArray("q", 8) for _ in self.tasks]
        self._processes = [
            CONTEXT.Process(
                target=produce,
                args=(task, self._go, self._stop, counters, self._outcomes, self._logs),
                name=f"producer-{index}",
                daemon=True,
            )
            for index, (task, counters) in enumerate(zip(self.tasks, self._counters, strict=True))
        ]
        self._forwarder = threading.Thread(
            target=forward_logs, args=(self._logs,), name="producer-logs", daemon=True
        )

    @property
    def stats(self) -> RecorderStats:
        """Sends and outcomes so far, summed over producers."""
        return summed_stats([self._stats_of(index) for index in range(len(self.tasks))])

    @property
    def tally(self) -> dict[str, int]:
        """Delivery reports by status, summed over producers (a crashed one's last shared)."""
        return summed_tally([self._tally_of(index) for index in range(len(self.tasks))])

    def start(self) -> None:
        """Write each journal's meta (so every producer's journal can be finalized), spawn the
        processes and wait until each has its client; ProducerCrash if one does not."""
        for task in self.tasks:
            write_meta(task.run_dir, task.slot, task.workload.keys)
        self._forwarder.start()
        with sigint_held():  # inherited through exec: a Ctrl-C during imports is no traceback
            for process in self._processes:
                process.start()
        if not wait_for(self._ready, self.READY_TIMEOUT_S, interval_s=0.1, pause=self._until_exit):
            raise ProducerCrash(f"producers not ready within {self.READY_TIMEOUT_S:g} s")
        pids = [process.pid for process in self._processes]
        self.events.write(PhaseEvent(phase="producers-ready", pids=pids))

    def _ready(self) -> bool:
        """True once every producer has its client; ProducerCrash as soon as one crashed."""
        if all(counters[READY] for counters in self._counters):
            return True
        self._collect(0.0)
        if self.crashes:
            raise ProducerCrash(self.problem())
        return False

    def _until_exit(self, seconds: float) -> None:
        """Sleep up to `seconds`, waking at once when a producer process ends."""
        wait([p.sentinel for p in self._processes], timeout=seconds)

    def run(self, stop: threading.Event) -> RecorderStats:
        """Let every producer send; return once all ended (`stop`: within STOP_GRACE_S)."""
        self._go.set()
        grace = Deadline.after(None)  # until `stop`: then STOP_GRACE_S
        while running := [p for p in self._processes if p.exitcode is None]:
            if stop.is_set() and not self._stop.is_set():
                self._stop.set()
                grace = Deadline.after(self.STOP_GRACE_S)
            if grace.passed():
                break
            wait([p.sentinel for p in running], timeout=0.2)
            self._collect(0.0)
        return self.stats

    def close(self, events: EventLog) -> Exception | None:
        """End every producer still running, write the summed recorder_tally; the workload's
        error (a crash, else an incomplete journal) or None. Never raises."""
        try:
            self._end_all()
            self._collect(1.0)
        except Exception as exc:  # what could be ended was; the tally must still be written
            log.error("ending the producer processes failed: %r", exc)
        with contextlib.suppress(Exception):
            self._logs.put(None)
            self._forwarder.join(timeout=5)
        journal_errors = [
            f"producer {i}: {o.journal_error}" for i, o in self.outcomes.items() if o.journal_error
        ]
        journal_errors += [
            f"producer {i}: no final tally ({what})" for i, what in self.crashes.items()
        ]
        error = "; ".join(journal_errors) or None
        with contextlib.suppress(Exception):
            events.write(
                RecorderTally(
                    reports=self.tally,
                    journal_error=error,
                    producers=[self._part(index) for index in range(len(self.tasks))],
                )
            )
        if self.crashes:
            return ProducerCrash(self.problem())
        return None if error is None else JournalError(error)

    def problem(self) -> str:
        """The crashes in one sentence."""
        what = "; ".join(f"producer {i} {what}" for i, what in sorted(self.crashes.items()))
        return f"{what} (whatever it journalled is merged into acked.parquet)"

    def _end_all(self) -> None:
        """Stop the producers, then SIGTERM and SIGKILL any that outlive the grace."""
        self._stop.set()
        grace = Deadline.after(self.STOP_GRACE_S)
        for process in self._processes:
            if process.pid is not None:
                process.join(timeout=grace.remaining())
        for process in self._processes:
            if process.pid is not None and process.exitcode is None:
                log.warning("producer %s did not stop in time: terminating it", process.name)
                process.terminate()
                process.join(timeout=self.KILL_GRACE_S)
                if process.exitcode is None:
                    process.kill()
                    process.join()

    def _collect(self, wait_s: float) -> None:
        """Take the outcomes reported so far; a producer that ended without one (waiting up to
        `wait_s` for it) or with an error is a crash, recorded as an event once."""
        self._drain(0.0)
        for index, process in enumerate(self._processes):
            if process.exitcode is None or index in self.crashes:
                continue
            if index not in self.outcomes:
                self._drain(wait_s)
            outcome = self.outcomes.get(index)
            if outcome is None:
                self._crashed(index, process, f"exited with code {process.exitcode}", None)
            elif outcome.error is not None:
                self._crashed(index, process, f"failed: {outcome.error}", outcome.error)

    def _drain(self, wait_s: float) -> None:
        """Take every outcome on the queue, waiting up to `wait_s` in all for more."""
        deadline = Deadline.after(wait_s)
        while True:
            try:
                outcome = self._outcomes.get(timeout=deadline.remaining())
            except Exception:  # queue.Empty; also a torn message from a killed producer
                return
            self.outcomes[outcome.index] = outcome

    def _crashed(self, index: int, process: Any, what: str, error: str | None) -> None:
        self.crashes[index] = what
        log.error("producer %d (pid %s) %s; its journal is kept", index, process.pid, what)
        self.events.write(
            ProducerCrashed(
                producer=index,
                pid=process.pid,
                exitcode=process.exitcode,
                error=error or what,
            )
        )

    def _part(self, index: int) -> ProducerTally:
        """Producer `index`'s part of the fleet's tally."""
        outcome = self.outcomes.get(index)
        return ProducerTally(
            producer=index,
            reports=self._tally_of(index),
            journal_error=None if outcome is None else outcome.journal_error,
            problem=self.crashes.get(index),
        )

    def _stats_of(self, index: int) -> RecorderStats:
        if (outcome := self.outcomes.get(index)) is not None:
            return outcome.stats
        c = self._counters[index]
        return RecorderStats(c[SENT], c[OK], c[FAILED], c[INDETERMINATE])

    def _tally_of(self, index: int) -> dict[str, int]:
        if (outcome := self.outcomes.get(index)) is not None:
            return outcome.tally
        c = self._counters[index]
        return {
            Status.OK.value: c[TALLY_OK],
            Status.FAILED.value: c[TALLY_FAILED],
            Status.INDETERMINATE.value: c[TALLY_INDETERMINATE],
        }


class LocalRecorder:
    """`workload.producers: 1`: one Recorder in the harness process and the run directory's
    one journal, as before several producers existed."""

    def __init__(
        self,
        workload: Workload,
        bootstrap: str,
        topic: str,
        config: dict[str, Scalar],
        run_dir: Path,
    ):
        self.journal = AckJournal(run_dir, workload.keys, status_of)
        self._client = (bootstrap, topic, config, workload)
        self.recorder: Recorder | None = None

    @property
    def stats(self) -> RecorderStats:
        """Sends so far and outcomes journalled so far."""
        return self.recorder.stats if self.recorder is not None else RecorderStats()

    def start(self) -> None:
        """Create the client."""
        self.recorder = Recorder(*self._client, self.journal)

    def run(self, stop: threading.Event) -> RecorderStats:
        """Send the workload in this thread (see Recorder.run)."""
        if self.recorder is None:
            raise RuntimeError("start() the recorder before run()")
        return self.recorder.run(stop)

    def close(self, events: EventLog) -> Exception | None:
        """Close the journal and write the tally; the JournalError to raise, or None."""
        tally = self.recorder.tally if self.recorder is not None else None
        error = close_with_tally(self.journal, tally, events)
        return None if error is None else JournalError(error)


def close_with_tally(
    journal: AckJournal, tally: DeliveryTally | None, events: EventLog
) -> str | None:
    """Close the journal, then record `tally` (the delivery reports its callback counted; None:
    none) beside the journal's error, for any client's journal.

    Never raises: it runs in `finally`, where the workload's own exception must survive.
    The analysis compares the tally with acked.parquet's reported rows, status by status.
    """
    error = close_journal(journal)
    tally = tally if tally is not None else DeliveryTally()
    with contextlib.suppress(Exception):
        events.write(RecorderTally(reports=tally.as_dict(), journal_error=error))
    return error
