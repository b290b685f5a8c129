"""A consumer-group member on the Java client: one start of it as an OS process running
harness/platform/java_programs/KafkaChaosConsumer.java, and its journal turned into the run
directory's Arrow streams.

The Java member journals as the librdkafka member does (consumer_group/librdkafka.py), in two
files of JSON arrays it writes itself a batch at a time (layout.java_consumer_journal), so a
SIGKILL or SIGSTOP of the process acts on the client alone, as a fault on a member must. When a
start has ended, `convert_journal` writes the same rows to the Arrow streams the analysis
reads; `convert_journals` does it for every start of a run (finalize calls it too, for a run a
crashed harness left).

`JavaMemberProcess` has what the group's faults use of a member's process (pid, exitcode,
join, terminate, kill) and reads the program's stdout: the partitions it holds go to the
member's counters and, change by change, to its assignment journal (an Arrow stream the
harness writes itself: the program prints each change as it happens, stamped), and its end
(with the last `error` line, if any) to the group's outcomes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypedDict

import pyarrow as pa

from harness.rundir import layout
from harness.rundir.events import now_us
from harness.rundir.records import (
    ASSIGNMENT_SCHEMA,
    COMMIT_SCHEMA,
    PROCESSED_SCHEMA,
    AssignmentKind,
)
from harness.rundir.streams import StreamWriter
from harness.workload.consumer_group.librdkafka import ASSIGNED, READY, ConsumerTask
from harness.workload.processes import BuiltProgram

log = logging.getLogger("kafka_chaos.consumers")
CONVERT_BATCH = 50_000  # journal rows a converted Arrow batch holds at most
# The program's lines that give the partitions it holds after a change, and what the
# partitions it no longer holds became.
HOLDING_LINES = {
    "partitions_assigned": AssignmentKind.REVOKED,
    "partitions_revoked": AssignmentKind.REVOKED,
    "partitions_lost": AssignmentKind.LOST,
}


def member_argv(program: BuiltProgram, task: ConsumerTask) -> list[str]:
    """The command line of one start of one member."""
    files = layout.java_consumer_journal(task.member, task.start)
    return [
        *program.argv,
        "--bootstrap-server", task.bootstrap,
        "--topic", task.topic,
        "--group", task.group_id,
        "--client-id", f"kchaos-consumer-{task.member}",
        "--commit", str(task.commit),
        "--processing-ms", str(round(task.processing_s * 1000)),
        "--session-timeout-ms", str(task.session_timeout_ms),
        "--processed", str(task.run_dir / files.processed),
        "--commits", str(task.run_dir / files.commits),
    ]  # fmt: skip


class JavaMemberProcess:
    """One start of a Java member, shaped like the multiprocessing.Process of a librdkafka one."""

    def __init__(
        self, program: BuiltProgram, task: ConsumerTask, counters: list[int], outcomes: Any
    ):
        self.task, self.counters, self.outcomes = task, counters, outcomes
        self.argv = member_argv(program, task)
        self._popen: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._error: str | None = None
        self.config: dict[str, str] | None = None  # its effective_config line, once printed

    @property
    def pid(self) -> int:
        assert self._popen is not None, "not started"
        return self._popen.pid

    @property
    def exitcode(self) -> int | None:
        """None while it runs; its exit status after (negative: the signal that ended it)."""
        return None if self._popen is None else self._popen.poll()

    def start(self) -> None:
        """Start the program (stderr to the member's log in the run directory), in a session of
        its own: a Ctrl-C reaches the harness, which ends it. Its stdin stays open: the program
        halts when it closes, that is when the harness is gone."""
        log_path = self.task.run_dir / layout.java_consumer_log(self.task.member, self.task.start)
        with log_path.open("ab") as stderr:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
            )
        self._reader = threading.Thread(
            target=self._read, args=(self._popen.stdout,), name=f"java-consumer-{self.task.member}",
            daemon=True,
        )  # fmt: skip
        self._reader.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to `timeout` s for the process to end (as Process.join: no error if not)."""
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout)

    def terminate(self) -> None:
        """SIGTERM: the member leaves the group and exits."""
        if self._popen is not None and self._popen.poll() is None:
            self._popen.terminate()

    def kill(self) -> None:
        """SIGKILL."""
        if self._popen is not None and self._popen.poll() is None:
            self._popen.kill()

    def _read(self, stdout: IO[bytes] | None) -> None:
        """Follow the program's lines until stdout closes, then report the start's end (with
        its last error) on the group's outcomes once the process has exited."""
        files = layout.consumer_journal(self.task.member, self.task.start)
        assignments = AssignmentJournal(self.task.run_dir / files.assignments, self.task.member)
        for line in _lines(stdout):
            name = line.get("name")
            if name in HOLDING_LINES:
                assignments.holding(line, HOLDING_LINES[name])
                self.counters[ASSIGNED] = len(line.get("partitions") or [])
            elif name == "effective_config" and isinstance(line.get("config"), dict):
                self.config = {str(k): str(v) for k, v in line["config"].items()}
            elif name == "startup_complete":
                self.counters[READY] = 1
            elif name == "error":
                self._error = str(line.get("message"))
                log.warning("java consumer %d: %s", self.task.member, self._error)
        if self._popen is not None:
            self._popen.wait()
            if self._popen.stdin is not None:
                with contextlib.suppress(OSError):
                    self._popen.stdin.close()
        self.counters[ASSIGNED] = 0
        self._error = self._error or assignments.close()
        with contextlib.suppress(Exception):
            self.outcomes.put((self.task.member, self.task.start, self._error))


