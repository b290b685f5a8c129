"""The librdkafka producer: the one recorder in the harness process (`LocalRecorder`), or, for
`workload.producers` > 1, a fleet.Fleet of producer processes (`ProducerProcess`).

In one process the recorders would take turns on the GIL (each spends ~5 µs of client CPU per
message), so each member of a fleet runs in a process of its own, started with `spawn`:
librdkafka's threads do not survive a fork. A producer process ends when its share is sent,
when the harness sets its stop (an interrupt: it settles in about a second, as the one recorder
does), when the harness process is gone, or on SIGTERM. It ignores SIGINT: Ctrl-C reaches the
whole process group, and the harness decides.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import astuple, dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from harness.experiment.fields import Scalar
from harness.rundir.events import EventLog, ProducerCrashed
from harness.rundir.records import STATUSES
from harness.waiting import Deadline
from harness.workload.journal import SOLE, AckJournal, ProducerSlot, close_journal, write_meta
from harness.workload.processes import CONTEXT, child_setup, forward_logs, sigint_held
from harness.workload.producer.fleet import Fleet, MemberEnd, ProducerCrash, shares, sole_close
from harness.workload.producer.recorder import (
    DeliveryTally,
    Recorder,
    RecorderStats,
    Workload,
    status_of,
)

log = logging.getLogger("kafka_chaos.producers")
# A producer's shared counters: its live stats (RecorderStats' fields), its delivery tally (by
# status, in STATUSES' order), and whether it is ready.
STATS, TALLY, READY = slice(0, 4), slice(4, 7), 7
SHARE_EVERY_S = 0.2


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
        ProducerTask(slot, share, bootstrap, topic, producer_config, run_dir, os.getpid(), level)
        for slot, share in shares(workload, producers)
    ]


@dataclass(frozen=True)
class ProducerOutcome:
    """What a producer process reports as it ends, on its own queue (a crashed one reports
    nothing)."""

    stats: RecorderStats
    tally: dict[str, int]
    journal_error: str | None
    error: str | None  # the exception that ended it early


# ---------------------------------------------------------------------------------------------
# In the producer process


def produce(task: ProducerTask, go: Any, stop_all: Any, counters: Any, outcomes: Any, logs: Any):
    """A producer process's body: wait for `go`, record its share, then report its outcome."""
    stop = child_setup(logs, task.log_level)
    producer = LocalRecorder(
        task.workload, task.bootstrap, task.topic, task.producer_config, task.run_dir, task.slot
    )
    error = None
    done = threading.Event()
    try:
        producer.start()
        threading.Thread(
            target=_share,
            args=(producer, counters, stop_all, stop, done, task.parent_pid),
            daemon=True,
        ).start()
        counters[READY] = 1
        while not go.wait(SHARE_EVERY_S) and not stop.is_set():
            pass
        producer.run(stop)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.exception("producer %d failed", task.slot.index or 0)
    finally:
        done.set()
        end = producer.end()
        _publish(counters, producer.stats, end.reports)
        outcomes.put(ProducerOutcome(producer.stats, end.reports, end.journal_error, error))


