"""The journal of a test's own producer: the values it sends, in the harness's format, and
every delivery report its callback receives, in the harness's crash-safe journal.

The test produces with its own client and passes `on_delivery` (or a callback `wrap`ped by
it). Each report is tallied and handed to the same AckJournal the harness's recorder writes
(harness.workload.journal), committed at once with the time it arrived; `close` writes the
tally event beside it (harness.workload.producer.librdkafka.close_with_tally), and `finalize` turns
the journal into acked.parquet as for any run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final, NamedTuple

from harness.rundir.events import EventLog
from harness.rundir.records import Status
from harness.workload.journal import AckJournal, MadeReport, key_of
from harness.workload.producer.command import ErrorReport
from harness.workload.producer.librdkafka import close_with_tally
from harness.workload.producer.protocol import (
    SendError,
    SendSuccess,
    ValueFormat,
    decode_with,
    journal_value,
    parse_line,
)
from harness.workload.producer.recorder import DeliveryTally, delivery_callback, status_of
from harness.workload.producer.send_errors import status_of_error
from harness.workload.values import encode_value
from kafka_chaos.testing.errors import ChaosUsageError

__all__ = ["MAX_CHOSEN_ID", "ChaosJournal", "ChaosMessage", "DeliveryCallback"]

# acked.parquet holds a row for every id below the highest one sent (a send without a report
# is indeterminate), so ids of the test's own choosing stay below this.
MAX_CHOSEN_ID: Final = 10_000_000
DeliveryCallback = Callable[[Any, Any], None]


class ChaosMessage(NamedTuple):
    """One message to send: its id, its key and its value (`<id>:<key seq>:` then padding)."""

    msg_id: int
    key: str
    value: bytes


class ChaosJournal:
    """Records the test's sends and delivery reports into its run directory.

    Take each value from `message()` (the next id, the harness's key and value) or from
    `value(msg_id, key)` (an id of the test's choosing), never both in one journal; send it
    with `on_delivery` as the delivery callback. Safe to use from several producer threads.
    """

    def __init__(self, run_dir: Path, *, keys: int, message_bytes: int, offsets_known: bool):
        self.keys = keys
        self.message_bytes = message_bytes
        self._journal = AckJournal(run_dir, keys, status_of)
        # acks=0: librdkafka's offsets are batch-relative numbers, never recorded.
        self._journal.offsets_known = offsets_known
        self._tally = DeliveryTally()
        self._record = delivery_callback(self._journal, self._tally)
        self._lock = threading.Lock()
        self._next_id = 0
        self._chosen: set[int] = set()
        self._key_seqs: dict[bytes | None, int] = {}
        self._mode: str | None = None  # "message" or "value", whichever was used first
        self._closed = False
        self.late_reports = 0  # reports that arrived after `close` (not journalled)

    # -- what to send ----------------------------------------------------------------------

    def message(self) -> ChaosMessage:
        """The next message: id 0, 1, 2, ... on key k<id % keys> with its key sequence."""
        with self._lock:
            self._use("message")
            msg_id = self._next_id
            self._next_id += 1
            self._journal.sent_upto = self._next_id
        key_seq = msg_id // self.keys
        value = encode_value(msg_id, key_seq, self.message_bytes)
        return ChaosMessage(msg_id, key_of(msg_id % self.keys), value)

    def value(self, msg_id: int, key: str | bytes | None = None) -> bytes:
        """The value for an id of the test's choosing (0 <= msg_id < MAX_CHOSEN_ID, each once),
        sent with `key`: its key sequence counts the values taken for that key, so the checker
        sees reordering. Ids below the highest one that are never sent count as sends without
        a report (indeterminate, never loss): number them densely."""
        if isinstance(msg_id, bool) or not isinstance(msg_id, int):
            raise ChaosUsageError(f"value(msg_id): msg_id must be an int (got {msg_id!r})")
        if not 0 <= msg_id < MAX_CHOSEN_ID:
            raise ChaosUsageError(
                f"value({msg_id}): ids run from 0 to {MAX_CHOSEN_ID - 1}: acked.parquet holds a "
                "row for every id below the highest one"
            )
        name = key.encode() if isinstance(key, str) else key
        with self._lock:
            self._use("value")
            if msg_id in self._chosen:
                raise ChaosUsageError(
                    f"value({msg_id}): id {msg_id} was taken already; each id names one send"
                )
            self._chosen.add(msg_id)
            key_seq = self._key_seqs.get(name, 0)
            self._key_seqs[name] = key_seq + 1
            self._journal.sent_upto = max(self._journal.sent_upto, msg_id + 1)
        return encode_value(msg_id, key_seq, self.message_bytes)

    def _use(self, mode: str) -> None:
        if self._closed:
            raise ChaosUsageError("the journal is closed (judge() ran): no more sends")
        if self._mode is None:
            self._mode = mode
        elif self._mode != mode:
            raise ChaosUsageError(
                f"this journal's ids come from {self._mode}(); {mode}() would reuse them: use "
                "one of message() and value() per test (or record_lines() alone)"
            )

    # -- what came back --------------------------------------------------------------------

    def on_delivery(self, error: Any, msg: Any) -> None:
        """The delivery callback: pass it to Producer.produce(on_delivery=...) or as the
        producer's `on_delivery` setting."""
        with self._lock:
            if self._closed:
                self.late_reports += 1
                return
            self._record(error, msg)
            self._journal.commit()

    def wrap(self, callback: DeliveryCallback) -> DeliveryCallback:
        """A delivery callback that records the report, then calls the test's own `callback`."""

        def recorded(error: Any, msg: Any) -> None:
            self.on_delivery(error, msg)
            callback(error, msg)

        return recorded

    def record_lines(self, lines: Iterable[str]) -> int:
        """Journal the sends a program reported in the verifiable-client protocol
        (docs/clients.md: `producer_send_success` and `producer_send_error` lines, values in
        the harness's format), e.g. the stdout of a container on the cluster's network; other
        lines are skipped. The number of sends journalled."""
        journalled = 0
        with self._lock:
            self._use("record_lines")
            for text in lines:
                line = parse_line(text)
                if not isinstance(line, SendSuccess | SendError):
                    continue
                msg_id, key_seq = decode_with(ValueFormat.KAFKA_CHAOS, line.value, self.keys)
                if msg_id is not None:
                    self._journal.sent_upto = max(self._journal.sent_upto, msg_id + 1)
                latency = line.latency_us / 1e6 if line.latency_us is not None else None
                self._journal_line(line, journal_value(msg_id, key_seq), latency)
                journalled += 1
            self._journal.commit()
        return journalled

    def _journal_line(
        self, line: SendSuccess | SendError, value: bytes | None, latency: float | None
    ) -> None:
        """One reported send into the journal and the tally, by its status."""
        if isinstance(line, SendSuccess):
            self._tally.ok += 1
            where = (line.partition, line.offset)
            self._journal.delivered.append(MadeReport(value, None, where, latency))
            return
        report = MadeReport(value, ErrorReport(line.error, line.message), (None, None), latency)
        if status_of_error(line.error) == Status.FAILED:
            self._tally.failed += 1
            self._journal.failed.append(report)
        else:
            self._tally.indeterminate += 1
            self._journal.indeterminate.append(report)

    @property
    def sent(self) -> int:
        """Values handed out so far (the highest id + 1 for ids of the test's choosing)."""
        return self._journal.sent_upto

    @property
    def reports(self) -> dict[str, int]:
        """Delivery reports received so far, by status (ok, failed, indeterminate)."""
        return self._tally.as_dict()

    # -- the end ---------------------------------------------------------------------------

    def close(self, events: EventLog) -> str | None:
        """Stop recording, write what is left and the `recorder_tally` event; the journal's
        error (None when every report was written)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = True
        return close_with_tally(self._journal, self._tally, events)
