"""kafka-chaos's client program on confluent-kafka (librdkafka): the harness's producer and
consumer-group member roles (the client-program contract, the Java programs in
harness/platform/java_programs being its reference), one JSON object a line on stdout.

    client.py produce <the Java recorder's arguments>
    client.py consume <the Java member's arguments>

Standalone: it runs in a virtualenv that holds confluent-kafka (any release with the
transactional API, 1.4 on, for transactions; tried on 2.3.0, 2.6.1 and 2.16.1) and nothing of
the harness; librdkafka is the one its wheel bundles.

producer.config's Java names go to librdkafka as they are: librdkafka takes most of them
(acks, linger.ms, retries, delivery.timeout.ms, ... are its aliases). A key librdkafka does not
know is reported on stderr and left out; `max.block.ms`, which it has not, is the program's
timeout for every transactional call (60000 ms unless given, as the Java client's). The
effective config reports what was given and librdkafka's documented defaults for the rest
(the Python binding cannot read a client's configuration back).

Error names are librdkafka's (KafkaError.name(): NOT_ENOUGH_REPLICAS, _MSG_TIMED_OUT, ...);
error_code is KafkaError.code() for a broker's error (code >= 0), absent for librdkafka's own
(negative codes). Sends still unreported when --close-s has passed are purged: their reports
are _PURGE_QUEUE / _PURGE_INFLIGHT.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

HEAD_BYTES = 29  # "%015d:%012d:", as harness/workload/values.py
PROGRESS_EVERY_S = 0.2
FLUSH_EVERY_S = 0.1
END_ATTEMPTS = 6  # commit or abort calls for one transaction
INIT_ATTEMPTS = 3  # init_transactions calls after timeouts
REPLACE_ATTEMPTS = 5  # fatal errors survived by a fresh producer
REFUSED_BACKOFF_S = 0.02  # after a refused send
CLOSE_FATAL_S = 5.0  # settling a producer's reports after a fatal error
DEFAULT_MAX_BLOCK_MS = 60000  # the Java client's max.block.ms default
POLL_S = 0.2

# Java names librdkafka takes under another name of its own (it has most as aliases too).
RENAMED = {"delivery.timeout.ms": "message.timeout.ms"}
# Java settings librdkafka has no equivalent for, and why.
NO_EQUIVALENT = {
    "key.serializer": "the program sends bytes",
    "value.serializer": "the program sends bytes",
    "partitioner.class": "librdkafka's default partitioner is used",
    "buffer.memory": "librdkafka bounds its queue by queue.buffering.max.kbytes/messages",
    "interceptor.classes": "a Java setting",
}
# librdkafka's documented producer defaults (2.x), Java-named.
LIBRDKAFKA_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": "false",
    "linger.ms": "5",
    "request.timeout.ms": "30000",
    "delivery.timeout.ms": "300000",
    "retries": "2147483647",
    "retry.backoff.ms": "100",
    "max.in.flight.requests.per.connection": "1000000",
    "batch.size": "1000000",
    "partitioner": "consistent_random",
}
# Java-named keys and the librdkafka aliases or names of the same setting.
SAME_SETTING = {
    "acks": ("acks", "request.required.acks"),
    "linger.ms": ("linger.ms", "queue.buffering.max.ms"),
    "delivery.timeout.ms": ("delivery.timeout.ms", "message.timeout.ms"),
    "retries": ("retries", "message.send.max.retries"),
    "max.in.flight.requests.per.connection": (
        "max.in.flight.requests.per.connection",
        "max.in.flight",
    ),
}
# librdkafka error codes that mean the call was refused in the client's current state
# (Java's IllegalStateException), not a failure of the transaction itself.
STATE_ERRORS = {
    getattr(KafkaError, name)
    for name in ("_STATE", "_CONFLICT", "_PREV_IN_PROGRESS")
    if hasattr(KafkaError, name)
}
UNKNOWN_PROPERTY = re.compile(r'No such configuration property: \\?"?([^"\\\s]+)')


def note(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def now_us() -> int:
    return time.time_ns() // 1000


def parse_args(argv: list[str]) -> dict[str, str]:
    return {argv[i]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}


def arg(args: dict[str, str], name: str, fallback: str | None = None) -> str:
    value = args.get(name, fallback)
    if value is None:
        raise SystemExit(f"missing argument {name}")
    return value


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: key=value, key:value or key value; # and ! comments; a
    trailing backslash continues the line."""
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}

    def unescape(text: str) -> str:
        out, i = [], 0
        while i < len(text):
            if text[i] == "\\" and i + 1 < len(text):
                out.append(escapes.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                out.append(text[i])
                i += 1
        return "".join(out)

    with open(path, encoding="latin-1") as text:
        lines = text.read().splitlines()
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
    props: dict[str, str] = {}
    for entry in logical:
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)$", entry)
        if match:
            props[unescape(match.group(1))] = unescape(match.group(2))
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


