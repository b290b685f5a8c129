"""The transactional producer: transactions of k messages, some committed, some aborted on purpose.

Each message is journalled as the plain recorder journals it (AckJournal: msg_id, delivery
report, partition, offset); each transaction, when it ends, gets one row in a crash-safe Arrow
stream (layout.TRANSACTIONS_JOURNAL): its number, first msg_id, message count, what the
producer meant (commit or abort) and what it became (committed, aborted or unknown). Messages
are spread over the partitions round-robin, so a transaction of k >= 2 messages spans
min(k, partitions) partitions. With `send_offsets`, every transaction also commits an offset
for the group GROUP_ID (send_offsets_to_transaction), which involves the group coordinator.
With `reads`, each transaction first reads records of the topic (transactions/reads.py).

Outcomes follow librdkafka's transactional API contract: a commit or abort call that returned
is definite; an error that requires an abort makes the transaction aborted once the abort
returned; a fatal error, or a commit that was retried after an error and then ended in an abort,
leaves the outcome unknown (the first commit may have reached the coordinator). A send that
produce() refuses synchronously (an unknown topic, a fatal client state) is journalled as failed,
as the plain recorder journals it; its transaction sends nothing more, is aborted whatever was
intended, and the workload goes on with the next one.

send_offsets_to_transaction may never return, whatever its timeout (librdkafka issues #5456 and
#5511): it runs on a daemon thread, and when it has not returned well after its timeout the
client is abandoned as stuck (never closed: closing it could block as well), the workload stops,
and the repetition ends with ClientStuck, so it is judged UNKNOWN after the usual heal and
read-back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from harness.experiment.fields import Scalar
from harness.rundir import layout
from harness.rundir.events import EventLog, now_us
from harness.rundir.streams import StreamWriter, stream_to_parquet
from harness.rundir.transactions import (
    TIMEOUT_ANSWERED,
    TRANSACTION_SCHEMA,
    Intent,
    OnTimeout,
    TxnOutcome,
)
from harness.waiting import Deadline, wait_for
from harness.workload.journal import AckJournal, close_journal, key_of
from harness.workload.producer.fleet import MemberEnd, sole_close
from harness.workload.producer.recorder import (
    DeliveryTally,
    Recorder,
    RecorderStats,
    RefusedSend,
    Workload,
    delivery_callback,
    refused_error,
    status_of,
)
from harness.workload.transactions.reads import TransactionReader, finalize_txn_reads, open_reader
from harness.workload.values import encode_value

log = logging.getLogger("kafka_chaos.transactions")

TRANSACTIONAL_ID = "kchaos-txn"  # the producer's transactional.id (target `txn-coordinator`)
GROUP_ID = "kchaos-txn-group"  # the group its offsets go to (target `group-coordinator`)


class ClientStuck(RuntimeError):
    """A transactional API call of librdkafka did not return long after its own timeout."""


@dataclass(frozen=True)
class TransactionPlan:
    """How the producer groups and ends its transactions (workload.transactions, resolved)."""

    size: int  # messages per transaction
    abort_every: int | None  # every N-th transaction is aborted on purpose (N-1, 2N-1, ...)
    abort_ratio: float | None  # else each transaction is aborted with this probability
    seed: int  # for abort_ratio
    timeout_ms: int  # transaction.timeout.ms: how soon the coordinator aborts an open one
    send_offsets: bool
    partitions: int
    on_timeout: OnTimeout = OnTimeout.RETRY  # how a timed-out commit, abort or offer is answered
    reads: int = 0  # records each transaction reads before its sends (transactions/reads.py)
    rewind_on_abort: bool = True  # the reader goes back after a transaction not committed
    age_commits: int = 0  # offset-only commits before the workload (transactions/java.py)
    abort_first: int = 0  # the first transactions are aborted whatever the rest says

    def intent(self, txn: int, rng: random.Random) -> Intent:
        """Whether transaction `txn` is to be committed or aborted: one of the first
        `abort_first` is aborted, each after them as abort_every or abort_ratio says (the ratio's
        draws are made for every transaction, so abort_first changes no later intent)."""
        if self.abort_every is not None:
            abort = txn % self.abort_every == self.abort_every - 1
        else:
            abort = rng.random() < (self.abort_ratio or 0.0)
        return Intent.ABORT if abort or txn < self.abort_first else Intent.COMMIT


def transactional_config(config: dict[str, Scalar], plan: TransactionPlan) -> dict[str, Scalar]:
    """The recorder's producer settings plus what transactions need."""
    return {
        **config,
        "transactional.id": TRANSACTIONAL_ID,
        "enable.idempotence": True,
        "transaction.timeout.ms": plan.timeout_ms,
    }


