"""What runs inside one consumer-group member process: its task, its client configuration,
and the loop that polls, processes and commits as its commit mode says, journalling every
processed record, commit and change of assignment (Arrow streams, crash-safe)."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.rundir import layout
from harness.rundir.events import now_us
from harness.rundir.records import (
    ASSIGNMENT_SCHEMA,
    COMMIT_OK,
    COMMIT_SCHEMA,
    PROCESSED_SCHEMA,
    AssignmentKind,
    CommitMode,
)
from harness.rundir.streams import StreamWriter
from harness.workload.processes import child_setup

log = logging.getLogger("kafka_chaos.consumers")
# A member process's shared counters: client ready, partitions assigned.
READY, ASSIGNED = range(2)
BATCH = 500
POLL_S = 0.2
# Short session: a killed or paused member is noticed (and its partitions reassigned) within
# seconds, inside a fault of a few seconds, rather than after librdkafka's 45 s default.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000


class ConsumerCrash(RuntimeError):
    """A group member could not start, or the group never got its partitions."""


@dataclass(frozen=True)
class ConsumerTask:
    """What one start of one member process is to do (pickled to it)."""

    member: int
    start: int  # how many times this member was started before
    bootstrap: str
    topic: str
    group_id: str
    commit: CommitMode
    run_dir: Path
    parent_pid: int
    log_level: int
    processing_s: float = 0.0  # how long processing one message takes
    session_timeout_ms: int = SESSION_TIMEOUT_MS  # workload.consumer_session_timeout_ms

    @property
    def files(self) -> layout.ConsumerFiles:
        """This start's journal files."""
        return layout.consumer_journal(self.member, self.start)


def consumer_config(task: ConsumerTask) -> dict[str, str | int | bool]:
    """The member's librdkafka settings: only the commit mode departs from the defaults
    (besides a short session, so a dead member is replaced within a fault); read_committed,
    the default, is spelled out."""
    return {
        "bootstrap.servers": task.bootstrap,
        "group.id": task.group_id,
        "client.id": f"kchaos-consumer-{task.member}",
        "auto.offset.reset": "earliest",  # a new group reads from the start
        # librdkafka's default, written out: in a transactional run an aborted message a
        # member processes is an aborted read (analysis.checks.transactions).
        "isolation.level": "read_committed",
        "enable.auto.commit": task.commit == CommitMode.AUTO,
        "session.timeout.ms": task.session_timeout_ms,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "log_level": 3,
    }


# ---------------------------------------------------------------------------------------------
# In the member process


class _Journal:
    """A member start's three Arrow streams (StreamWriter: each batch survives a SIGKILL of the
    process once written), every row stamped with the member and the time it is written. A row
    that cannot be written raises OSError: the member must not go on processing what it cannot
    journal."""

    def __init__(self, run_dir: Path, files: layout.ConsumerFiles, member: int):
        self.member = member
        self._processed = StreamWriter(run_dir / files.processed, PROCESSED_SCHEMA)
        self._commits = StreamWriter(run_dir / files.commits, COMMIT_SCHEMA)
        self._assignments = StreamWriter(run_dir / files.assignments, ASSIGNMENT_SCHEMA)

    def processed(self, rows: list[tuple[int | None, int, int]]) -> None:
        """Journal (msg_id, partition, offset) rows as processed now: this is the processing."""
        if rows:
            msg_id, partition, offset = zip(*rows, strict=True)
            self._append(self._processed, msg_id=msg_id, partition=partition, offset=offset)

    def commits(self, outcomes: list[tuple[int, int, str]]) -> None:
        """Journal (partition, next offset, outcome) of one commit attempt."""
        if outcomes:
            partition, offset, outcome = zip(*outcomes, strict=True)
            self._append(self._commits, partition=partition, offset=offset, outcome=outcome)

    def assignments(self, partitions: list[int], kind: AssignmentKind) -> None:
        """Journal a change of assignment: `partitions` were assigned, revoked or lost now."""
        self._append(self._assignments, partition=partitions, kind=kind.value)

    def _append(self, stream: StreamWriter, **columns: Any) -> None:
        """Append the rows `columns` give to `stream`, stamped with the member and now;
        OSError when they were not written."""
        if not stream.append(**columns, consumer=self.member, ts_us=now_us()):
            raise OSError(stream.error or f"{stream.path.name} is closed")

    def close(self) -> None:
        """Close the streams; raise the first failure one had (the member reports it)."""
        errors = [s.close() for s in (self._processed, self._commits, self._assignments)]
        if error := next(filter(None, errors), None):
            raise OSError(error)