def kafka_error(exc: BaseException) -> KafkaError | None:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return error if isinstance(error, KafkaError) else None


def flag(error: KafkaError | None, name: str) -> bool:
    """KafkaError.fatal() / retriable() / txn_requires_abort(), False where it has none."""
    method = getattr(error, name, None)
    return bool(method()) if callable(method) else False


def describe(exc: BaseException) -> str:
    error = kafka_error(exc)
    if error is not None:
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


def client_version() -> str:
    """confluent-kafka's and librdkafka's versions (version() is a string in newer releases,
    a (text, number) pair in older ones)."""
    binding: object = confluent_kafka.version()
    library: object = confluent_kafka.libversion()
    binding = binding[0] if isinstance(binding, tuple) else binding
    library = library[0] if isinstance(library, tuple) else library
    return f"confluent-kafka {binding}, librdkafka {library}"


class Output:
    """stdout, one JSON object a line, flushed every FLUSH_EVERY_S by a thread (or at once)."""

    def __init__(self, flush_each: bool = False):
        self.lock = threading.Lock()
        self.flush_each = flush_each
        self.closed = False
        if not flush_each:
            threading.Thread(target=self._flusher, name="flusher", daemon=True).start()

    def line(self, obj: dict, flush: bool = False) -> None:
        text = json.dumps(obj, separators=(",", ":")) + "\n"
        with self.lock, contextlib.suppress(OSError, ValueError):
            if self.closed:
                return
            sys.stdout.write(text)
            if flush or self.flush_each:
                sys.stdout.flush()

    def flush(self) -> None:
        with self.lock, contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()

    def _flusher(self) -> None:
        while True:
            time.sleep(FLUSH_EVERY_S)
            self.flush()


def fail(message: str, code: int = 2) -> None:
    note(message)
    sys.stdout.write(json.dumps({"name": "error", "message": message}) + "\n")
    sys.stdout.flush()
    raise SystemExit(code)


# ---------------------------------------------------------------------------------------------
# produce


def librdkafka_settings(props: dict[str, str]) -> tuple[dict[str, str], int]:
    """librdkafka's settings from the Java ones, and the program's max.block.ms."""
    config: dict[str, str] = {}
    max_block_ms = DEFAULT_MAX_BLOCK_MS
    for key, value in props.items():
        value = value.strip()
        if key == "max.block.ms":
            max_block_ms = int(value)
            note("max.block.ms: librdkafka has none; the program waits this long for each "
                 "transactional call")  # fmt: skip
        elif key in NO_EQUIVALENT:
            note(f"{key}={value}: not applied ({NO_EQUIVALENT[key]})")
        elif key == "acks" and value not in ("all", "-1", "0", "1"):
            fail(f"producer.config cannot be honoured: acks={value}")
        else:
            config[RENAMED.get(key, key)] = value
    return config, max_block_ms


def new_producer(base: dict, given: dict[str, str], dropped: set[str]) -> Producer:
    """A Producer with `given` over `base`, leaving out (once reported) each key librdkafka
    says it does not know; exit 2 for any other configuration error (an acks that
    idempotence forbids included: it cannot be honoured)."""
    while True:
        config = {k: v for k, v in given.items() if k not in dropped}
        try:
            return Producer({**config, **base})
        except (KafkaException, ValueError, TypeError) as exc:
            text = describe(exc)
            unknown = UNKNOWN_PROPERTY.search(text)
            if unknown and unknown.group(1) in config:
                dropped.add(unknown.group(1))
                note(f"{unknown.group(1)}: librdkafka has no such setting; not applied")
                continue
            fail(f"producer.config cannot be honoured: {text}")


