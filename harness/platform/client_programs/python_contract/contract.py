"""The client-program contract's plumbing the Python programs share (docs/clients.md, "The
client-program contract"): the arguments, the producer.config file, the values, the stdout
lines, the pacing and progress of the sends, the plan of the transactions, the member's
journals and the watch on stdin. What talks to a library stays in each program's client.py.

Standard library only: the build copies this file beside each client.py, into a virtualenv
that holds that client's library and nothing of the harness (`import contract`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

HEAD_BYTES = 29  # "%015d:%012d:", as harness/workload/values.py
PROGRESS_EVERY_S = 0.2
FLUSH_EVERY_S = 0.1
END_ATTEMPTS = 6  # commit or abort calls for one transaction
INIT_ATTEMPTS = 3  # producer starts (InitProducerId, init_transactions) after timeouts
REPLACE_ATTEMPTS = 5  # fatal errors survived by a fresh producer
REFUSED_BACKOFF_S = 0.02  # after a refused send, or a transaction a refusal aborted
CLOSE_FATAL_S = 5.0  # closing (settling) a producer after a fatal error
DEFAULT_MAX_BLOCK_MS = 60000  # the Java client's max.block.ms default
COMMIT_MODES = ("auto", "after-process", "before-process")
ON_TIMEOUT = ("retry", "abort", "reinit")


def note(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def now_us() -> int:
    return time.time_ns() // 1000


def parse_args(argv: list[str]) -> dict[str, str]:
    """The contract's arguments, which all come in pairs: name, value."""
    return {argv[i]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}


