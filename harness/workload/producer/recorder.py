"""The producer that records every send and its outcome: ok, failed or indeterminate; each
value as harness/workload/values.py writes it.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from harness.rundir.records import Status
from harness.waiting import wait_for
from harness.workload.journal import AckJournal, MadeReport, ProducerSlot, error_status, key_of
from harness.workload.values import encode_value

if TYPE_CHECKING:
    from harness.experiment.fields import Scalar

log = logging.getLogger("kafka_chaos.recorder")

# Outcomes where the write may or may not be in the log: never counted as a loss.
INDETERMINATE = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._PURGE_INFLIGHT,
        KafkaError._PURGE_QUEUE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError._ALL_BROKERS_DOWN,
    }
)


def status_of(error: KafkaError | None) -> str:
    """`ok`, `failed` (a definite error) or `indeterminate` for a delivery report's error."""
    if error is None:
        return "ok"
    return "indeterminate" if error.code() in INDETERMINATE else "failed"


@dataclass(frozen=True)
class Workload:
    """How much to send: rate (None = unthrottled), duration or count, size, number of keys."""

    rate: float | None
    duration_s: float | None
    count: int | None
    message_bytes: int
    keys: int


class DeliveryTally:
    """Delivery reports by status, counted in the delivery callback as librdkafka serves them.

    Independent of the journal's decoding and writing: a run is complete only when the
    journal holds exactly these reports.
    """

    __slots__ = ("failed", "indeterminate", "ok")

    def __init__(self) -> None:
        self.ok = self.failed = self.indeterminate = 0

    def as_dict(self) -> dict[str, int]:
        """{status: reports} for every status (the recorder_tally event's `reports`)."""
        return {
            Status.OK.value: self.ok,
            Status.FAILED.value: self.failed,
            Status.INDETERMINATE.value: self.indeterminate,
        }


def delivery_callback(
    journal: AckJournal, tally: DeliveryTally
) -> Callable[[KafkaError | None, Message], None]:
    """The producer's on_delivery: tally the report and hand it to the journal by status.

    The ok path is one integer increment and one append (the journal reads the fields later,
    off the hot path). Errors are rare, so they are classified here, once: the list a report
    goes to is its status in the journal too, so tally and journal agree report for report.
    """
    delivered, failed = journal.delivered.append, journal.failed.append
    indeterminate, classify = journal.indeterminate.append, journal.classify

    def on_delivery(error: KafkaError | None, msg: Message) -> None:
        if error is None:
            tally.ok += 1
            delivered(msg)
        elif error_status(classify, error) == Status.FAILED:
            tally.failed += 1
            failed(msg)
        else:
            tally.indeterminate += 1
            indeterminate(msg)

    return on_delivery


# A send that produce() refused synchronously (unknown topic while restarted brokers' metadata
# lacks it, an invalid argument, a fatal client state): RefusedSend(value, its KafkaError),
# journalled as a delivery report of a failed send. The message never entered the client's
# queue, so it was never written: a definite failure whatever the error
# (docs/kafka-reliability.md: a send that ended in an error is not a loss).
RefusedSend = MadeReport


def refused_error(exc: KafkaException) -> KafkaError:
    """The KafkaError a synchronous produce() error carries (one made from its text if none)."""
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return error
    return KafkaError(KafkaError._FAIL, str(exc))


@dataclass
class RecorderStats:
    """Live counters for the progress display, refreshed with every journal flush."""

    sent: int = 0
    ok: int = 0
    failed: int = 0
    indeterminate: int = 0

    @classmethod
    def of(cls, journal: AckJournal) -> RecorderStats:
        """Sends so far and outcomes journalled so far, from a journal's counters."""
        counts = journal.counts
        return cls(journal.sent_upto, counts["ok"], counts["failed"], counts["indeterminate"])