class TransactionJournal:
    """One row per ended transaction, appended to its stream (crash-safe) as it ends; `outcomes`
    counts every ended transaction by outcome, `close()` returns the stream's first error."""

    def __init__(self, path: Path):
        self.outcomes: Counter[str] = Counter()
        self.stream = StreamWriter(path, TRANSACTION_SCHEMA)

    def write(
        self, txn: int, first: int, messages: int, intent: Intent, outcome: TxnOutcome,
        error: str | None, begin_us: int, end_us: int | None = None,
    ) -> None:  # fmt: skip
        """Append the row of one ended transaction (ended at `end_us`, else now)."""
        self.outcomes[outcome.value] += 1
        self.stream.append(
            txn=txn, first_msg_id=first, messages=messages, intent=intent.value,
            outcome=outcome.value, error=error, begin_ts_us=begin_us,
            end_ts_us=now_us() if end_us is None else end_us,
        )  # fmt: skip

    def close(self) -> str | None:
        """Close the stream; its first error, or None."""
        return self.stream.close()


def finalize_transactions(run_dir: Path) -> pa.Table | None:
    """Write transactions.parquet from the transaction journal (and txn-reads.parquet from
    the reads journal, when the transactions read); None for a run without one."""
    journal = run_dir / layout.TRANSACTIONS_JOURNAL
    if journal.exists():
        finalize_txn_reads(run_dir)
    return stream_to_parquet(journal, TRANSACTION_SCHEMA, run_dir / layout.TRANSACTIONS, "txn")


