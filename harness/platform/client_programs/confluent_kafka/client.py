"""kafka-chaos's client program on confluent-kafka (librdkafka): the harness's producer and
consumer-group member roles (the client-program contract, the Java programs in
harness/platform/java_programs being its reference), one JSON object a line on stdout.

    client.py produce <the Java recorder's arguments>
    client.py consume <the Java member's arguments>

Standalone: it runs in a virtualenv that holds confluent-kafka (any release with the
transactional API, 1.4 on, for transactions; tried on 2.3.0, 2.6.1 and 2.16.1) and nothing of
the harness; librdkafka is the one its wheel bundles. It runs beside contract.py
(client_programs/python_contract), the contract's plumbing both Python programs share; what is
here is librdkafka's.

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

The consume role is in member.py, the library's error and version helpers both roles use in
library.py (both copied beside this file at build time).
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import threading
import time
from typing import Any

import contract
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from contract import fail, note
from library import client_version, describe, flag, kafka_error
from member import Member

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


# ---------------------------------------------------------------------------------------------
# produce


def librdkafka_settings(props: dict[str, str]) -> tuple[dict[str, str], int]:
    """librdkafka's settings from the Java ones, and the program's max.block.ms."""
    config: dict[str, str] = {}
    max_block_ms = contract.DEFAULT_MAX_BLOCK_MS
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


class Producing(contract.Sends):
    """The produce role on librdkafka: plain sends or transactions, every send's outcome
    reported once (its delivery callback, served by poll; purged at the end)."""

    stopped: threading.Event  # the flag SIGTERM raises

    def __init__(self, args: dict[str, str]):
        super().__init__(args)
        self.given, self.max_block_ms = librdkafka_settings(self.props)
        self.base = {"bootstrap.servers": self.bootstrap}
        self.dropped: set[str] = set()
        self.stopped = threading.Event()
        self.outstanding = 0  # sends handed over without a report yet
        self.producer: Producer | None = None

    def play(self) -> None:
        self.run()

    def make_producer(self) -> Producer:
        return new_producer(self.base, self.given, self.dropped)

    # -- sends -------------------------------------------------------------------------------

    def send_one(self, producer: Producer, i: int, partition: int | None):
        """Hand message i to the client (its report comes through poll). Returns the
        exception of a send refused before it entered the client (reported at once)."""
        key, value, head = self.message(i)
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
        offset = offset if offset is not None and offset >= 0 else -1  # acks=0: none
        self.succeeded(head, sent_ns, msg.partition(), offset)

    def report_error(self, head: str, sent_ns: int, err: KafkaError | None, text: str | None):
        if err is None:
            self.failed(head, sent_ns, "KafkaException", str(text), None)
            return
        code = err.code() if err.code() >= 0 else None
        self.failed(head, sent_ns, err.name(), err.str(), code)

    def pace(self, producer: Producer, i: int) -> bool:
        """Serve reports until message i is due (at most 50 ms); True when it is due."""
        ahead = self.ahead(i)
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
        if self.transactional:
            if not self.given.get("transactional.id"):
                fail("--transaction-size needs transactional.id in producer.config")
            if not hasattr(Producer, "init_transactions"):
                fail("this confluent-kafka has no transactional API (1.4+)")
        self.producer = self.make_producer()
        config, idempotent = effective_producer_config(self.given, self.dropped, self.max_block_ms)
        self.started(config, idempotent)
        if self.transactional:
            sent = Transactions(self).run()
        else:
            sent = self.send_all()
            self.settle(self.producer, self.close_s)
            self.close(self.producer)
        self.finished(sent)

    def send_all(self) -> int:
        producer = self.producer
        assert producer is not None
        i = 0
        while self.more(i):
            if not self.pace(producer, i):
                continue
            if self.send_one(producer, i, None) is not None:
                producer.poll(contract.REFUSED_BACKOFF_S)  # a refusal that lasts must not spin
            i += 1
            self.progress(i)
        return i


class Transactions(contract.Plan):
    """The sends in transactions as TransactionalSends.java runs them, with librdkafka's
    error flags standing for Java's exception classes: fatal() for the fatal ones,
    txn_requires_abort() for an abortable one, retriable() for a timeout."""

    def __init__(self, recorder: Producing):
        super().__init__(recorder)
        self.r = recorder
        self.group = None  # the group's metadata for send_offsets_to_transaction
        self.group_consumer = None
        if self.group_id:
            self.group_consumer = Consumer(
                {"bootstrap.servers": recorder.bootstrap, "group.id": self.group_id}
            )
            self.group = self.group_consumer.consumer_group_metadata()
        self.timeout_s = recorder.max_block_ms / 1000

    def init(self, producer: Producer) -> None:
        for attempt in range(1, contract.INIT_ATTEMPTS + 1):
            try:
                producer.init_transactions(self.timeout_s)
                return
            except KafkaException as exc:
                error = kafka_error(exc)
                if not flag(error, "retriable") or attempt >= contract.INIT_ATTEMPTS:
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
            while r.more(i):
                line = sys.stdin.readline()
                if not line:
                    note("the harness's plan ended: no more transactions")
                    break
                i = self.transaction(txn, i, self.count(r, i), line.strip())
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
        begin_us = self.beginning()
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
        contract.transaction_end(r, txn, first, i, intent, outcome, errors, begin_us)
        if refused is not None and not self.fatal:
            producer.poll(contract.REFUSED_BACKOFF_S)
        return i

    def end(self, producer: Producer, txn: int, intent: str, must_abort: bool, errors: list):
        """Commit or abort as `intent` says (abort whatever it says when `must_abort`), each
        call bounded by max.block.ms: committed, aborted or unknown."""
        e = contract.Ending(self, intent, must_abort, self.group is None, errors)
        for _ in range(contract.END_ATTEMPTS):
            try:
                if e.commit:
                    if not e.offered:
                        offsets = [TopicPartition(self.r.topic, 0, txn + 1)]
                        producer.send_offsets_to_transaction(offsets, self.group, self.timeout_s)
                        e.offered = True
                    e.committing = True
                    producer.commit_transaction(self.timeout_s)
                    return "committed"
                if e.planned:
                    # Deliver first, as the Java program does: an abort that never reached the
                    # log gives read_committed nothing to hide.
                    producer.flush(self.timeout_s)
                producer.abort_transaction(self.timeout_s)
                return e.aborted()
            except KafkaException as exc:
                error = kafka_error(exc)
                e.error(describe(exc))
                if error is None or flag(error, "fatal"):
                    break
                if flag(error, "txn_requires_abort"):
                    e.commit = e.planned = False
                    continue
                if flag(error, "retriable"):  # a timeout: as --on-timeout says
                    if e.timed_out(self.r.stopped.is_set()):
                        break
                    continue
                if not e.commit:  # the abort failed for good (or the client refused it)
                    e.refused()
                    break
                if error.code() in STATE_ERRORS:  # a state the client refuses the commit in
                    break
                e.commit = False  # the documented answer to any other error: abort
        return e.unknown()

    def replace(self) -> bool:
        """Settle and close the producer, then make a fresh one with the same
        transactional.id (which fences the old); False when REPLACE_ATTEMPTS are used up or
        it cannot start."""
        r = self.r
        old, r.producer = r.producer, None
        if old is not None:
            r.settle(old, contract.CLOSE_FATAL_S)
            r.close(old)
        if not self.may_replace():
            return False
        try:
            r.producer = r.make_producer()
            self.init(r.producer)
        except KafkaException as exc:
            return self.not_replaced(describe(exc))
        return True


def main(argv: list[str]) -> int:
    return contract.main(argv, Producing, Member, describe)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