class AssignmentJournal(StreamWriter):
    """A Java member start's assignment journal, written from the program's lines, each of
    which gives the partitions held after a change: the partitions new to it are `assigned`,
    those gone `revoked` or `lost` as the line says, stamped with the line's ts_us."""

    def __init__(self, path: Path, member: int):
        super().__init__(path, ASSIGNMENT_SCHEMA)
        self.member = member
        self.held: set[int] = set()

    def holding(self, line: dict[str, Any], gone: AssignmentKind) -> None:
        """Journal the change to the partitions `line` holds; those no longer held became
        `gone`. A line without a stamp (an older program) is stamped now."""
        now = {int(p) for p in line.get("partitions") or []}
        stamp = line.get("ts_us")
        ts_us = stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else now_us()
        new, old = sorted(now - self.held), sorted(self.held - now)
        self.held = now
        kinds = [AssignmentKind.ASSIGNED.value] * len(new) + [gone.value] * len(old)
        self.append(consumer=self.member, partition=new + old, kind=kinds, ts_us=ts_us)


def _lines(stdout: IO[bytes] | None) -> Iterator[dict[str, Any]]:
    """The JSON objects on `stdout`, one a line; other lines are logged and skipped."""
    if stdout is None:
        return
    for raw in stdout:
        text = raw.decode("utf-8", errors="replace").strip()
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if isinstance(line, dict):
            yield line
        elif text:
            log.info("java consumer printed: %s", text[:200])


def convert_journals(run_dir: Path) -> int:
    """Write the Arrow streams of every Java member start in `run_dir` that has none yet;
    return how many starts were converted."""
    converted = 0
    for processed in sorted(run_dir.glob(layout.JAVA_CONSUMER_PROCESSED_GLOB)):
        member, start = layout.java_consumer_start(processed.name)
        if not (run_dir / layout.consumer_journal(member, start).processed).exists():
            convert_journal(run_dir, member, start)
            converted += 1
    return converted


def convert_journal(run_dir: Path, member: int, start: int) -> None:
    """The Arrow streams (layout.consumer_journal) of one Java member start's journal files:
    the same rows, stamped with the member; a torn or malformed line (a kill mid-write) ends
    what is read of its file."""
    source = layout.java_consumer_journal(member, start)
    target = layout.consumer_journal(member, start)
    processed = run_dir / source.processed
    _convert(processed, run_dir / target.processed, PROCESSED_SCHEMA, member, _processed_row)
    commits = run_dir / source.commits
    _convert(commits, run_dir / target.commits, COMMIT_SCHEMA, member, _commit_row)


def _integers(values: list[Any]) -> list[int]:
    """`values` when every one is an integer; ValueError otherwise."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"not integers: {values!r}")
    return values


class ProcessedRow(TypedDict):
    """A row of the member's processed stream (PROCESSED_SCHEMA); msg_id None: not ours."""

    msg_id: int | None
    partition: int
    offset: int
    consumer: int
    ts_us: int


class CommitRow(TypedDict):
    """A row of the member's commit stream (COMMIT_SCHEMA)."""

    partition: int
    offset: int
    consumer: int
    ts_us: int
    outcome: str


JournalRow = ProcessedRow | CommitRow


def _processed_row(values: list[Any], member: int) -> ProcessedRow:
    msg_id, partition, offset, ts_us = _integers(values)
    return {
        "msg_id": None if msg_id < 0 else msg_id,
        "partition": partition,
        "offset": offset,
        "consumer": member,
        "ts_us": ts_us,
    }


def _commit_row(values: list[Any], member: int) -> CommitRow:
    partition, offset, outcome, ts_us = values
    _integers([partition, offset, ts_us])
    if not isinstance(outcome, str):
        raise ValueError("outcome is not a string")
    return {
        "partition": partition,
        "offset": offset,
        "consumer": member,
        "ts_us": ts_us,
        "outcome": outcome,
    }


def _convert(
    source: Path,
    target: Path,
    schema: pa.Schema,
    member: int,
    row: Callable[[list[Any], int], JournalRow],
) -> None:
    """Rows of `source` (missing: none) through `row` into a new Arrow stream at `target`."""
    writer = StreamWriter(target, schema)
    rows: list[JournalRow] = []
    try:
        for values in _journal_lines(source):
            try:
                rows.append(row(values, member))
            except (TypeError, ValueError):
                break  # a line of the right form is all a whole line can be
            if len(rows) >= CONVERT_BATCH:
                writer.write(pa.RecordBatch.from_pylist(rows, schema=schema))
                rows = []
        if rows:
            writer.write(pa.RecordBatch.from_pylist(rows, schema=schema))
    finally:
        writer.close()
    if writer.error:
        raise OSError(writer.error)


def _journal_lines(path: Path) -> Iterator[list[Any]]:
    """The JSON arrays of a journal file, up to the first line that is not a whole one."""
    if not path.exists():
        return
    with path.open("rb") as lines:
        for raw in lines:
            if not raw.endswith(b"\n"):
                return  # torn: the process died while writing it
            try:
                values = json.loads(raw)
            except ValueError:
                return
            if not isinstance(values, list) or len(values) != 4:
                return
            yield values
