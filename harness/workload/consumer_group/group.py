"""A consumer group reading while the faults run (`workload.consumers`): each member an OS process.

Members are started with `spawn` (librdkafka's threads do not survive a fork) before the
producers send, read while the nemesis acts, and after the final heal keep reading until the
group's committed offsets reach every partition's end (bounded; the `consumers` event says
whether they did). Each start of a member journals what it processed and every commit it
attempted in Arrow streams of its own (layout.consumer_journal): a batch is written to the OS
before the next step of the commit protocol, so a SIGKILL loses nothing already "processed".

The commit mode decides the order (records.CommitMode):
- after-process: process the batch, then commit it synchronously (at-least-once);
- before-process: commit the batch synchronously, then process the partitions whose commit
  succeeded (at-most-once: a batch whose commit failed is skipped, never processed);
- auto: process the batch; librdkafka stores each offset as it hands the message over and
  commits the stored offsets every auto.commit.interval.ms (its defaults), reported through
  the commit callback.
Processing a message is journalling it, after `workload.consumer_processing_ms` of simulated
work when that is set, one message after the other: a fault mid-batch then lands inside the
processing, where the modes differ, rather than in the client's wait for messages.

A member is a target of the consumer faults (harness.chaos.faults.consumer): it has a name,
and kill/pause/unpause/leave/start, as a broker node has kill/pause/start. Every member process
is ended by `close()` (in `finally`), and each ends by itself when the harness process is gone;
it ignores SIGINT (the harness decides) and leaves the group cleanly on SIGTERM.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.rundir.config import setting_text
from harness.rundir.events import (
    ConsumerCrashed,
    ConsumersDone,
    EventLog,
    PhaseEvent,
    now_us,
)
from harness.rundir.records import CONSUMER_STUCK_S, CommitMode
from harness.waiting import Deadline, wait_for
from harness.workload.consumer_group.java import JavaMemberProcess, convert_journals
from harness.workload.consumer_group.librdkafka import (
    ASSIGNED,
    SESSION_TIMEOUT_MS,
    ConsumerCrash,
    ConsumerTask,
    consume,
    consumer_config,
)
from harness.workload.processes import CONTEXT, BuiltProgram, forward_logs, sigint_held

# ---------------------------------------------------------------------------------------------
# In the harness

log = logging.getLogger("kafka_chaos.consumers")
READER_WAIT_S = 5.0  # for the catch-up's reader to reach the ends of the partitions behind


@dataclass(frozen=True)
class MemberRole:
    """A member's role, read as a node's is by the nemesis: it is no broker."""

    is_broker: bool = False


class ConsumerMember:
    """One member of the group as the consumer faults see it: a named process that can be
    killed, paused, made to leave, and started again (a new process, with new journal files)."""

    role = MemberRole()

    def __init__(self, group: ConsumerGroup, index: int):
        self.group = group
        self.index = index
        self.node_id = -1 - index  # never a broker id
        self.starts = 0
        self.process: Any = None
        self.counters: Any = None
        self.ended_on_purpose = False  # killed, or told to leave: its end is no crash

    @property
    def hostname(self) -> str:
        return f"consumer-{self.index}"

    def state(self) -> str:
        """running, paused or exited, as a container's state reads."""
        if self.process is None or self.process.exitcode is not None:
            return "exited"
        return "paused" if self.group.paused(self) else "running"

    def start(self) -> None:
        """Start a new process for this member (its next start), joining the group."""
        task = self.group.task(self.index, self.starts)
        self.starts += 1
        self.ended_on_purpose = False
        if self.group.java is not None:  # the Java client's member, a program of its own
            self.counters = [0, 0]
            self.process = JavaMemberProcess(
                self.group.java, task, self.counters, self.group.outcomes
            )
            self.process.start()
            return
        self.counters = CONTEXT.RawArray("q", 2)
        self.process = CONTEXT.Process(
            target=consume,
            args=(task, self.counters, self.group.outcomes, self.group.logs),
            name=f"consumer-{self.index}",
            daemon=True,
        )
        with sigint_held():
            self.process.start()

    def kill(self) -> None:
        """SIGKILL: the process dies mid-batch; its session expires and the group rebalances."""
        if self.state() == "exited":
            return
        self.ended_on_purpose = True
        self.group.resumed(self)
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(5)

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its connections open (a long GC pause)."""
        os.kill(self.process.pid, signal.SIGSTOP)
        self.group.paused_members.add(self.index)

    def unpause(self) -> None:
        """SIGCONT."""
        if self.process is not None and self.process.exitcode is None:
            os.kill(self.process.pid, signal.SIGCONT)
        self.group.resumed(self)

    def leave(self, timeout_s: float = 30.0) -> None:
        """SIGTERM: the member closes its client, leaving the group (a rebalance); SIGKILL if it
        outlives `timeout_s`."""
        if self.state() == "exited":
            return
        self.ended_on_purpose = True
        self.unpause()
        self.process.terminate()
        self.process.join(timeout_s)
        if self.process.exitcode is None:
            log.warning("consumer %d did not leave in %g s: killing it", self.index, timeout_s)
            self.process.kill()
            self.process.join()


@dataclass(frozen=True)
class Liveness:
    """What the `consumers` event tells the liveness check: the bound past which a group that
    makes no progress is stuck, and how long an open transaction may hold the last stable
    offset (the producers' transaction.timeout.ms; None without transactions)."""

    stuck_s: float = CONSUMER_STUCK_S
    transaction_timeout_ms: int | None = None


@dataclass(frozen=True)
class CatchUp:
    """Where the group's committed offsets stood when the harness stopped waiting."""

    caught_up: bool
    waited_s: float
    committed: dict[int, int]  # partition → next offset the group would read (-1: none)
    end_offsets: dict[int, int]  # partition → high watermark


def nothing_readable(
    reader: Any, topic: str, starts: dict[int, int], timeout_s: float = READER_WAIT_S
) -> bool:
    """True when `reader` (a read_committed consumer with enable.partition.eof), placed at
    each partition's offset in `starts`, reaches every one's end before it is given a record:
    what lies there is transaction markers and aborted records only. False at the first
    record, for a partition without a committed offset (< 0), or when no end was reached
    within `timeout_s`."""
    from confluent_kafka import KafkaError, TopicPartition

    if any(offset < 0 for offset in starts.values()):
        return False
    reader.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    waiting, deadline = set(starts), Deadline.after(timeout_s)
    try:
        while waiting and not deadline.passed():
            message = reader.poll(min(0.5, deadline.remaining()))
            if message is None:
                continue
            error = message.error()
            if error is None:
                return False  # a record the group has not committed past
            if error.code() == KafkaError._PARTITION_EOF:
                waiting.discard(message.partition())
        return not waiting
    finally:
        reader.unassign()


class ConsumerGroup:
    """The m member processes of one repetition.

    `start()` spawns them and waits until the group holds every partition; the consumer
    faults act on `members`; `catch_up()` waits (bounded) for the committed offsets to reach
    the end; `close(events)` ends every process and writes the `consumers` event.
    """

    READY_TIMEOUT_S = 60.0

    def __init__(
        self,
        members: int,
        bootstrap: str,
        topic: str,
        partitions: int,
        commit: CommitMode,
        run_dir: Path,
        events: EventLog,
        processing_ms: float = 0.0,
        java: BuiltProgram | None = None,
        liveness: Liveness | None = None,
        session_timeout_ms: int | None = None,
    ):
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.java = java  # the Java client's member program; None: librdkafka members
        self.commit, self.run_dir, self.events = CommitMode(commit), run_dir, events
        self.processing_s = processing_ms / 1000
        self.session_timeout_ms = session_timeout_ms or SESSION_TIMEOUT_MS
        self.liveness = liveness or Liveness()
        self.group_id = f"kchaos-group-{os.getpid()}-{now_us()}"
        self.members = [ConsumerMember(self, index) for index in range(members)]
        self.paused_members: set[int] = set()
        self.outcomes, self.logs = CONTEXT.Queue(), CONTEXT.Queue()
        self.errors: dict[tuple[int, int], str] = {}  # (member, start) → its reported failure
        self.crashes: list[str] = []
        self.conversion_error: str | None = None  # Java members' journals not converted
        self._seen_exits: set[tuple[int, int]] = set()
        self._reports: set[tuple[int, int]] = set()  # (member, start) that reported its end
        self._forwarder = threading.Thread(
            target=forward_logs, args=(self.logs,), name="consumer-logs", daemon=True
        )
        self._level = logging.getLogger("kafka_chaos").getEffectiveLevel()

    def task(self, member: int, start: int) -> ConsumerTask:
        """The task of member's start-th process."""
        return ConsumerTask(
            member,
            start,
            self.bootstrap,
            self.topic,
            self.group_id,
            self.commit,
            self.run_dir,
            os.getpid(),
            self._level,
            self.processing_s,
            self.session_timeout_ms,
        )

    def paused(self, member: ConsumerMember) -> bool:
        return member.index in self.paused_members

    def resumed(self, member: ConsumerMember) -> None:
        self.paused_members.discard(member.index)

    def member(self, index: int) -> ConsumerMember:
        """Member `index`; FaultError-worthy LookupError when the group has no such member."""
        if not 0 <= index < len(self.members):
            raise LookupError(f"consumer-{index} does not exist: the group has {len(self.members)}")
        return self.members[index]

    def start(self) -> None:
        """Spawn every member and wait until the group holds every partition."""
        self._forwarder.start()
        for member in self.members:
            member.start()
        if not wait_for(self._joined, self.READY_TIMEOUT_S, interval_s=0.1):
            raise ConsumerCrash(
                f"the consumer group did not get all {self.partitions} partitions within "
                f"{self.READY_TIMEOUT_S:g} s"
            )
        pids = [m.process.pid for m in self.members]
        self.events.write(PhaseEvent(phase="consumers-ready", pids=pids, group=self.group_id))

    def _joined(self) -> bool:
        """True once the members hold every partition; ConsumerCrash when one ended."""
        if sum(m.counters[ASSIGNED] for m in self.members) >= self.partitions:
            return True
        self.check()
        if dead := [m.hostname for m in self.members if m.state() == "exited"]:
            raise ConsumerCrash(f"{', '.join(dead)} ended while joining the group")
        return False

    def check(self) -> None:
        """Record, once each, member processes that ended by themselves (consumer_crashed)."""
        self._drain()
        for member in self.members:
            process = member.process
            key = (member.index, member.starts - 1)
            if process is None or process.exitcode is None or key in self._seen_exits:
                continue
            self._seen_exits.add(key)
            error = self.errors.get(key)
            if member.ended_on_purpose and error is None:
                continue
            what = error or f"exited with code {process.exitcode}"
            self.crashes.append(f"consumer-{member.index} (start {key[1]}) {what}")
            self.events.write(
                ConsumerCrashed(
                    member=member.index,
                    start=key[1],
                    pid=process.pid,
                    exitcode=process.exitcode,
                    error=what,
                )
            )

    def catch_up(self, timeout_s: float, stop: threading.Event) -> CatchUp:
        """Wait until the committed offset of every partition reaches its high watermark, or
        nothing a read_committed consumer could read lies past it (in a transactional run the
        last offsets are a transaction marker, and aborted records: the group never commits
        them), at most `timeout_s` (or until `stop`, an interrupt); where they stood then."""
        from confluent_kafka import Consumer

        started = time.monotonic()
        probe = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": self.group_id, "log_level": 3}
        )
        reader = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"{self.group_id}-reader",  # assigned, never joins or commits
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "log_level": 3,
            }
        )
        committed: dict[int, int] = {}
        ends: dict[int, int] = {}

        def caught_up() -> bool:
            nonlocal committed, ends
            self.check()
            committed, ends = self._positions(probe)
            behind = {p: committed.get(p, -1) for p, end in ends.items()}
            behind = {p: at for p, at in behind.items() if at < ends[p]}
            return not behind or nothing_readable(reader, self.topic, behind)

        try:
            done = bool(wait_for(caught_up, timeout_s, interval_s=0.5, pause=stop.wait))
            return CatchUp(done, round(time.monotonic() - started, 3), committed, ends)
        finally:
            probe.close()
            reader.close()

    def _positions(self, probe: Any) -> tuple[dict[int, int], dict[int, int]]:
        """(committed offset, high watermark) of every partition; empty on a broker error."""
        from confluent_kafka import TopicPartition

        try:
            parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            committed = {tp.partition: tp.offset for tp in probe.committed(parts, timeout=5)}
            ends = {
                p: probe.get_watermark_offsets(TopicPartition(self.topic, p), 5, False)[1]
                for p in range(self.partitions)
            }
        except Exception as exc:
            log.info("consumer positions not readable yet: %s", exc)
            return {}, {p: 1 for p in range(self.partitions)}  # unknown: not caught up
        return committed, ends

    def close(self, events: EventLog, catch_up: CatchUp | None) -> None:
        """End every member (leave the group, SIGKILL if it will not) and write the
        `consumers` event with the final committed offsets. Never raises."""
        try:
            for member in self.members:
                with contextlib.suppress(Exception):
                    member.unpause()
            for member in self.members:  # SIGTERM all first: they leave in parallel
                if member.state() != "exited":
                    member.ended_on_purpose = True
                    with contextlib.suppress(Exception):
                        member.process.terminate()
            for member in self.members:
                with contextlib.suppress(Exception):
                    member.leave(timeout_s=15.0)
            self._collect_last()
        except Exception as exc:
            log.error("ending the consumer processes failed: %r", exc)
        if self.java is not None:
            try:
                convert_journals(self.run_dir)
            except Exception as exc:  # the analysis then finds no journal: UNKNOWN, not a crash
                self.conversion_error = f"the Java members' journals: {exc!r}"
                log.error("converting the Java members' journals failed: %r", exc)
        with contextlib.suppress(Exception):
            self.logs.put(None)
            self._forwarder.join(timeout=5)
        with contextlib.suppress(Exception):
            events.write(self._summary(catch_up))

    def _collect_last(self) -> None:
        """Take the last reports of processes that just ended (waiting briefly for them)."""
        wait_for(self._all_reported, 2.0, interval_s=0.2, pause=self._drain)
        self.check()

    def _all_reported(self) -> bool:
        """True when every member's last process has reported its end."""
        return all(
            (m.index, m.starts - 1) in self._reports for m in self.members if m.process is not None
        )

    def _drain(self, wait_s: float = 0.0) -> None:
        """Take every member's report on the queue, waiting up to `wait_s` in all for more."""
        deadline = Deadline.after(wait_s)
        while True:
            try:
                member, start, error = self.outcomes.get(timeout=deadline.remaining())
            except Exception:  # queue.Empty, or a torn message from a killed member
                return
            self._reports.add((member, start))
            if error is not None:
                self.errors[(member, start)] = error

    def _summary(self, catch_up: CatchUp | None) -> ConsumersDone:
        """The `consumers` event."""
        final = self._final_committed()
        ends = catch_up.end_offsets if catch_up else {}
        errors = [f"consumer-{m} (start {s}): {e}" for (m, s), e in self.errors.items()]
        errors += [self.conversion_error] if self.conversion_error else []
        return ConsumersDone(
            commit=self.commit.value,
            members=len(self.members),
            processing_ms=self.processing_s * 1000,
            starts={m.hostname: m.starts for m in self.members},
            group=self.group_id,
            caught_up=bool(catch_up and catch_up.caught_up),
            waited_s=catch_up.waited_s if catch_up else None,
            end_offsets={str(p): o for p, o in ends.items()},
            committed={str(p): o for p, o in final.items()},
            journal_errors=errors,
            crashes=list(self.crashes),
            client="librdkafka" if self.java is None else self.java.label,
            config=self._members_config(),
            stuck_s=self.liveness.stuck_s,
            transaction_timeout_ms=self.liveness.transaction_timeout_ms,
        )

    def _members_config(self) -> dict[str, str]:
        """The members' settings: librdkafka's as the harness gives them (it cannot list its
        defaults), a Java member's with the client's defaults resolved, as it printed them
        ({} when no member got as far)."""
        if self.java is None:
            given = consumer_config(self.task(0, 0))
            hidden = ("bootstrap.servers", "client.id", "log_level")
            return {k: setting_text(v) for k, v in given.items() if k not in hidden}
        printed = (getattr(m.process, "config", None) for m in self.members)
        return next((config for config in printed if config), {})

    def _final_committed(self) -> dict[int, int]:
        """The group's committed offsets once every member has left ({} when unreadable)."""
        from confluent_kafka import Consumer

        probe = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": self.group_id, "log_level": 3}
        )
        try:
            committed, _ = self._positions(probe)
            return committed
        finally:
            probe.close()
