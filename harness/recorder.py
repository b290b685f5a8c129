"""The producer that records every send and its outcome: ok, failed or indeterminate.

Each value starts with `<msg_id>:<key_seq>:`; the id is unique in the run, the sequence
counts sends per key, so the read-back can spot losses, duplicates and reordering.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from harness.journal import AckJournal, now_us

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


def outcome_of(error: KafkaError | None) -> str:
    """`ok`, `failed` (a definite error) or `indeterminate` for a delivery report's error."""
    if error is None:
        return "ok"
    return "indeterminate" if error.code() in INDETERMINATE else "failed"


def encode_value(msg_id: int, key_seq: int, size: int) -> bytes:
    """The record value: `<msg_id>:<key_seq>:` padded with '.' to `size` bytes."""
    head = b"%d:%d:" % (msg_id, key_seq)
    return head + b"." * max(0, size - len(head))


def decode_value(value: bytes | None) -> tuple[int | None, int | None]:
    """(msg_id, key_seq) from a value written by `encode_value`; Nones if it is not ours."""
    if not value:
        return None, None
    parts = value.split(b":", 2)
    if len(parts) < 3:
        return None, None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None, None


@dataclass(frozen=True)
class Workload:
    """How much to send: rate (None = unthrottled), duration or count, size, number of keys."""

    rate: float | None
    duration_s: float | None
    count: int | None
    message_bytes: int
    keys: int


@dataclass
class RecorderStats:
    """Live counters, read by the progress display (plain ints: races only blur a display)."""

    sent: int = 0
    ok: int = 0
    failed: int = 0
    indeterminate: int = 0
    started_at: float = field(default_factory=time.monotonic)


class Recorder:
    """Sends the workload to `topic` and journals every send and delivery report."""

    FINAL_FLUSH_S = 30.0

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        producer_config: dict[str, Any],
        workload: Workload,
        journal: AckJournal,
    ):
        self.topic = topic
        self.workload = workload
        self.journal = journal
        self.stats = RecorderStats()
        # With acks=0 the broker returns no offset; librdkafka then reports batch-relative
        # numbers (0, 1, 2, ...) for some messages. Recording them would fake divergence.
        self.offsets_known = str(producer_config.get("acks", "all")) != "0"
        self.producer = Producer(
            {
                **producer_config,
                "bootstrap.servers": bootstrap,
                "on_delivery": self._on_delivery,
                "logger": logging.getLogger("kafka_chaos.librdkafka"),
            }
        )

    def _on_delivery(self, error: KafkaError | None, msg: Message) -> None:
        msg_id, _ = decode_value(msg.value())
        status = outcome_of(error)
        offset = msg.offset() if self.offsets_known else None
        self.journal.acked(
            msg_id,
            status,
            msg.partition() if msg.partition() >= 0 else None,
            offset if offset is not None and offset >= 0 else None,
            None if error is None else error.name(),
            now_us(),
        )
        if status == "ok":
            self.stats.ok += 1
        elif status == "failed":
            self.stats.failed += 1
        else:
            self.stats.indeterminate += 1

    def run(self, stop: threading.Event) -> RecorderStats:
        """Send until the duration/count is reached or `stop` is set, then settle every send."""
        try:
            self._send_loop(stop)
            self._settle()
        finally:
            # Release the client now: a live handle keeps reconnecting to removed brokers.
            self.producer.close()
        return self.stats

    def _send_loop(self, stop: threading.Event) -> None:
        w = self.workload
        keys = [f"k{i}" for i in range(w.keys)]
        sequences = [0] * w.keys
        produce, poll, sent = self.producer.produce, self.producer.poll, self.journal.sent
        interval = 1.0 / w.rate if w.rate else 0.0
        started = time.monotonic()
        deadline = started + w.duration_s if w.duration_s else float("inf")
        limit = w.count if w.count else 1 << 62
        msg_id = 0
        while msg_id < limit and not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            if interval and (ahead := started + msg_id * interval - now) > 0:
                poll(min(ahead, 0.05))
                continue
            key_index = msg_id % w.keys
            key_seq = sequences[key_index]
            try:
                produce(
                    self.topic, encode_value(msg_id, key_seq, w.message_bytes), key=keys[key_index]
                )
            except BufferError:
                poll(0.05)  # the local queue is full: let deliveries drain it
                continue
            sent(msg_id, keys[key_index], key_seq, now_us())
            sequences[key_index] = key_seq + 1
            msg_id += 1
            self.stats.sent = msg_id
            poll(0)

    def _settle(self) -> None:
        """Flush for a bounded time; whatever is still outstanding is purged as indeterminate."""
        remaining = self.producer.flush(self.FINAL_FLUSH_S)
        if remaining:
            self.producer.purge(in_queue=True, in_flight=True, blocking=False)
            self.producer.flush(5.0)
