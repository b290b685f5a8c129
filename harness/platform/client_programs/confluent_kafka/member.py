"""The consume role of the confluent-kafka program (client.py consume ...): one start of one
member of the consumer group, its journals and its stdout lines (the client-program contract)."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import contract
from confluent_kafka import Consumer, KafkaException, TopicPartition
from contract import msg_id_of, next_offsets, note
from library import POLL_S, client_version, describe, flag, kafka_error

# ---------------------------------------------------------------------------------------------
# consume


class Member(contract.Journals):
    """The consume role on librdkafka: one start of one member of the group
    (KafkaChaosConsumer.java), its automatic commits as on_commit reports them."""

    stopped: threading.Event  # the flag SIGTERM raises

    def __init__(self, args: dict[str, str]):
        super().__init__(args)
        self.settings = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.client_id,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": str(self.commit == "auto").lower(),
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_ms,
        }
        self.stopped = threading.Event()

    def play(self) -> None:
        self.run()

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

    def commit_sync(self, consumer: Consumer, rows) -> set[int]:
        """Commit each partition's next offset after `rows` synchronously; the partitions
        whose commit succeeded. The outcome is journalled either way."""
        offsets = next_offsets(rows)
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
        contract.watch_stdin_thread()
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
            self.close_journals()


# ---------------------------------------------------------------------------------------------