class Recorder:
    """Sends the workload to `topic` and journals every delivery report.

    Message `i` goes to key `i % keys` with key sequence `i // keys` (round-robin), so the
    journal need not record sends one by one. Its msg_id is `i` plus the journal slot's id
    base, and its keys carry the slot's prefix (both nothing for a one-producer run).
    """

    FINAL_FLUSH_S = 30.0
    # After an interrupt the user waits for the cleanup: serve what arrives in a second, then
    # purge the rest (journalled as indeterminate, never as loss).
    INTERRUPTED_FLUSH_S = 1.0
    CHECK_EVERY = 256  # unthrottled: look at the clock and the stop flag every N sends
    # Serving delivery reports every 32 sends instead of after each keeps them flowing while
    # saving most of poll's fixed cost (the local queue holds 100k messages).
    POLL_EVERY = 32
    # After produce() refused a send: serve reports this long before the next send, so a
    # refusal that lasts (a topic unknown for seconds) journals tens of failures a second,
    # not millions, as an application's own backoff would.
    REFUSED_BACKOFF_S = 0.02

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        producer_config: dict[str, Scalar],
        workload: Workload,
        journal: AckJournal,
    ):
        self.topic = topic
        self.workload = workload
        self.journal = journal
        self.slot: ProducerSlot = journal.slot
        # With acks=0 the broker returns no offset; librdkafka then reports batch-relative
        # numbers (0, 1, 2, ...) for some messages. Recording them would fake divergence.
        journal.offsets_known = str(producer_config.get("acks", "all")) != "0"
        self.tally = DeliveryTally()
        self.refused = 0  # sends produce() refused synchronously (journalled as failed)
        self.producer = Producer(
            {
                **producer_config,
                "bootstrap.servers": bootstrap,
                "on_delivery": delivery_callback(journal, self.tally),
                "logger": logging.getLogger("kafka_chaos.librdkafka"),
            }
        )

    @property
    def stats(self) -> RecorderStats:
        """Sends so far and outcomes journalled so far."""
        return RecorderStats.of(self.journal)

    def run(self, stop: threading.Event) -> RecorderStats:
        """Send until the duration/count is reached or `stop` is set, then settle every send.

        `stop` means an interrupt: the settling then lasts about a second, not up to 30 s.
        """
        # The reports queued between journal flushes are ~10^4 live message objects; the
        # cyclic GC would rescan them on every collection. The hot path creates no cycles.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if self.workload.rate:
                self._send_paced(stop)
            else:
                self._send_unthrottled(stop)
            self._settle(self.INTERRUPTED_FLUSH_S if stop.is_set() else self.FINAL_FLUSH_S)
        finally:
            if gc_was_enabled:
                gc.enable()
            # Release the client now: a live handle keeps reconnecting to removed brokers.
            self.producer.close()
            self.journal.commit()  # reports close() served while flushing
        self.journal.flush()
        return self.stats

    def _limits(self) -> tuple[float, int]:
        w = self.workload
        deadline = time.monotonic() + w.duration_s if w.duration_s else float("inf")
        return deadline, w.count if w.count else 1 << 62

    def _send_unthrottled(self, stop: threading.Event) -> None:
        w, journal = self.workload, self.journal
        keys = [key_of(i, self.slot.key_prefix) for i in range(w.keys)]
        nkeys, size, topic, base = w.keys, w.message_bytes, self.topic, self.slot.id_base
        produce, monotonic = self.producer.produce, time.monotonic
        poll = self._poll
        deadline, limit = self._limits()
        msg_id = 0
        while msg_id < limit:
            if msg_id % self.CHECK_EVERY == 0:
                journal.sent_upto = msg_id
                if stop.is_set() or monotonic() >= deadline:
                    break
            value = encode_value(base + msg_id, msg_id // nkeys, size)
            try:
                produce(topic, value, keys[msg_id % nkeys])
            except BufferError:
                poll(0.05)  # the local queue is full: let deliveries drain it
                continue
            except KafkaException as exc:
                self._refused(value, exc)
            msg_id += 1
            if msg_id % self.POLL_EVERY == 0:
                poll(0)
        journal.sent_upto = msg_id

    def _send_paced(self, stop: threading.Event) -> None:
        w, journal = self.workload, self.journal
        keys = [key_of(i, self.slot.key_prefix) for i in range(w.keys)]
        produce, poll, base = self.producer.produce, self._poll, self.slot.id_base
        assert w.rate is not None, "a paced send loop needs a rate"
        interval = 1.0 / w.rate
        started = time.monotonic()
        deadline, limit = self._limits()
        msg_id = 0
        while msg_id < limit and not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            if (ahead := started + msg_id * interval - now) > 0:
                poll(min(ahead, 0.05))
                continue
            value = encode_value(base + msg_id, msg_id // w.keys, w.message_bytes)
            try:
                produce(self.topic, value, key=keys[msg_id % w.keys])
            except BufferError:
                poll(0.05)
                continue
            except KafkaException as exc:
                self._refused(value, exc)
            msg_id += 1
            journal.sent_upto = msg_id
            poll(0)

    def _refused(self, value: bytes, exc: KafkaException) -> None:
        """Journal and tally a send produce() refused as failed, then back off; the workload
        goes on (a run survives its client)."""
        self.tally.failed += 1
        self.journal.failed.append(RefusedSend(value, refused_error(exc)))
        self.refused += 1
        if math.log10(self.refused).is_integer():  # the 1st, 10th, 100th ...: the log stays short
            log.warning("produce() refused %d send(s), the last with %s", self.refused, exc)
        self._poll(self.REFUSED_BACKOFF_S)

    def _poll(self, timeout_s: float) -> None:
        """Serve delivery reports for up to `timeout_s`, then commit them to the journal."""
        self.producer.poll(timeout_s)
        self.journal.commit()

    def _drain(self, timeout_s: float) -> int:
        """Serve reports until nothing is outstanding or `timeout_s` passed; the count left."""
        # Serving reports is the pause between two looks at what is outstanding.
        wait_for(lambda: not len(self.producer), timeout_s, interval_s=0.1, pause=self._poll)
        return len(self.producer)

    def _settle(self, flush_s: float) -> None:
        """Flush for `flush_s`; whatever is still outstanding is purged as indeterminate."""
        if self._drain(flush_s):
            self.producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._drain(min(flush_s, 5.0))