def effective_producer_config(given: dict[str, str], dropped: set[str], max_block_ms: int):
    """The settings the producer runs with, Java-named: what was given, librdkafka's
    defaults for the rest, and the rules idempotence imposes; and whether it is idempotent."""
    applied = {k: v for k, v in given.items() if k not in dropped}
    java_of = {name: java for java, names in SAME_SETTING.items() for name in names}
    java_of["message.timeout.ms"] = "delivery.timeout.ms"
    config = dict(LIBRDKAFKA_DEFAULTS)
    for key, value in applied.items():
        config[java_of.get(key, key)] = value
    idempotent = config["enable.idempotence"].lower() == "true" or bool(
        applied.get("transactional.id")
    )
    config["enable.idempotence"] = str(idempotent).lower()
    if config["acks"] == "-1":
        config["acks"] = "all"
    if idempotent:  # librdkafka's rules for an idempotent producer
        config["acks"] = "all"
        config["max.in.flight.requests.per.connection"] = str(
            min(int(config["max.in.flight.requests.per.connection"]), 5)
        )
    config["max.block.ms"] = str(max_block_ms)
    config["client.version"] = client_version()
    config["config.source"] = "given values; librdkafka's documented defaults for the rest"
    return config, idempotent


class Producing:
    """The produce role: plain sends or transactions, every send's outcome reported once."""

    def __init__(self, args: dict[str, str]):
        self.args = args
        self.out = Output()
        self.topic = arg(args, "--topic")
        self.keys = int(arg(args, "--keys", "16"))
        self.id_base = int(arg(args, "--id-base", "0"))
        self.key_prefix = arg(args, "--key-prefix", "")
        self.message_bytes = int(arg(args, "--message-bytes", "100"))
        self.max = int(arg(args, "--max-messages", "-1"))
        self.duration = float(arg(args, "--duration-s", "-1"))
        self.rate = float(arg(args, "--throughput", "-1"))
        self.close_s = float(arg(args, "--close-s", "30"))
        props = read_properties(arg(args, "--producer.config"))
        self.given, self.max_block_ms = librdkafka_settings(props)
        self.base = {"bootstrap.servers": arg(args, "--bootstrap-server")}
        self.dropped: set[str] = set()
        self.stopped = threading.Event()
        self.outstanding = 0  # sends handed over without a report yet
        self.last_progress = time.monotonic()
        self.start = time.monotonic()
        self.producer: Producer | None = None

    def make_producer(self) -> Producer:
        return new_producer(self.base, self.given, self.dropped)

    # -- sends -------------------------------------------------------------------------------

    def send_one(self, producer: Producer, i: int, partition: int | None):
        """Hand message i to the client (its report comes through poll). Returns the
        exception of a send refused before it entered the client (reported at once)."""
        key = f"{self.key_prefix}k{i % self.keys}".encode()
        value = make_value(self.id_base + i, i // self.keys, self.message_bytes)
        head = value[:HEAD_BYTES].decode("ascii")
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        while True:
            sent_ns = time.monotonic_ns()

            def report(err, msg, head=head, sent_ns=sent_ns):
                self.reported(err, msg, head, sent_ns)

            try:
                producer.produce(self.topic, value, key=key, on_delivery=report, **extra)
            except BufferError:  # the local queue is full: let the reports drain it
                producer.poll(0.05)
                continue
            except KafkaException as exc:
                self.report_error(head, sent_ns, kafka_error(exc), str(exc))
                return exc
            self.outstanding += 1
            producer.poll(0)
            return None

    def reported(self, err, msg, head: str, sent_ns: int) -> None:
        self.outstanding -= 1
        if err is not None:
            self.report_error(head, sent_ns, err, None)
            return
        offset = msg.offset()
        self.out.line({
            "name": "producer_send_success", "topic": self.topic, "value": head,
            "partition": msg.partition(),
            "offset": offset if offset is not None and offset >= 0 else -1,  # acks=0: none
            "latency_us": (time.monotonic_ns() - sent_ns) // 1000,
        })  # fmt: skip

    def report_error(self, head: str, sent_ns: int, err: KafkaError | None, text: str | None):
        line = {
            "name": "producer_send_error", "topic": self.topic, "value": head,
            "latency_us": (time.monotonic_ns() - sent_ns) // 1000,
            "exception": err.name() if err is not None else "KafkaException",
            "message": err.str() if err is not None else str(text),
        }  # fmt: skip
        if err is not None and err.code() >= 0:
            line["error_code"] = err.code()
        self.out.line(line)

    def progress(self, sent: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last_progress >= PROGRESS_EVERY_S:
            self.last_progress = now
            self.out.line({"name": "progress", "sent": sent})

    def ended(self) -> bool:
        return self.stopped.is_set() or (
            self.duration > 0 and time.monotonic() - self.start >= self.duration
        )

    def pace(self, producer: Producer, i: int) -> bool:
        """Serve reports until message i is due (at most 50 ms); True when it is due."""
        if self.rate <= 0:
            return True
        ahead = self.start + i / self.rate - time.monotonic()
        if ahead <= 0:
            return True
        producer.poll(min(ahead, 0.05))
        return False

    def settle(self, producer: Producer, seconds: float) -> None:
        """Serve reports until none is outstanding or `seconds` passed; then purge what is
        left (reported as _PURGE_QUEUE / _PURGE_INFLIGHT) and serve those reports."""
        deadline = time.monotonic() + seconds
        while self.outstanding > 0 and time.monotonic() < deadline:
            producer.poll(0.1)
        if self.outstanding > 0 and hasattr(producer, "purge"):
            with contextlib.suppress(Exception):
                producer.purge(in_queue=True, in_flight=True, blocking=False)
            deadline = time.monotonic() + 5.0
            while self.outstanding > 0 and time.monotonic() < deadline:
                producer.poll(0.1)
        if self.outstanding > 0:
            note(f"{self.outstanding} send(s) without an outcome after --close-s")

    def close(self, producer: Producer) -> None:
        closing = getattr(producer, "close", None)
        if callable(closing):
            with contextlib.suppress(Exception):
                closing()

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: self.stopped.set())
        transactional = "--transaction-size" in self.args
        if transactional:
            if not self.given.get("transactional.id"):
                fail("--transaction-size needs transactional.id in producer.config")
            if not hasattr(Producer, "init_transactions"):
                fail("this confluent-kafka has no transactional API (1.4+)")
        self.producer = self.make_producer()
        config, idempotent = effective_producer_config(self.given, self.dropped, self.max_block_ms)
        self.out.line({"name": "startup_complete"})
        self.out.line({"name": "effective_config", "config": config, "idempotent": idempotent})
        self.out.flush()
        self.start = time.monotonic()
        if transactional:
            sent = Transactions(self).run()
        else:
            sent = self.send_all()
            self.settle(self.producer, self.close_s)
            self.close(self.producer)
        self.progress(sent, force=True)
        self.out.line({"name": "shutdown_complete"})
        with self.out.lock:
            self.out.closed = True
        self.out.flush()

    def send_all(self) -> int:
        producer = self.producer
        assert producer is not None
        i = 0
        while not self.ended() and (self.max < 0 or i < self.max):
            if not self.pace(producer, i):
                continue
            if self.send_one(producer, i, None) is not None:
                producer.poll(REFUSED_BACKOFF_S)  # a refusal that lasts must not spin
            i += 1
            self.progress(i)
        return i


class Transactions:
    """The sends in transactions as TransactionalSends.java runs them, with librdkafka's
    error flags standing for Java's exception classes: fatal() for the fatal ones,
    txn_requires_abort() for an abortable one, retriable() for a timeout."""

    def __init__(self, recorder: Producing):
        self.r = recorder
        args = recorder.args
        self.size = int(arg(args, "--transaction-size"))
        self.partitions = int(arg(args, "--partitions"))
        self.on_timeout = arg(args, "--on-timeout", "retry")
        if self.on_timeout not in ("retry", "abort", "reinit"):
            raise SystemExit("--on-timeout must be retry, abort or reinit")
        self.group = None  # the group's metadata for send_offsets_to_transaction
        self.group_consumer = None
        group_id = args.get("--offsets-group")
        if group_id:
            self.group_consumer = Consumer(
                {"bootstrap.servers": recorder.base["bootstrap.servers"], "group.id": group_id}
            )
            self.group = self.group_consumer.consumer_group_metadata()
        self.timeout_s = recorder.max_block_ms / 1000
        self.fatal = False
        self.reinit = False
        self.replaced = 0

    def init(self, producer: Producer) -> None:
        for attempt in range(1, INIT_ATTEMPTS + 1):
            try:
                producer.init_transactions(self.timeout_s)
                return
            except KafkaException as exc:
                error = kafka_error(exc)
                if not flag(error, "retriable") or attempt >= INIT_ATTEMPTS:
                    raise
                if self.r.stopped.is_set():
                    raise
                note(f"init_transactions failed, retrying: {describe(exc)}")

    def run(self) -> int:
        r = self.r
        i = txn = 0
        try:
            assert r.producer is not None
            self.init(r.producer)
            while not r.ended() and (r.max < 0 or i < r.max):
                line = sys.stdin.readline()
                if not line:
                    note("the harness's plan ended: no more transactions")
                    break
                count = self.size if r.max < 0 else min(self.size, r.max - i)
                i = self.transaction(txn, i, count, line.strip())
                txn += 1
                if self.fatal and (r.stopped.is_set() or not self.replace()):
                    break
        finally:
            if r.producer is not None:
                r.settle(r.producer, r.close_s)
                r.close(r.producer)
            if self.group_consumer is not None:
                with contextlib.suppress(Exception):
                    self.group_consumer.close()
        return i

    def transaction(self, txn: int, first: int, count: int, intent: str) -> int:
        r = self.r
        producer = r.producer
        assert producer is not None
        begin_us = now_us()
        self.fatal = False
        try:
            producer.begin_transaction()
        except KafkaException as exc:  # nothing sent in it: no line; the producer is replaced
            note(f"begin_transaction failed: {describe(exc)}")
            self.fatal = True
            return first
        i, refused = first, None
        while i < first + count and not r.stopped.is_set():
            if not r.pace(producer, i):
                continue
            refused = r.send_one(producer, i, i % self.partitions)
            i += 1
            r.progress(i)
            if refused is not None:  # the rest is not sent, and the transaction is aborted
                break
        errors = [f"send: {describe(refused)}"] if refused is not None else []
        outcome = self.end(producer, txn, intent, refused is not None, errors)
        producer.poll(0)
        r.out.line({
            "name": "transaction_end", "transaction": txn, "first_msg_id": r.id_base + first,
            "messages": i - first, "intent": intent, "outcome": outcome,
            "error": "; ".join(errors) if errors else None,
            "begin_ts_us": begin_us, "end_ts_us": now_us(),
        }, flush=True)  # fmt: skip
        if refused is not None and not self.fatal:
            producer.poll(REFUSED_BACKOFF_S)
        return i

    def end(self, producer: Producer, txn: int, intent: str, must_abort: bool, errors: list):
        """Commit or abort as `intent` says (abort whatever it says when `must_abort`):
        committed, aborted or unknown; sets `fatal` when the producer must be replaced."""
        commit = not must_abort and intent == "commit"
        planned = not must_abort and intent == "abort"
        offered = self.group is None
        committing = doubtful = answered_abort = False
        self.reinit = False
        for _ in range(END_ATTEMPTS):
            doing = "commit" if commit else "abort"
            try:
                if commit:
                    if not offered:
                        offsets = [TopicPartition(self.r.topic, 0, txn + 1)]
                        producer.send_offsets_to_transaction(offsets, self.group, self.timeout_s)
                        offered = True
                    committing = True
                    producer.commit_transaction(self.timeout_s)
                    return "committed"
                if planned:
                    # Deliver first, as the Java program does: an abort that never reached the
                    # log gives read_committed nothing to hide.
                    producer.flush(self.timeout_s)
                producer.abort_transaction(self.timeout_s)
                return "unknown" if doubtful else "aborted"
            except KafkaException as exc:
                error = kafka_error(exc)
                errors.append(f"{doing}: {describe(exc)}")
                if error is None or flag(error, "fatal"):
                    break
                if flag(error, "txn_requires_abort"):
                    commit = planned = False
                    continue
                if flag(error, "retriable"):  # a timeout: as --on-timeout says
                    doubtful = doubtful or (commit and committing)
                    if self.r.stopped.is_set():
                        break
                    answer = (
                        "reinit" if self.on_timeout == "abort" and not commit else self.on_timeout
                    )
                    if answer != "retry":
                        errors.append(f"on timeout: {answer}")
                    if answer == "reinit":
                        self.reinit = True
                        break
                    if answer == "abort":
                        commit = planned = False
                        answered_abort = True
                    continue
                if not commit:  # the abort failed for good (or the client refused it)
                    if answered_abort:
                        errors.append("on timeout: reinit")
                        self.reinit = True
                    break
                if error.code() in STATE_ERRORS:  # a state the client refuses the commit in
                    break
                commit = False  # the documented answer to any other error: abort
        self.fatal = True
        return "unknown"

    def replace(self) -> bool:
        """Settle and close the producer, then make a fresh one with the same
        transactional.id (which fences the old); False when REPLACE_ATTEMPTS are used up or
        it cannot start."""
        r = self.r
        old, r.producer = r.producer, None
        if old is not None:
            r.settle(old, CLOSE_FATAL_S)
            r.close(old)
        if not self.reinit:
            self.replaced += 1
        self.reinit = False
        if self.replaced > REPLACE_ATTEMPTS:
            note("too many fatal errors, stopping the workload")
            return False
        try:
            r.producer = r.make_producer()
            self.init(r.producer)
        except KafkaException as exc:
            note(f"the producer could not be replaced: {describe(exc)}")
            r.producer = None
            return False
        return True


# ---------------------------------------------------------------------------------------------
# consume


class Member:
    """The consume role: one start of one member of the group (KafkaChaosConsumer.java)."""

    def __init__(self, args: dict[str, str]):
        self.out = Output(flush_each=True)
        self.topic = arg(args, "--topic")
        self.commit = arg(args, "--commit")
        if self.commit not in ("auto", "after-process", "before-process"):
            raise SystemExit(f"unknown commit mode {self.commit}")
        self.processing_s = int(arg(args, "--processing-ms", "0")) / 1000
        self.processed = os.open(arg(args, "--processed"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.commits = os.open(arg(args, "--commits"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.settings = {
            "bootstrap.servers": arg(args, "--bootstrap-server"),
            "group.id": arg(args, "--group"),
            "client.id": arg(args, "--client-id", "kchaos-consumer"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": str(self.commit == "auto").lower(),
            "session.timeout.ms": arg(args, "--session-timeout-ms", "6000"),
            "heartbeat.interval.ms": arg(args, "--heartbeat-ms", "1000"),
        }
        self.stopped = threading.Event()
        self.held: set[int] = set()
        self.lock = threading.Lock()

    def holding(self, name: str) -> None:
        self.out.line({"name": name, "partitions": sorted(self.held), "ts_us": now_us()})

    def on_assign(self, consumer, partitions) -> None:
        self.held |= {tp.partition for tp in partitions}
        self.holding("partitions_assigned")

    def on_revoke(self, consumer, partitions) -> None:
        self.held -= {tp.partition for tp in partitions}
        self.holding("partitions_revoked")

    def on_lost(self, consumer, partitions) -> None:
        self.held -= {tp.partition for tp in partitions}
        self.holding("partitions_lost")

    def on_commit(self, err, partitions) -> None:
        """The client's automatic commits (and the one on close), as it reports them."""
        rows: dict[str, dict[int, int]] = {}
        for tp in partitions or []:
            if tp.topic != self.topic or tp.offset < 0:
                continue
            failure = tp.error or err
            rows.setdefault(failure.name() if failure is not None else "ok", {})[tp.partition] = (
                tp.offset
            )
        for outcome, offsets in rows.items():
            self.write_commits(offsets, outcome)

    def write_processed(self, rows) -> None:
        now = now_us()
        text = "".join(f"[{m},{p},{o},{now}]\n" for m, p, o in rows)
        os.write(self.processed, text.encode("ascii"))

    def write_commits(self, offsets: dict[int, int], outcome: str) -> None:
        now = now_us()
        quoted = json.dumps(outcome)
        text = "".join(f"[{p},{o},{quoted},{now}]\n" for p, o in sorted(offsets.items()))
        if text:
            with self.lock:
                os.write(self.commits, text.encode("utf-8"))

    def commit_sync(self, consumer: Consumer, rows) -> set[int]:
        """Commit each partition's next offset after `rows` synchronously; the partitions
        whose commit succeeded. The outcome is journalled either way."""
        offsets: dict[int, int] = {}
        for _, partition, offset in rows:
            offsets[partition] = max(offsets.get(partition, 0), offset + 1)
        request = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        done: set[int] = set()
        try:
            result = consumer.commit(offsets=request, asynchronous=False) or []
        except KafkaException as exc:
            error = kafka_error(exc)
            self.write_commits(offsets, error.name() if error is not None else "KafkaException")
            return done
        failed: dict[str, dict[int, int]] = {}
        for tp in result:
            if tp.error is not None:
                failed.setdefault(tp.error.name(), {})[tp.partition] = offsets[tp.partition]
        ok = {p: o for p, o in offsets.items() if all(p not in f for f in failed.values())}
        self.write_commits(ok, "ok")
        for name, rows_failed in failed.items():
            self.write_commits(rows_failed, name)
        return set(ok)

    def process(self, rows) -> None:
        if self.processing_s <= 0:
            self.write_processed(rows)
            return
        for row in rows:
            time.sleep(self.processing_s)
            self.write_processed([row])

    def handle(self, consumer: Consumer, rows) -> None:
        if self.commit == "before-process":
            done = self.commit_sync(consumer, rows)
            self.process([row for row in rows if row[1] in done])
        else:
            self.process(rows)
            if self.commit == "after-process":
                self.commit_sync(consumer, rows)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: self.stopped.set())
        threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()
        settings: dict[str, Any] = dict(self.settings)
        if self.commit == "auto":
            settings["on_commit"] = self.on_commit
        consumer = Consumer(settings)
        config = {k: v for k, v in self.settings.items()}
        config["client.version"] = client_version()
        self.out.line({"name": "effective_config", "config": config})
        try:
            consumer.subscribe(
                [self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke,
                on_lost=self.on_lost,
            )  # fmt: skip
        except TypeError:  # before on_lost (1.6): a lost assignment comes as a revocation
            consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        self.out.line({"name": "startup_complete"})
        try:
            while not self.stopped.is_set():
                rows = []
                for msg in consumer.consume(num_messages=500, timeout=POLL_S):
                    error = msg.error()
                    if error is not None:
                        if flag(error, "fatal"):
                            raise KafkaException(error)
                        note(f"consumer error: {error.name()}: {error.str()}")
                        continue
                    rows.append((msg_id_of(msg.value()), msg.partition(), msg.offset()))
                if rows:
                    self.handle(consumer, rows)
        finally:
            try:
                consumer.close()  # leaves the group; in auto mode, commits what was consumed
            except Exception as exc:
                if not self.stopped.is_set():
                    raise
                # Asked to stop, the journals are whole: what closing raised is only logged.
                note(f"closing the consumer after SIGTERM: {describe(exc)}")
            os.close(self.processed)
            os.close(self.commits)


def watch_stdin() -> None:
    """The end of stdin means the harness is gone: halt, as a killed member would."""
    # os.read, not sys.stdin: a daemon thread blocked in a buffered read aborts the
    # interpreter's exit (it cannot take the buffer's lock while finalizing).
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    os._exit(3)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("produce", "consume"):
        note("usage: client.py produce|consume <arguments>")
        return 2
    args = parse_args(argv[1:])
    if argv[0] == "produce":
        producing = Producing(args)
        try:
            producing.run()
        except SystemExit:
            raise
        except BaseException as exc:
            traceback.print_exc()
            note(f"the producer failed: {describe(exc)}")
            producing.out.line({"name": "error", "message": describe(exc)}, flush=True)
            return 1
        return 0
    member = Member(args)
    try:
        member.run()
    except BaseException as exc:
        traceback.print_exc()
        member.out.line({"name": "error", "message": describe(exc)})
        os._exit(1)
    member.out.line({"name": "shutdown_complete"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