class TransactionalRecorder:
    """The workload as transactions, driven as the runner drives any recorder (Producing).

    `start()` creates the client and runs init_transactions; `run(stop)` sends transaction after
    transaction until the duration or count is reached; `close(events)` closes both journals
    and writes the recorder_tally event (with the transactions by outcome).
    """

    INIT_TIMEOUT_S = 30.0
    END_TIMEOUT_S = 10.0  # one commit/abort call; a retriable timeout is retried
    END_ATTEMPTS = 6
    REPLACE_ATTEMPTS = 5  # fatal errors survived by a fresh client, then the workload stops
    STUCK_AFTER_S = 30.0  # beyond a call's own timeout: the client is stuck (see the docstring)
    REFUSED_BACKOFF_S = Recorder.REFUSED_BACKOFF_S  # after a transaction a refusal aborted

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        producer_config: dict[str, Scalar],
        workload: Workload,
        plan: TransactionPlan,
        run_dir: Path,
    ):
        self.bootstrap, self.topic, self.workload, self.plan = bootstrap, topic, workload, plan
        self.run_dir = run_dir
        self.config = transactional_config(producer_config, plan)
        self.journal = AckJournal(run_dir, workload.keys, status_of)
        self.transactions = TransactionJournal(run_dir / layout.TRANSACTIONS_JOURNAL)
        self.tally = DeliveryTally()
        self.producer: Producer | None = None
        self._group: Any = None  # the group's metadata for send_offsets_to_transaction
        self._consumer: Consumer | None = None
        self._rng = random.Random(plan.seed)
        self._replaced = 0
        self._reinit = False  # the last transaction's timeout was answered with a new client
        self._stop = threading.Event()  # the run's: an interrupt ends a wait for a stuck call
        self.stuck: ClientStuck | None = None
        self.refused = 0  # sends produce() refused synchronously (journalled as failed)
        self.reader: TransactionReader | None = None  # with plan.reads: what each one reads

    @property
    def stats(self) -> RecorderStats:
        """Sends so far and outcomes journalled so far (per message, as delivered)."""
        return RecorderStats.of(self.journal)

    def start(self) -> None:
        """Create the client and register the transactional id (init_transactions), and the
        reader when the transactions read."""
        self.producer = self._new_producer()
        if self.plan.reads:  # with send_offsets, its position is what each one commits
            group = GROUP_ID if self.plan.send_offsets else None
            args = (self.bootstrap, self.topic, self.plan.partitions, self.plan.reads, self.run_dir)
            self.reader = open_reader(*args, group=group, rewind=self.plan.rewind_on_abort)
            if (metadata := self.reader.group_metadata) is not None:
                self._group = metadata
                return
        if self.plan.send_offsets:
            self._consumer = Consumer(
                {"bootstrap.servers": self.bootstrap, "group.id": GROUP_ID, "log_level": 3}
            )
            self._group = self._consumer.consumer_group_metadata()

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                **self.config,
                "bootstrap.servers": self.bootstrap,
                "on_delivery": delivery_callback(self.journal, self.tally),
                "logger": logging.getLogger("kafka_chaos.librdkafka"),
            }
        )
        producer.init_transactions(self.INIT_TIMEOUT_S)
        return producer

    def run(self, stop: threading.Event) -> RecorderStats:
        """Send transactions until the duration or count is reached or `stop` is set."""
        w = self.workload
        duration = Deadline.after(w.duration_s or None)  # no duration: the count ends it
        limit = w.count if w.count else 1 << 62
        interval = 1.0 / w.rate if w.rate else 0.0
        started, msg_id, txn = time.monotonic(), 0, 0
        self._stop = stop
        try:
            while msg_id < limit and not stop.is_set() and not duration.passed():
                size = min(self.plan.size, limit - msg_id)
                msg_id, fatal = self._transaction(txn, msg_id, size, started, interval, stop)
                txn += 1
                if fatal and (self.stuck is not None or not self._replace()):
                    break
        finally:
            self._close_clients()
        return self.stats

    def _transaction(
        self, txn: int, first: int, size: int, started: float, interval: float,
        stop: threading.Event,
    ) -> tuple[int, bool]:  # fmt: skip
        """Run transaction `txn` from msg_id `first`: (the next msg_id, whether the client hit
        a fatal error and must be replaced). The transaction is journalled either way."""
        producer = self.producer
        assert producer is not None
        begin_us = now_us()
        intent = self.plan.intent(txn, self._rng)
        try:
            producer.begin_transaction()
        except KafkaException as exc:  # nothing sent in it: no row needed
            log.warning("begin_transaction failed: %s", _name(exc))
            return first, True
        if self.reader is not None:  # consume, then transform and produce
            self.reader.read(txn)
        msg_id, refusal = first, None
        while msg_id < first + size and not stop.is_set():
            if (ahead := started + msg_id * interval - time.monotonic()) > 0:
                self._poll(min(ahead, 0.05))
                continue
            value = self._value(msg_id)
            try:
                self._produce(producer, msg_id, value)
            except BufferError:
                self._poll(0.05)
                continue
            except KafkaException as exc:  # refused: the rest of the transaction is not sent
                refusal = f"produce: {_name(exc)}"
                self._refused(value, exc)
                msg_id += 1
                self.journal.sent_upto = msg_id
                break
            msg_id += 1
            self.journal.sent_upto = msg_id
            self._poll(0)
        # After a refusal the transaction is aborted whatever was intended (its intent stays
        # in the journal): committing part of it would be a torn transaction of our own making.
        outcome, end_error, fatal = self._end(producer, intent, txn, abort=refusal is not None)
        if self.reader is not None:
            self.reader.ended(outcome is TxnOutcome.COMMITTED)
        error = "; ".join(e for e in (refusal, end_error) if e) or None
        self.journal.commit()
        self.transactions.write(txn, first, msg_id - first, intent, outcome, error, begin_us)
        if refusal is not None and not fatal:  # a refusal that lasts must not spin transactions
            self._poll(self.REFUSED_BACKOFF_S)
        return msg_id, fatal

    def _value(self, msg_id: int) -> bytes:
        """The record value of `msg_id` (values.encode_value)."""
        w = self.workload
        return encode_value(msg_id, msg_id // w.keys, w.message_bytes)

    def _produce(self, producer: Producer, msg_id: int, value: bytes) -> None:
        """Send `value` to the partition round-robin gives `msg_id`, with its key."""
        producer.produce(
            self.topic,
            value,
            key=key_of(msg_id % self.workload.keys),
            partition=msg_id % self.plan.partitions,
        )

    def _refused(self, value: bytes, exc: KafkaException) -> None:
        """Journal and tally a send produce() refused as failed, as the plain recorder does
        (RefusedSend: it never entered the client's queue, so it was never written)."""
        self.tally.failed += 1
        self.journal.failed.append(RefusedSend(value, refused_error(exc)))
        self.refused += 1
        if math.log10(self.refused).is_integer():  # the 1st, 10th, 100th ...: the log stays short
            log.warning("produce() refused %d send(s), the last with %s", self.refused, _name(exc))

    def _end(
        self, producer: Producer, intent: Intent, txn: int, abort: bool = False
    ) -> tuple[TxnOutcome, str, bool]:
        """Send the offsets, then commit or abort as intended (`abort`: abort whatever the
        intent): (outcome, errors, fatal). A retriable error (a timeout) is answered as the
        plan's on_timeout says: the same call again, an abort (a new client when the abort
        times out too or the client refuses it), or a new client at once; `errors` names the
        answer."""
        errors: list[str] = []
        doing, doubtful = (Intent.ABORT if abort else intent), False
        answered_abort, self._reinit = False, False  # an abort the timeout's answer asked for
        for _ in range(self.END_ATTEMPTS):
            try:
                if self._group is not None and doing == Intent.COMMIT:
                    # The reader's position; else an offset that brings in the coordinator.
                    fake = [TopicPartition(self.topic, 0, txn + 1)]
                    self._send_offsets(producer, self.reader.offsets() if self.reader else fake)
                if doing == Intent.COMMIT:
                    producer.commit_transaction(self.END_TIMEOUT_S)
                    return TxnOutcome.COMMITTED, "; ".join(errors), False
                if doing == intent == Intent.ABORT and not abort:
                    # Deliver first: aborting purges what the client still holds, and an
                    # abort that never reached the log gives read_committed nothing to filter.
                    try:
                        producer.flush(self.END_TIMEOUT_S)
                    except SystemError as exc:  # the binding lost a callback's exception
                        errors.append(f"flush before the abort: {exc}")
                producer.abort_transaction(self.END_TIMEOUT_S)
                # An abort after a commit that raised a retriable error: the first commit may
                # have reached the coordinator, so the outcome is not known.
                outcome = TxnOutcome.UNKNOWN if doubtful else TxnOutcome.ABORTED
                return outcome, "; ".join(errors), False
            except ClientStuck as exc:
                self.stuck = exc
                errors.append(f"{doing.value}: {exc}")
                return TxnOutcome.UNKNOWN, "; ".join(errors), True
            except KafkaException as exc:
                kafka_error = exc.args[0] if exc.args else None
                errors.append(f"{doing.value}: {_name(exc)}")
                if kafka_error is None or kafka_error.fatal():
                    return TxnOutcome.UNKNOWN, "; ".join(errors), True
                if kafka_error.txn_requires_abort():
                    doing = Intent.ABORT
                elif kafka_error.retriable():
                    doubtful = doubtful or doing == Intent.COMMIT
                    answer = self._answer_timeout(doing)
                    if answer is not OnTimeout.RETRY:
                        errors.append(TIMEOUT_ANSWERED.format(answer.value))
                    if answer is OnTimeout.REINIT:
                        return TxnOutcome.UNKNOWN, "; ".join(errors), True
                    if answer is OnTimeout.ABORT:
                        doing, answered_abort = Intent.ABORT, True
                else:
                    if answered_abort and doing == Intent.ABORT:
                        # The client refused the abort the answer asked for (a commit still
                        # pending): the same answer goes on with a new client.
                        self._reinit = True
                        errors.append(TIMEOUT_ANSWERED.format(OnTimeout.REINIT.value))
                    return TxnOutcome.UNKNOWN, "; ".join(errors), True
        return TxnOutcome.UNKNOWN, "; ".join(errors), True

    def _answer_timeout(self, doing: Intent) -> OnTimeout:
        """What answers a timeout of the `doing` call: the plan's on_timeout, except that an
        abort that timed out under `abort` leaves nothing but a new client (reinit)."""
        answer = self.plan.on_timeout
        if answer is OnTimeout.ABORT and doing == Intent.ABORT:
            answer = OnTimeout.REINIT
        self._reinit = answer is OnTimeout.REINIT
        return answer

    def _send_offsets(self, producer: Producer, offsets: list[TopicPartition]) -> None:
        """send_offsets_to_transaction on a daemon thread, waited for at most END_TIMEOUT_S +
        STUCK_AFTER_S (less when the run is interrupted); its own exception is re-raised, and
        ClientStuck raised when it did not return in time."""
        ended = threading.Event()
        raised: list[BaseException] = []

        def call() -> None:
            try:
                producer.send_offsets_to_transaction(offsets, self._group, self.END_TIMEOUT_S)
            except BaseException as exc:  # handed to the waiting thread, which raises it
                raised.append(exc)
            finally:
                ended.set()

        def interrupted(seconds: float) -> bool:
            """Wait up to `seconds` for the call to return; True when the run was interrupted
            meanwhile and the call has still not returned."""
            return not ended.wait(seconds) and self._stop.is_set()

        threading.Thread(target=call, name="send-offsets", daemon=True).start()
        waited = self.END_TIMEOUT_S + self.STUCK_AFTER_S
        if not wait_for(ended.is_set, waited, interval_s=0.2, pause=interrupted):
            raise ClientStuck(
                f"send_offsets_to_transaction did not return (timeout {self.END_TIMEOUT_S:g} "
                f"s, waited up to {waited:g} s): the client is abandoned as stuck "
                "(librdkafka issues #5456, #5511)"
            )
        if raised:
            raise raised[0]

    def _replace(self) -> bool:
        """A fresh client with the same transactional id (fencing the old one); False when
        REPLACE_ATTEMPTS are used up or init_transactions fails. A replacement the plan's
        on_timeout asked for is not counted: only fatal errors use up the attempts."""
        deliberate, self._reinit = self._reinit, False
        self._replaced += not deliberate
        if self._replaced > self.REPLACE_ATTEMPTS:
            log.error("transactional producer: too many fatal errors, stopping the workload")
            return False
        self._close_producer()
        try:
            self.producer = self._new_producer()
        except KafkaException as exc:
            log.error("transactional producer could not be replaced: %s", exc)
            self.producer = None
            return False
        return True

    def _poll(self, timeout_s: float) -> None:
        if self.producer is not None:
            self.producer.poll(timeout_s)
        self.journal.commit()

    def _close_producer(self) -> None:
        """Release the client: what it still holds is purged (indeterminate, never loss). A
        stuck client is only let go of: its thread still holds it, and closing could block."""
        producer, self.producer = self.producer, None
        if producer is None or self.stuck is not None:
            self.journal.commit()
            return
        with contextlib.suppress(Exception):
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.poll(1.0)
        # Closing mid-transaction makes the client abort it and warn when it cannot (a fenced
        # or failed transaction): expected here, so the warning goes to the log, not stderr.
        with contextlib.suppress(Exception), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            producer.close()
        for warning in caught:
            log.info("closing the transactional producer: %s", warning.message)
        self.journal.commit()

    def _close_clients(self) -> None:
        self._close_producer()
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
            self._consumer = None

    def close(self, events: EventLog) -> Exception | None:
        """Close both journals and record the tally; the JournalError to raise, or None."""
        with contextlib.suppress(Exception):
            self._close_clients()
        error = close_journal(self.journal)
        if (txn_error := self.transactions.close()) is not None:
            error = f"{error}; {txn_error}" if error else txn_error
        if self.reader is not None and (read_error := self.reader.close()) is not None:
            error = f"{error}; {read_error}" if error else read_error
        end = MemberEnd(self.tally.as_dict(), error, transactions=dict(self.transactions.outcomes))
        # Stuck, the repetition is UNKNOWN: its workload stopped early.
        return sole_close(end, events) or self.stuck


def _name(exc: KafkaException) -> str:
    """The error's name (e.g. `_FENCED`), or its text."""
    error = exc.args[0] if exc.args else None
    if error is None:
        return str(exc)
    try:
        return f"{error.name()}: {error.str()}"
    except Exception:
        return str(exc)