def arg(args: dict[str, str], name: str, fallback: str | None = None) -> str:
    value = args.get(name, fallback)
    if value is None:
        raise SystemExit(f"missing argument {name}")
    return value


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _logical_lines(lines: list[str]) -> list[str]:
    """The entries of a properties file: comments and blank lines dropped, a line ending in an
    odd number of backslashes joined with the next (its leading white space dropped)."""
    logical, held = [], ""
    for line in lines:
        stripped = line.lstrip()
        if not held and (not stripped or stripped[0] in "#!"):
            continue
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1:
            held += stripped[:-1]
            continue
        logical.append(held + stripped)
        held = ""
    if held:
        logical.append(held)
    return logical


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: key=value, key:value or key value; # and ! comments; a
    trailing backslash continues the line; backslash escapes in keys and values."""
    with open(path, encoding="latin-1") as text:
        lines = text.read().splitlines()
    props: dict[str, str] = {}
    for entry in _logical_lines(lines):
        key, i = "", 0
        while i < len(entry) and entry[i] not in "=: \t\f":
            i += 2 if entry[i] == "\\" and i + 1 < len(entry) else 1
        key, rest = entry[:i], entry[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def make_value(msg_id: int, key_seq: int, size: int) -> bytes:
    head = b"%015d:%012d:" % (msg_id, key_seq)
    return head + b"." * (max(size, HEAD_BYTES) - HEAD_BYTES)


def msg_id_of(value: bytes | None) -> int:
    """The id at the head of a value the harness wrote, -1 for any other value."""
    if not value:
        return -1
    head, sep, _ = value.partition(b":")
    if not sep or not head or len(head) > 18 or not head.isdigit():
        return -1
    return int(head)


def fail(message: str, code: int = 2, told: str | None = None) -> NoReturn:
    """Exit `code` (2: the settings cannot be honoured) with an `error` line saying `message`;
    stderr says `told` (the message when not given)."""
    note(told or message)
    sys.stdout.write(json.dumps({"name": "error", "message": message}) + "\n")
    sys.stdout.flush()
    raise SystemExit(code)


class Output:
    """stdout, one JSON object a line, flushed every FLUSH_EVERY_S by a thread (or at once)."""

    def __init__(self, flush_each: bool = False):
        self.lock = threading.Lock()
        self.flush_each = flush_each
        self.closed = False
        if not flush_each:
            threading.Thread(target=self._flusher, name="flusher", daemon=True).start()

    def line(self, obj: dict[str, Any], flush: bool = False) -> None:
        text = json.dumps(obj, separators=(",", ":")) + "\n"
        # stdout gone (OSError, ValueError): the harness sees the run end without
        # shutdown_complete
        with self.lock, contextlib.suppress(OSError, ValueError):
            if self.closed:
                return
            sys.stdout.write(text)
            if flush or self.flush_each:
                sys.stdout.flush()

    def flush(self) -> None:
        with self.lock, contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()

    def close(self) -> None:
        """No line after this one (a report arriving late is dropped); what is written goes
        out."""
        with self.lock:
            self.closed = True
        self.flush()

    def _flusher(self) -> None:
        while True:
            time.sleep(FLUSH_EVERY_S)
            self.flush()


class Flag(Protocol):
    """A stop flag: threading.Event or asyncio.Event."""

    def is_set(self) -> bool: ...


# ---------------------------------------------------------------------------------------------
# produce


class Sends:
    """The produce role's arguments and its stdout: each program's producer extends it with
    its library's sends (it sets `stopped`, the flag SIGTERM raises)."""

    stopped: Flag
    producer: Any  # the library's producer, None while there is none

    def __init__(self, args: dict[str, str]):
        self.args = args
        self.out = Output()
        self.topic = arg(args, "--topic")
        self.bootstrap = arg(args, "--bootstrap-server")
        self.keys = int(arg(args, "--keys", "16"))
        self.id_base = int(arg(args, "--id-base", "0"))
        self.key_prefix = arg(args, "--key-prefix", "")
        self.message_bytes = int(arg(args, "--message-bytes", "100"))
        self.max = int(arg(args, "--max-messages", "-1"))
        self.duration = float(arg(args, "--duration-s", "-1"))
        self.rate = float(arg(args, "--throughput", "-1"))
        self.close_s = float(arg(args, "--close-s", "30"))
        self.props = read_properties(arg(args, "--producer.config"))
        self.transactional = "--transaction-size" in args
        self.last_progress = time.monotonic()
        self.start = time.monotonic()

    def message(self, i: int) -> tuple[bytes, bytes, str]:
        """Message i's key, value and the value's head (what its report names)."""
        key = f"{self.key_prefix}k{i % self.keys}".encode()
        value = make_value(self.id_base + i, i // self.keys, self.message_bytes)
        return key, value, value[:HEAD_BYTES].decode("ascii")

    def ahead(self, i: int) -> float:
        """The seconds until message i is due (0 or less: due)."""
        if self.rate <= 0:
            return 0.0
        return self.start + i / self.rate - time.monotonic()

    def more(self, sent: int) -> bool:
        """Whether another message is to be sent: not stopped, not past --duration-s nor
        --max-messages."""
        return not self.ended() and (self.max < 0 or sent < self.max)

    def ended(self) -> bool:
        return self.stopped.is_set() or (
            self.duration > 0 and time.monotonic() - self.start >= self.duration
        )

    def started(self, config: dict[str, str], idempotent: bool | None) -> None:
        """The producer runs: its lines, and the clock of the sends starts."""
        self.out.line({"name": "startup_complete"})
        self.out.line({"name": "effective_config", "config": config, "idempotent": idempotent})
        self.out.flush()
        self.start = time.monotonic()

    def progress(self, sent: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last_progress >= PROGRESS_EVERY_S:
            self.last_progress = now
            self.out.line({"name": "progress", "sent": sent})

    def succeeded(self, head: str, sent_ns: int, partition: int | None, offset: int) -> None:
        self.out.line({
            "name": "producer_send_success", "topic": self.topic, "value": head,
            "partition": partition, "offset": offset,
            "latency_us": (time.monotonic_ns() - sent_ns) // 1000,
        })  # fmt: skip

    def failed(
        self, head: str, sent_ns: int, exception: str, message: str, code: int | None
    ) -> None:
        """A send's error: the library's name for it, and Kafka's code when a broker's."""
        line: dict[str, Any] = {
            "name": "producer_send_error", "topic": self.topic, "value": head,
            "latency_us": (time.monotonic_ns() - sent_ns) // 1000,
            "exception": exception, "message": message,
        }  # fmt: skip
        if code is not None:
            line["error_code"] = code
        self.out.line(line)

    def finished(self, sent: int) -> None:
        """Every send reported: the last lines, and nothing after them."""
        self.progress(sent, force=True)
        self.out.line({"name": "shutdown_complete"})
        self.out.close()


class Plan:
    """The transactions' arguments and the answers TransactionalSends.java gives, which the
    programs share; each program's transactions extend it with its library's calls."""

    def __init__(self, recorder: Sends):
        self.recorder = recorder
        args = recorder.args
        self.size = int(arg(args, "--transaction-size"))
        self.partitions = int(arg(args, "--partitions"))
        self.on_timeout = arg(args, "--on-timeout", "retry")
        if self.on_timeout not in ON_TIMEOUT:
            raise SystemExit("--on-timeout must be retry, abort or reinit")
        self.group_id = args.get("--offsets-group") or None
        self.fatal = False
        self.reinit = False
        self.replaced = 0

    def count(self, recorder: Sends, sent: int) -> int:
        """How many messages the next transaction holds."""
        return self.size if recorder.max < 0 else min(self.size, recorder.max - sent)

    def beginning(self) -> int:
        """A transaction begins (no fatal error in it yet): the time, in µs."""
        self.fatal = False
        return now_us()

    def may_replace(self) -> bool:
        """Count a replacement of the producer (a reinit is free); False when REPLACE_ATTEMPTS
        are used up."""
        if not self.reinit:
            self.replaced += 1
        self.reinit = False
        if self.replaced > REPLACE_ATTEMPTS:
            note("too many fatal errors, stopping the workload")
            return False
        return True

    def not_replaced(self, error: str) -> bool:
        """The fresh producer could not be made or started: there is none; False."""
        note(f"the producer could not be replaced: {error}")
        self.recorder.producer = None
        return False


class Ending:
    """One transaction's end as TransactionalSends.java drives it, whatever the library: the
    call to make (`commit`, else abort; `planned`: the plan's own abort, flushed first), what
    is known of it, and the answers to a timeout and to a refused abort. Each program makes
    the calls, at most END_ATTEMPTS, and tells it what came of them."""

    def __init__(self, plan: Plan, intent: str, must_abort: bool, offered: bool, errors: list[str]):
        self.plan = plan
        self.errors = errors
        self.commit = not must_abort and intent == "commit"
        self.planned = not must_abort and intent == "abort"
        self.offered = offered  # the offsets are in the transaction (or there are none)
        self.committing = False  # a commit call was made: a later abort may come too late
        self.doubtful = False  # a commit may have happened
        self.answered_abort = False  # aborting because a commit timed out
        plan.reinit = False

    def error(self, text: str) -> None:
        """A call failed: its error, named after the call (commit or abort)."""
        self.errors.append(f"{'commit' if self.commit else 'abort'}: {text}")

    def timed_out(self, stopped: bool) -> bool:
        """A call timed out: answer as --on-timeout says (retry calls again, abort aborts,
        reinit replaces the producer; an abort that timed out is answered with reinit). True
        when the end stops here (stopped, or reinit): the outcome is unknown."""
        self.doubtful = self.doubtful or (self.commit and self.committing)
        if stopped:
            return True
        plan = self.plan
        answer = "reinit" if plan.on_timeout == "abort" and not self.commit else plan.on_timeout
        if answer != "retry":
            self.errors.append(f"on timeout: {answer}")
        if answer == "reinit":
            plan.reinit = True
            return True
        if answer == "abort":
            self.commit = self.planned = False
            self.answered_abort = True
        return False

    def refused(self) -> None:
        """The abort failed for good: when it answered a timeout, the producer is replaced
        as reinit would."""
        if self.answered_abort:
            self.errors.append("on timeout: reinit")
            self.plan.reinit = True

    def aborted(self) -> str:
        """The abort call returned: aborted, or unknown when a commit may have happened."""
        return "unknown" if self.doubtful else "aborted"

    def unknown(self) -> str:
        """No call settled the outcome: unknown, and the producer is to be replaced."""
        self.plan.fatal = True
        return "unknown"


def transaction_end(
    recorder: Sends, txn: int, first: int, sent: int, intent: str, outcome: str,
    errors: list[str], begin_us: int,
) -> None:  # fmt: skip
    """The `transaction_end` line of transaction `txn`, messages `first` to `sent` - 1."""
    recorder.out.line({
        "name": "transaction_end", "transaction": txn, "first_msg_id": recorder.id_base + first,
        "messages": sent - first, "intent": intent, "outcome": outcome,
        "error": "; ".join(errors) if errors else None,
        "begin_ts_us": begin_us, "end_ts_us": now_us(),
    }, flush=True)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# consume


class Journals:
    """The consume role's arguments, its stdout and its two journals: each program's member
    extends it with its library's consumer."""

    def __init__(self, args: dict[str, str]):
        self.args = args
        self.out = Output(flush_each=True)
        self.topic = arg(args, "--topic")
        self.commit = arg(args, "--commit")
        if self.commit not in COMMIT_MODES:
            raise SystemExit(f"unknown commit mode {self.commit}")
        self.processing_s = int(arg(args, "--processing-ms", "0")) / 1000
        self.processed = os.open(arg(args, "--processed"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.commits = os.open(arg(args, "--commits"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.bootstrap = arg(args, "--bootstrap-server")
        self.group = arg(args, "--group")
        self.client_id = arg(args, "--client-id", "kchaos-consumer")
        self.session_timeout_ms = arg(args, "--session-timeout-ms", "6000")
        self.heartbeat_ms = arg(args, "--heartbeat-ms", "1000")
        self.held: set[int] = set()
        self.lock = threading.Lock()

    def holding(self, name: str) -> None:
        self.out.line({"name": name, "partitions": sorted(self.held), "ts_us": now_us()})

    def write_processed(self, rows: list[tuple[int, int, int]]) -> None:
        now = now_us()
        text = "".join(f"[{m},{p},{o},{now}]\n" for m, p, o in rows)
        os.write(self.processed, text.encode("ascii"))

    def write_commits(self, offsets: dict[int, int], outcome: str) -> None:
        now = now_us()
        quoted = json.dumps(outcome)
        text = "".join(f"[{p},{o},{quoted},{now}]\n" for p, o in sorted(offsets.items()))
        if text:
            with self.lock:  # the client's own thread may report its commits
                os.write(self.commits, text.encode("utf-8"))

    def close_journals(self) -> None:
        os.close(self.processed)
        os.close(self.commits)


def next_offsets(rows: list[tuple[int, int, int]]) -> dict[int, int]:
    """Each partition's offset to commit after `rows` ([msg_id, partition, offset])."""
    offsets: dict[int, int] = {}
    for _, partition, offset in rows:
        offsets[partition] = max(offsets.get(partition, 0), offset + 1)
    return offsets


def watch_stdin() -> None:
    """The end of stdin means the harness is gone: halt, as a killed member would."""
    # os.read, not sys.stdin: a daemon thread blocked in a buffered read aborts the
    # interpreter's exit (it cannot take the buffer's lock while finalizing).
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    os._exit(3)


def watch_stdin_thread() -> None:
    threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()


# ---------------------------------------------------------------------------------------------


class Role(Protocol):
    out: Output

    def play(self) -> None: ...


def main(
    argv: list[str],
    producing: Callable[[dict[str, str]], Role],
    member: Callable[[dict[str, str]], Role],
    describe: Callable[[BaseException], str],
    describe_member: Callable[[BaseException], str] | None = None,
) -> int:
    """Run the role argv[0] names; `describe` words a failure for the `error` line."""
    if not argv or argv[0] not in ("produce", "consume"):
        note("usage: client.py produce|consume <arguments>")
        return 2
    args = parse_args(argv[1:])
    if argv[0] == "produce":
        sends = producing(args)
        try:
            sends.play()
        except SystemExit:
            raise
        except BaseException as exc:
            traceback.print_exc()
            note(f"the producer failed: {describe(exc)}")
            sends.out.line({"name": "error", "message": describe(exc)}, flush=True)
            return 1
        return 0
    consuming = member(args)
    try:
        consuming.play()
    except BaseException as exc:
        traceback.print_exc()
        consuming.out.line({"name": "error", "message": (describe_member or describe)(exc)})
        os._exit(1)
    consuming.out.line({"name": "shutdown_complete"})
    return 0