def consume(task: ConsumerTask, counters: Any, outcomes: Any, logs: Any) -> None:
    """A member process's body: join the group, process and commit until SIGTERM (or the
    harness is gone), leave the group; report a failure (the journal's too) on `outcomes`."""
    from confluent_kafka import Consumer  # in the child only: the parent imports no client here

    stop = child_setup(logs, task.log_level)
    error = None
    journal: _Journal | None = None
    consumer = None
    try:
        journal = _Journal(task.run_dir, task.files, task.member)
        consumer = Consumer(
            consumer_config(task)
            | ({"on_commit": _auto_commits(journal)} if task.commit == "auto" else {})
        )
        callbacks = _rebalance_callbacks(journal, counters)
        consumer.subscribe([task.topic], **callbacks)
        counters[READY] = 1
        while not stop.is_set() and os.getppid() == task.parent_pid:
            messages = consumer.consume(num_messages=BATCH, timeout=POLL_S)
            rows = [_row(m) for m in messages if m.error() is None]
            if rows:
                _handle(task, consumer, journal, rows)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.exception("consumer %d failed", task.member)
    finally:
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close()  # leaves the group; in auto mode, commits the stored offsets
        if journal is not None:
            try:
                journal.close()
            except Exception as exc:
                error = error or f"journal: {type(exc).__name__}: {exc}"
        outcomes.put((task.member, task.start, error))


# A rebalance callback of subscribe(): (the consumer, the partitions that changed).
RebalanceCallback = Callable[[Any, list[Any]], None]


def _rebalance_callbacks(journal: _Journal, counters: Any) -> dict[str, RebalanceCallback]:
    """subscribe()'s on_assign, on_revoke and on_lost: each journals the change (before the
    member is given a record of a new assignment) and counts the partitions held."""
    assigned: set[int] = set()

    def change(kind: AssignmentKind) -> RebalanceCallback:
        def callback(_: Any, partitions: list) -> None:
            numbers = sorted(p.partition for p in partitions)
            journal.assignments(numbers, kind)
            if kind == AssignmentKind.ASSIGNED:
                assigned.update(numbers)
            else:
                assigned.difference_update(numbers)
            counters[ASSIGNED] = len(assigned)

        return callback

    kinds = {"on_assign": AssignmentKind.ASSIGNED, "on_revoke": AssignmentKind.REVOKED}
    kinds["on_lost"] = AssignmentKind.LOST
    return {name: change(kind) for name, kind in kinds.items()}


def _row(message: Any) -> tuple[int | None, int, int]:
    """(msg_id, partition, offset) of a message handed to the application."""
    from harness.workload.values import decode_value

    return decode_value(message.value())[0], message.partition(), message.offset()


def _handle(task: ConsumerTask, consumer: Any, journal: _Journal, rows: list) -> None:
    """Process one batch under the task's commit mode."""
    if task.commit == CommitMode.AUTO:
        _process(task, journal, rows)
    elif task.commit == CommitMode.AFTER_PROCESS:
        _process(task, journal, rows)
        _commit(task, consumer, journal, rows)
    else:  # before-process: only what was committed is processed
        done = _commit(task, consumer, journal, rows)
        _process(task, journal, [r for r in rows if r[1] in done])


def _process(task: ConsumerTask, journal: _Journal, rows: list) -> None:
    """Process rows: with a processing time, one message after the other, each journalled as
    it is done (a kill mid-batch leaves part of it processed, as in a real application)."""
    if not task.processing_s:
        journal.processed(rows)
        return
    for row in rows:
        time.sleep(task.processing_s)
        journal.processed([row])


def _commit(task: ConsumerTask, consumer: Any, journal: _Journal, rows: list) -> set[int]:
    """Commit each partition's offset after the batch (synchronously), journal the outcome;
    the partitions whose commit succeeded."""
    from confluent_kafka import KafkaException, TopicPartition

    ends: dict[int, int] = {}
    for _, partition, offset in rows:
        ends[partition] = max(ends.get(partition, -1), offset + 1)
    offsets = [TopicPartition(task.topic, p, o) for p, o in sorted(ends.items())]
    try:
        results = consumer.commit(offsets=offsets, asynchronous=False)
        outcomes = [(r.partition, r.offset, _outcome(r.error)) for r in results]
    except KafkaException as exc:
        name = _outcome(exc.args[0] if exc.args else None)
        outcomes = [(p, o, name) for p, o in sorted(ends.items())]
    journal.commits(outcomes)
    return {p for p, _, outcome in outcomes if outcome == COMMIT_OK}


def _auto_commits(journal: _Journal) -> Any:
    """The commit callback of auto mode: journal each automatic commit's outcome."""

    def on_commit(error: Any, partitions: list) -> None:
        whole = None if error is None else _outcome(error)
        rows = [
            (p.partition, p.offset, whole or _outcome(p.error)) for p in partitions if p.offset >= 0
        ]
        with contextlib.suppress(Exception):  # an exception here would surface from consume()
            journal.commits(rows)

    return on_commit


def _outcome(error: Any) -> str:
    """COMMIT_OK for no error, else the error's name."""
    if error is None:
        return COMMIT_OK
    try:
        return str(error.name())
    except Exception:
        return str(error)