def _share(
    recorder: LocalRecorder,
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
    counters[STATS] = astuple(stats)
    counters[TALLY] = [tally[status] for status in STATUSES]


# ---------------------------------------------------------------------------------------------
# In the harness


class ProducerProcess:
    """A FleetMember: one producer process of a fleet, with its task, shared counters, outcome
    queue and log queue. A crash is a producer_crashed event when it is seen."""

    # After a stop the producer settles in about 2 × Recorder.INTERRUPTED_FLUSH_S (serve, purge)
    # and closes its client; one still running after this is ended.
    STOP_GRACE_S = 10.0
    KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL of a producer that will not end

    def __init__(self, task: ProducerTask, events: EventLog):
        self.task = task
        self.index = task.slot.index if task.slot.index is not None else 0
        self.events = events
        self.outcome: ProducerOutcome | None = None
        self.crash: str | None = None  # what happened to it
        self._go, self._stop = CONTEXT.Event(), CONTEXT.Event()
        self._outcomes, self._logs = CONTEXT.Queue(), CONTEXT.Queue()
        self.counters: Any = CONTEXT.RawArray("q", 8)
        self.process = CONTEXT.Process(
            target=produce,
            args=(task, self._go, self._stop, self.counters, self._outcomes, self._logs),
            name=f"producer-{self.index}",
            daemon=True,
        )
        self._forwarder = threading.Thread(
            target=forward_logs, args=(self._logs,), name=f"producer-{self.index}-logs", daemon=True
        )

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def stats(self) -> RecorderStats:
        """Sends and outcomes so far (its last shared, once it ended: its own report)."""
        if self.outcome is not None:
            return self.outcome.stats
        return RecorderStats(*self.counters[STATS])

    @property
    def tally(self) -> dict[str, int]:
        """Delivery reports by status (a crashed producer's last shared)."""
        if self.outcome is not None:
            return self.outcome.tally
        return dict(zip(STATUSES, self.counters[TALLY], strict=True))

    def start(self) -> None:
        """Write the journal's meta (so that it can be finalized whatever happens), spawn."""
        write_meta(self.task.run_dir, self.task.slot, self.task.workload.keys)
        self._forwarder.start()
        with sigint_held():  # inherited through exec: a Ctrl-C during imports is no traceback
            self.process.start()

    def ready(self) -> bool:
        """True once it has its client; ProducerCrash as soon as it crashed."""
        if self.counters[READY]:
            return True
        self._collect(0.0)
        if self.crash is not None:
            raise ProducerCrash(f"producer {self.index}: {self.crash}")
        return False

    def run(self, stop: threading.Event) -> RecorderStats:
        """Let it send; return once it ended (after `stop`: within STOP_GRACE_S)."""
        self._go.set()
        grace = Deadline.after(None)  # until `stop`: then STOP_GRACE_S
        while self.process.exitcode is None:
            if stop.is_set() and not self._stop.is_set():
                self._stop.set()
                grace = Deadline.after(self.STOP_GRACE_S)
            if grace.passed():
                break
            wait([self.process.sentinel], timeout=0.2)
            self._collect(0.0)
        return self.stats

    def end(self) -> MemberEnd:
        """End the process if it still runs (SIGTERM, then SIGKILL), take its outcome; its
        tally, journal error and crash. Never raises."""
        try:
            self._end()
            self._collect(1.0)
        except Exception as exc:  # what could be ended was; the tally must still be written
            log.error("ending producer %d failed: %r", self.index, exc)
        with contextlib.suppress(Exception):
            self._logs.put(None)
            self._forwarder.join(timeout=5)
        errors = [self.outcome.journal_error] if self.outcome is not None else []
        if self.crash is not None:
            errors.append(f"no final tally ({self.crash})")
        problem = None
        if self.crash is not None:
            problem = f"{self.crash} (whatever it journalled is merged into acked.parquet)"
        return MemberEnd(self.tally, "; ".join(e for e in errors if e) or None, problem)

    def _end(self) -> None:
        self._stop.set()
        if self.process.pid is None:
            return
        self.process.join(timeout=self.STOP_GRACE_S)
        if self.process.exitcode is None:
            log.warning("producer %d did not stop in time: terminating it", self.index)
            self.process.terminate()
            self.process.join(timeout=self.KILL_GRACE_S)
            if self.process.exitcode is None:
                self.process.kill()
                self.process.join()

    def _collect(self, wait_s: float) -> None:
        """Take its outcome if reported (waiting up to `wait_s` once it has ended); ended
        without one, or with an error, it crashed: recorded as an event once."""
        if self.outcome is None:
            ended = self.process.exitcode is not None
            with contextlib.suppress(Exception):  # queue.Empty; a torn message of a kill
                self.outcome = self._outcomes.get(timeout=wait_s if ended else 0.0)
        if self.process.exitcode is None or self.crash is not None:
            return
        if self.outcome is None:
            self._crashed(f"exited with code {self.process.exitcode}", None)
        elif self.outcome.error is not None:
            self._crashed(f"failed: {self.outcome.error}", self.outcome.error)

    def _crashed(self, what: str, error: str | None) -> None:
        self.crash = what
        log.error("producer %d (pid %s) %s; its journal is kept", self.index, self.pid, what)
        self.events.write(
            ProducerCrashed(
                producer=self.index,
                pid=self.pid,
                exitcode=self.process.exitcode,
                error=error or what,
            )
        )


def process_fleet(tasks: list[ProducerTask], events: EventLog) -> Fleet:
    """The fleet of one producer process per task."""
    return Fleet([ProducerProcess(task, events) for task in tasks], events)


class LocalRecorder:
    """One Recorder and its journal in this process: for `workload.producers: 1` the harness's,
    with the run directory's one journal (as before several producers existed); else a fleet
    member's, in its producer process."""

    def __init__(
        self,
        workload: Workload,
        bootstrap: str,
        topic: str,
        config: dict[str, Scalar],
        run_dir: Path,
        slot: ProducerSlot = SOLE,
    ):
        self.journal = AckJournal(run_dir, workload.keys, status_of, slot)
        self._client = (bootstrap, topic, config, workload)
        self.recorder: Recorder | None = None

    @property
    def stats(self) -> RecorderStats:
        """Sends so far and outcomes journalled so far."""
        return self.recorder.stats if self.recorder is not None else RecorderStats()

    @property
    def tally(self) -> DeliveryTally:
        """Delivery reports by status so far (none before start)."""
        return self.recorder.tally if self.recorder is not None else DeliveryTally()

    def start(self) -> None:
        """Create the client."""
        self.recorder = Recorder(*self._client, self.journal)

    def run(self, stop: threading.Event) -> RecorderStats:
        """Send the workload in this thread (see Recorder.run)."""
        if self.recorder is None:
            raise RuntimeError("start() the recorder before run()")
        return self.recorder.run(stop)

    def end(self) -> MemberEnd:
        """Close the journal: its delivery tally (none before start) and error. Never raises."""
        return MemberEnd(self.tally.as_dict(), close_journal(self.journal))

    def close(self, events: EventLog) -> Exception | None:
        """`end`, and the tally written (fleet.sole_close); the JournalError to raise, or None."""
        return sole_close(self.end(), events)


def close_with_tally(
    journal: AckJournal, tally: DeliveryTally | None, events: EventLog
) -> str | None:
    """Close the journal, then record `tally` (the delivery reports its callback counted; None:
    none) beside the journal's error, for any client's journal.

    Never raises: it runs in `finally`, where the workload's own exception must survive.
    The analysis compares the tally with acked.parquet's reported rows, status by status.
    """
    end = MemberEnd((tally or DeliveryTally()).as_dict(), close_journal(journal))
    sole_close(end, events)
    return end.journal_error
