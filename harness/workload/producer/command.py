"""A program as the workload's producer: the harness's Java recorder, Kafka's own
VerifiableProducer, or any executable speaking the verifiable-client protocol (protocol.py).

The program runs in a session of its own (a Ctrl-C reaches the harness, which stops it with
SIGTERM), writes its log (stderr) to the run directory, and prints one JSON line per send's
outcome. A reader thread turns each line into a delivery report in the same crash-safe journal
the librdkafka recorder writes (journal.AckJournal), so the analysis cannot tell the clients
apart. The run is incomplete, with the reason, when the program breaks the protocol, exits
with an error, or ends without `shutdown_complete`; the analysis then judges it UNKNOWN.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness.rundir.events import ClientConfig, EventLog
from harness.rundir.records import Status
from harness.workload.journal import SOLE, AckJournal, MadeReport, ProducerSlot, close_journal
from harness.workload.producer.fleet import ClientError, MemberEnd, sole_close
from harness.workload.producer.protocol import (
    EffectiveConfig,
    Line,
    Progress,
    SendError,
    SendSuccess,
    ShutdownComplete,
    ToolData,
    ValueFormat,
    Violation,
    decode_with,
    journal_value,
    parse_line,
)
from harness.workload.producer.recorder import DeliveryTally, RecorderStats, Workload
from harness.workload.producer.send_errors import status_of_error

log = logging.getLogger("kafka_chaos.client")

__all__ = ["ClientError", "ClientProgram", "CommandProducer", "dying_with_parent"]

CLIENT_LOG = "client.log"  # the program's stderr, in the run directory
_SHOWN_VIOLATIONS = 3


@dataclass(frozen=True)
class ClientProgram:
    """A program to run as the producer, and how to read it."""

    argv: Sequence[str]
    values: ValueFormat
    label: str  # how messages name it: `java 3.8.0`, `command verifiable-producer`
    env: dict[str, str] = field(default_factory=dict)
    # Whether it ends by itself when the workload is done (the Java recorder is given the
    # duration); a command gets SIGTERM when the workload's time is up.
    stops_itself: bool = False
    # How long the program may take to report its last sends once the workload's time is up.
    grace_s: float = 60.0
    # After SIGTERM (an interrupt, or the grace ran out): how long before SIGKILL.
    term_s: float = 10.0
    # (acks, idempotence) the cell is judged by; a client that says it ran otherwise makes the
    # run incomplete (its verdict would judge the wrong contract).
    expected: tuple[str, bool] | None = None


@dataclass
class ErrorReport:
    """A send error as the journal reads errors (confluent_kafka.KafkaError's `name()`)."""

    error_name: str
    text: str

    def name(self) -> str:
        return self.error_name

    def __str__(self) -> str:
        return f"{self.error_name}: {self.text}"


@dataclass
class _Reading:
    """What the reader thread learned from the program's stdout."""

    lines: int = 0
    shutdown: bool = False
    violations: list[Violation] = field(default_factory=list)
    effective: EffectiveConfig | None = None


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """`argv` run so that it gets SIGTERM when the harness dies (util-linux's setpriv, where
    installed): a client left sending after a crash of the harness would write into the next
    run's cluster address space for nothing."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", *argv] if setpriv else list(argv)


class CommandProducer:
    """The `Producing` of a client program: start() checks it can run, run(stop) runs it to the
    end of the workload, close(events) journals the rest and says what went wrong, if anything.
    """

    def __init__(
        self, program: ClientProgram, workload: Workload, run_dir: Path, slot: ProducerSlot = SOLE
    ):
        self.program = program
        self.workload = workload
        self.run_dir = run_dir
        self.log_path = run_dir / (CLIENT_LOG if slot.index is None else f"client-{slot.index}.log")
        self.tally = DeliveryTally()
        self.journal = AckJournal(
            run_dir, workload.keys, lambda error: status_of_error(error.name()), slot
        )
        self.reading = _Reading()
        self.process: subprocess.Popen[bytes] | None = None
        self.terminated = False  # the harness sent SIGTERM
        self.killed = False  # ... and then SIGKILL
        self._max_local = -1

    @property
    def stats(self) -> RecorderStats:
        """Sends so far (as the program counts them) and outcomes journalled so far."""
        return RecorderStats.of(self.journal)

    def start(self) -> None:
        """Nothing to create before the workload starts: the program starts in run()."""

    def run(self, stop: threading.Event) -> RecorderStats:
        """Run the program until it exits by itself, `stop` is set (an interrupt: SIGTERM, and
        SIGKILL after term_s), or its time is up: the workload's duration for a program that
        does not stop by itself (SIGTERM, as kafkatest ends a verifiable producer, then up to
        grace_s to report its last sends), that plus grace_s for one that does."""
        feed = self._stdin_feed()
        with (self.log_path).open("ab") as stderr:
            self.process = subprocess.Popen(
                dying_with_parent(self.program.argv),
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL if feed is None else subprocess.PIPE,
                env={**os.environ, **self.program.env},
                start_new_session=True,  # Ctrl-C reaches the harness, which stops it
            )
        if feed is not None and self.process.stdin is not None:
            threading.Thread(target=feed, args=(self.process.stdin,), daemon=True).start()
        reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        reader.start()
        program, limit = self.program, _time_limit_s(self.workload)
        end_at = None
        if limit is not None:
            end_at = time.monotonic() + limit + (program.grace_s if program.stops_itself else 0)
        while self.process.poll() is None:
            if stop.wait(0.1):
                self._terminate(program.term_s)
            elif end_at is not None and time.monotonic() >= end_at:
                self._terminate(program.term_s if program.stops_itself else program.grace_s)
        reader.join()
        self.journal.flush()
        return self.stats

    def _stdin_feed(self) -> Callable[[IO[bytes]], None] | None:
        """What writes the program's stdin while it runs, on a thread of its own; None: the
        program gets no input."""
        return None

    def _other_line(self, line: Line) -> None:
        """A line of a kind the plain producer does not use (a subclass may)."""

    def _terminate(self, wait_s: float) -> None:
        """SIGTERM the program's session, then SIGKILL it if it has not exited in `wait_s`."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        self.terminated = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _read(self, stdout: IO[bytes] | None) -> None:
        """Journal every line of the program's stdout until it closes."""
        if stdout is None:
            return
        apply = self._applier()
        last_commit = time.monotonic()
        for raw in stdout:
            apply(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            now = time.monotonic()
            if now - last_commit >= 0.05:
                self.journal.commit()
                last_commit = now
        self.journal.commit()

    def _applier(self) -> Callable[[str], None]:
        """The function that journals one line (bound once: it runs for every send)."""
        journal, tally, reading = self.journal, self.tally, self.reading
        fmt, keys, base = self.program.values, self.workload.keys, journal.slot.id_base
        other = self._other_line

        def report(
            value: bytes | None, failure: ErrorReport | None, where, latency_us
        ) -> MadeReport:
            msg_id, key_seq = decode_with(fmt, value, keys)
            if msg_id is not None:
                self._max_local = max(self._max_local, msg_id - base)
                journal.sent_upto = max(journal.sent_upto, self._max_local + 1)
            latency = latency_us / 1e6 if latency_us is not None else None
            return MadeReport(journal_value(msg_id, key_seq), failure, where, latency)

        def apply(text: str) -> None:
            reading.lines += 1
            if not text.strip():
                return
            line = parse_line(text)
            match line:
                case SendSuccess():
                    tally.ok += 1
                    where = (line.partition, line.offset)
                    journal.delivered.append(report(line.value, None, where, line.latency_us))
                case SendError():
                    failure = ErrorReport(line.error, line.message)
                    row = report(line.value, failure, (None, None), line.latency_us)
                    if status_of_error(line.error) == Status.FAILED:
                        tally.failed += 1
                        journal.failed.append(row)
                    else:
                        tally.indeterminate += 1
                        journal.indeterminate.append(row)
                case Progress():
                    journal.sent_upto = max(journal.sent_upto, line.sent)
                case ToolData():
                    pass  # kafkatest's closing summary: the journal counted every send itself
                case EffectiveConfig():
                    reading.effective = line
                case ShutdownComplete():
                    reading.shutdown = True
                case Violation():
                    reading.violations.append(line)
                case _:
                    other(line)

        return apply

    def problem(self) -> str | None:
        """Why the program's run is incomplete (None: it ran and reported to the end)."""
        program, reading = self.program, self.reading
        process = self.process
        if process is None:
            return f"the client ({program.label}) never started"
        if reading.violations:
            shown = "; ".join(
                f"{v.reason}: {v.line!r}" for v in reading.violations[:_SHOWN_VIOLATIONS]
            )
            return (
                f"the client ({program.label}) broke the verifiable-client protocol in "
                f"{len(reading.violations)} of {reading.lines} lines ({shown})"
            )
        if (mismatch := self._contract_mismatch()) is not None:
            return mismatch
        if self.killed:
            return (
                f"the client ({program.label}) did not exit after SIGTERM and was killed "
                f"before it reported every send{_log_tail(self.log_path)}"
            )
        if process.returncode != 0 and not self.terminated:
            return (
                f"the client ({program.label}) exited with status {process.returncode} "
                f"after {reading.lines} lines{_log_tail(self.log_path)}"
            )
        if not reading.shutdown:
            return (
                f"the client ({program.label}) exited without shutdown_complete after "
                f"{reading.lines} lines{_log_tail(self.log_path)}"
            )
        return None

    def _contract_mismatch(self) -> str | None:
        """Why the settings the client says it ran with are not those the cell is judged by."""
        effective, expected = self.reading.effective, self.program.expected
        if effective is None or expected is None:
            return None
        acks = effective.config.get("acks")
        acks = "all" if acks == "-1" else acks
        idempotent = effective.idempotent
        if idempotent is None and "enable.idempotence" in effective.config:
            idempotent = effective.config["enable.idempotence"].lower() == "true"
        ran = (acks if acks is not None else expected[0], idempotent)
        if ran[0] == expected[0] and (idempotent is None or idempotent == expected[1]):
            return None
        return (
            f"the client ({self.program.label}) ran with acks={ran[0]}, idempotence={ran[1]}, "
            f"but the cell is judged as acks={expected[0]}, idempotence={expected[1]}: "
            "set both in the producer section"
        )

    def finish(self) -> tuple[str | None, str | None]:
        """Stop the program if it still runs and close the journal: (the journal's error, why
        the run is incomplete), each None when all is well. Never raises."""
        self._terminate(self.program.term_s)
        return close_journal(self.journal), self.problem()

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def ready(self) -> bool:
        """A program has nothing to create before it runs: always ready."""
        return True

    def end(self) -> MemberEnd:
        """As a member of a fleet: `finish`, with the tally and the client's settings."""
        journal_error, problem = self.finish()
        return MemberEnd(self.tally.as_dict(), journal_error, problem, self.config_event())

    def config_event(self) -> ClientConfig | None:
        """The client_config event of the settings the client said it ran with, if it did."""
        effective = self.reading.effective
        if effective is None:
            return None
        return ClientConfig(
            client=self.program.label, config=effective.config, idempotent=effective.idempotent
        )

    def close(self, events: EventLog) -> Exception | None:
        """As the run's one producer: `end`, its tally and settings written (fleet.sole_close);
        the error to raise after the read-back, or None."""
        return sole_close(self.end(), events)


def _time_limit_s(workload: Workload) -> float | None:
    """How long the workload sends: its duration, else count / rate; None if unbounded."""
    if workload.duration_s:
        return workload.duration_s
    if workload.count and workload.rate:
        return workload.count / workload.rate
    return None


def _log_tail(path: Path, lines: int = 3) -> str:
    """`; its log ends: ...` with the last lines of the client's log, or nothing."""
    try:
        tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return f"; its log ends: {' | '.join(tail)}" if tail else ""
