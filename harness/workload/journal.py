"""Crash-safe records of a run: the send/ack journal and the event log.

Both are appended while the run goes on and flushed at least every ~0.2 s, so a SIGKILL of
the harness loses at most the last fraction of a second. The journal is Arrow IPC streams
(a truncated last batch is simply not read); `finalize` turns them into acked.parquet.

The hot path stays tiny: a delivery callback appends the message object to the list of its
status, and the thread that serves delivery reports hands the lists over with `commit()`
after each poll, stamped once with the time (the ack time of every report it holds). The
writer thread reads the fields column-wise, or report by report when a page holds fields it
cannot type (librdkafka leaves offset, partition or latency unknown on some reports): no
report is ever dropped, and a failure to write makes `close()` raise JournalError.

Sends are not journalled one by one: ids are sequential and keys assigned round-robin, so
key and key sequence follow from the id; the writer checkpoints the highest id sent every
flush, and a send's time is its ack time minus librdkafka's measured latency (interpolated
from the checkpoints for sends without a report).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import methodcaller
from pathlib import Path
from typing import Any, Final, Protocol, Required, TypedDict, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.rundir import layout
from harness.rundir.events import now_us
from harness.rundir.records import (
    ACK_SCHEMA,
    CHECKPOINT_SCHEMA,
    PRODUCER_ID_STRIDE,
    STATUSES,
    Status,
)
from harness.rundir.streams import StreamWriter

log = logging.getLogger("kafka_chaos.journal")


def key_of(key_index: int, prefix: str = "") -> str:
    """The record key of the `key_index`-th key (of the producer whose keys start `prefix`)."""
    return f"{prefix}k{key_index}"


class JournalMeta(TypedDict, total=False):
    """A journal's meta file: its keys, and for one of several producers its index and first
    msg_id (ProducerSlot.id_base)."""

    keys: Required[int]
    producer: int
    id_base: int


@dataclass(frozen=True)
class ProducerSlot:
    """Which recorder of a run this is: its msg_id base, key prefix and journal files.

    `index` None is the only recorder of a one-producer run: ids from 0, keys `k<i>`, the
    journal files of layout.JOURNAL. Producer p of several sends ids from p * stride and keys
    `p<p>-k<i>`, so ids never collide and each producer's keys (hence its per-key, per-partition
    order) are its own.
    """

    index: int | None = None

    @property
    def id_base(self) -> int:
        """The msg_id of this producer's first send."""
        return 0 if self.index is None else self.index * PRODUCER_ID_STRIDE

    @property
    def key_prefix(self) -> str:
        """What every key of this producer starts with."""
        return "" if self.index is None else f"p{self.index}-"

    @property
    def files(self) -> layout.JournalFiles:
        """The names of this producer's journal files in the run directory."""
        return layout.JOURNAL if self.index is None else layout.producer_journal(self.index)

    def meta(self, keys: int) -> JournalMeta:
        """The journal's meta file: what `finalize` needs to rebuild the sends."""
        if self.index is None:
            return {"keys": keys}  # as before several producers existed
        return {"keys": keys, "producer": self.index, "id_base": self.id_base}

    @classmethod
    def from_meta(cls, meta: JournalMeta) -> ProducerSlot:
        """The slot a journal meta file describes."""
        return cls(meta.get("producer"))


SOLE = ProducerSlot()  # the recorder of a one-producer run


class Report(Protocol):
    """A delivery report: confluent_kafka.Message as the delivery callback receives it.

    librdkafka leaves fields unknown (the Python client then returns None): no offset for a
    failed send or for an idempotent retry the broker took as a duplicate, no partition for
    a message never assigned one, no latency for a message that never left the client.
    """

    def value(self) -> bytes | None: ...
    def error(self) -> Any: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def latency(self) -> float | None: ...


@dataclass
class MadeReport:
    """A delivery report the harness makes itself, as the journal reads confluent_kafka's: a
    client program's line (command.py), or a send produce() refused (recorder.RefusedSend)."""

    payload: bytes | None
    failure: Any  # the error (None: the send succeeded)
    where: tuple[int | None, int | None] = (None, None)  # (partition, offset)
    latency_s: float | None = None

    def value(self) -> bytes | None:
        return self.payload

    def error(self) -> Any:
        return self.failure

    def partition(self) -> int | None:
        return self.where[0]

    def offset(self) -> int | None:
        return self.where[1]

    def latency(self) -> float | None:
        return self.latency_s


class JournalError(RuntimeError):
    """Delivery reports could not all be written to the journal: the repetition is incomplete."""


# A committed page: (time_ns of the commit, ok reports, failed reports, indeterminate reports).
Page = tuple[int, Sequence[Report], Sequence[Report], Sequence[Report]]
PAGE_STATUSES: Final = (Status.OK.value, Status.FAILED.value, Status.INDETERMINATE.value)
# Reports of one status from a set of pages: (reports, ack time of each in ns, status).
Group = tuple[list[Report], np.ndarray, str]
ID_DIGITS = 15  # values start with the id zero-padded to 15 digits (see values.encode_value)


def error_status(classify: Callable[[Any], str], error: Any) -> str:
    """`failed` when `classify` says so, else `indeterminate`; never raises (it runs in the
    delivery callback, where an exception would surface from the producer's poll)."""
    try:
        failed = classify(error) == Status.FAILED
    except Exception:
        failed = False
    return Status.FAILED.value if failed else Status.INDETERMINATE.value


def write_meta(run_dir: Path, slot: ProducerSlot, keys: int) -> None:
    """Write the journal's meta file: a journal that has one can be finalized."""
    (run_dir / slot.files.meta).write_text(json.dumps(slot.meta(keys)))


class AckJournal:
    """Delivery reports and send checkpoints, written by a background thread every 0.2 s.

    The producer sets `sent_upto` (ids below it were handed to the client). Its delivery
    callback appends each report to `delivered` (no error), `failed` or `indeterminate` (its
    error through `error_status(classify, ...)`), and right after every poll/flush the same
    thread calls `commit()`. A report's status is the list it was served into: the journal
    never classifies again, so it agrees with the callback's own tally by construction.

    No report is dropped: a page the column-wise decoder cannot type is decoded report by
    report (unknown fields become null); a page even that cannot decode is kept in
    `undecodable`. A failure to write is remembered in `error`, and `close()` raises it as
    JournalError. `counts` tallies, by status, the reports written to disk.
    """

    FLUSH_INTERVAL_S = 0.2

    def __init__(
        self,
        run_dir: Path,
        keys: int,
        classify: Callable[[Any], str],
        slot: ProducerSlot = SOLE,
    ):
        files = slot.files
        write_meta(run_dir, slot, keys)
        self.run_dir = run_dir
        self.slot = slot
        self.sent_upto = 0
        self.counts = {status: 0 for status in STATUSES}
        self.classify = classify
        self.offsets_known = True  # False: record no offsets (acks=0, see Recorder)
        self.unwritten = 0  # decoded reports that could not be written
        self.undecodable: list[Group] = []
        self.error: str | None = None  # the first failure to decode or write
        # Owned by the thread serving delivery reports; the lists keep their identity so the
        # callback can bind their append once.
        self.delivered: list[Report] = []
        self.failed: list[Report] = []
        self.indeterminate: list[Report] = []
        self._pages: deque[Page] = deque()  # committed, waiting for the writer
        self._last_checkpoint = -1
        self._sends = StreamWriter(run_dir / files.sends, CHECKPOINT_SCHEMA)
        self._acks = StreamWriter(run_dir / files.acks, ACK_SCHEMA)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ack-journal", daemon=True)
        self._thread.start()

    def _note(self, error: str | None) -> None:
        """Remember and log the first failure; later ones are mostly its consequences."""
        if error is not None and self.error is None:
            self.error = error
            log.error("journal: %s", error)

    def _run(self) -> None:
        while not self._stop.wait(self.FLUSH_INTERVAL_S):
            try:
                self.flush()
            except Exception as exc:  # flush records its own failures; this is a last resort
                self._note(f"journal flush failed: {exc!r}")

    def flush(self) -> None:
        """Write the send checkpoint and every committed page; failures are kept in `error`."""
        with self._lock:
            sent = self.sent_upto
            if sent != self._last_checkpoint and self._sends.append(sent_upto=sent, ts_us=now_us()):
                self._last_checkpoint = sent
            self._note(self._sends.error)
            pages = []
            while self._pages:
                pages.append(self._pages.popleft())
            for status, batch in self._decode(pages):
                self._write(status, batch)

    def _write(self, status: str, batch: pa.RecordBatch) -> None:
        """Append a decoded batch (all of `status`) and count it, or count it as unwritten."""
        if self._acks.write(batch):
            self.counts[status] += batch.num_rows
        else:
            self.unwritten += batch.num_rows
            self._note(self._acks.error)

    def commit(self, now_ns: int | None = None) -> None:
        """Hand the reports served since the last commit to the writer, stamped `now_ns`.

        Call it on the thread that runs the delivery callback, right after poll/flush
        returns: every report in the page was served before that instant.
        """
        delivered, failed, indeterminate = self.delivered, self.failed, self.indeterminate
        if delivered or failed or indeterminate:
            stamp = now_ns if now_ns is not None else time.time_ns()
            # Errors are rare: an empty list is not copied (this runs every few sends).
            self._pages.append((stamp, _take(delivered), _take(failed), _take(indeterminate)))

    def _decode(self, pages: list[Page]) -> list[tuple[str, pa.RecordBatch]]:
        """(status, record batch) for the pages: one per status that has reports."""
        batches = []
        stamps = np.asarray([page[0] for page in pages], dtype=np.int64)
        for column, status in enumerate(PAGE_STATUSES, start=1):
            groups = [cast("Sequence[Report]", page[column]) for page in pages]
            reports = [report for group in groups for report in group]
            if reports:
                ack_ns = np.repeat(stamps, [len(group) for group in groups])
                batch = self._decode_group((reports, ack_ns, status))
                if batch is not None:
                    batches.append((status, batch))
        return batches

    def _decode_group(self, group: Group) -> pa.RecordBatch | None:
        """Column-wise, else report by report; None (group kept, error set) if both fail."""
        try:
            return self._columnwise(*group)
        except Exception as exc:  # an odd field somewhere: still every report, just slower
            log.warning("journal: column-wise decode failed (%r); decoding report by report", exc)
        try:
            return self._per_report(*group)
        except Exception as exc:
            self.undecodable.append(group)
            self._note(f"{len(group[0])} delivery reports could not be decoded: {exc!r}")
            return None

    def _columnwise(self, reports: list[Report], ack_ns: np.ndarray, status: str) -> pa.RecordBatch:
        """The batch read field by field at C speed; raises on a field it cannot type."""
        n = len(reports)
        msg_ids = parse_ids(_fields(reports, "value"))
        if status == Status.OK:
            error = pa.nulls(n, pa.string())
        else:
            error = pa.array([e.name() for e in _fields(reports, "error")], pa.string())
        partition = _int_column(_fields(reports, "partition"), pa.int32())
        if self.offsets_known:
            offset = _int_column(_fields(reports, "offset"), pa.int64())
        else:
            offset = pa.nulls(n, pa.int64())
        # librdkafka gives no latency (None) for a message that never left the client.
        latencies = np.asarray(_fields(reports, "latency"), dtype=np.float64)
        unknown = ~(latencies >= 0)  # NaN (None) or negative
        latency = pa.array(np.where(unknown, 0, latencies * 1e6).astype(np.int64), mask=unknown)
        return _ack_batch(status, ack_ns, msg_ids, partition, offset, error, latency)

    def _per_report(self, reports: list[Report], ack_ns: np.ndarray, status: str) -> pa.RecordBatch:
        """The batch read one report at a time: a field that cannot be read becomes null."""
        rows = [self._row(report, status != Status.OK) for report in reports]
        return _ack_batch(status, ack_ns, *zip(*rows, strict=True))

    def _row(self, report: Report, with_error: bool) -> tuple:
        """(msg_id, partition, offset, error, latency_us) of one report, None where odd."""
        return (
            id_of(_field(report, "value")),
            _int_or_none(_field(report, "partition"), 31),
            _int_or_none(_field(report, "offset"), 63) if self.offsets_known else None,
            _error_name(_field(report, "error")) if with_error else None,
            _latency_us(_field(report, "latency")),
        )

    def close(self) -> None:
        """Commit and write what is left and close both streams (on the reporting thread).

        Raises JournalError, after writing all it could, when any report was not written.
        """
        self.commit()
        self._stop.set()
        self._thread.join()
        self.flush()
        self._sends.close()
        self._acks.close()
        self._note(self._acks.error or self._sends.error)
        if self.error is not None:
            kept = sum(len(group[0]) for group in self.undecodable)
            raise JournalError(
                f"the journal of {self.run_dir} is incomplete: {self.error} "
                f"({self.unwritten} delivery reports not written, {kept} kept undecoded)"
            )


def close_journal(journal: AckJournal) -> str | None:
    """Close `journal`; its error as text (None when every report was written). Never raises:
    it runs in `finally`, where the workload's own exception must survive."""
    try:
        journal.close()
    except Exception as exc:
        error = str(exc) if isinstance(exc, JournalError) else f"{type(exc).__name__}: {exc}"
        log.error("journal incomplete: %s", error)
        return error
    return None


def _ack_batch(status: str, ack_ns: np.ndarray, *columns: Any) -> pa.RecordBatch:
    """The ACK_SCHEMA batch of reports all of `status`, committed at `ack_ns`, given their msg_id,
    partition, offset, error and latency_us columns (Arrow arrays, or Python sequences that
    Arrow converts to the schema's types)."""
    msg_id, partition, offset, error, latency = columns
    status_column = pa.repeat(pa.scalar(status), len(ack_ns))
    return pa.record_batch(
        [msg_id, status_column, partition, offset, error, pa.array(ack_ns // 1000), latency],
        schema=ACK_SCHEMA,
    )


def _take(reports: list[Report]) -> Sequence[Report]:
    """The reports of a list that must keep its identity, which is left empty."""
    if not reports:
        return ()
    taken = reports[:]
    reports.clear()
    return taken


def _field(report: Report, name: str) -> Any:
    """`report.<name>()`, or None when the report cannot give it."""
    try:
        return getattr(report, name)()
    except Exception:
        return None


def _fields(reports: list[Report], name: str) -> list[Any]:
    """`report.<name>()` of every report, at C speed when they share one class (they do)."""
    try:
        return list(map(getattr(type(reports[0]), name), reports))
    except Exception:  # mixed classes: slower, still right (an odd report raises again)
        return list(map(methodcaller(name), reports))


def _int_column(values: list[Any], type_: pa.DataType) -> pa.Array:
    """Integers as an Arrow column; None and negative values (unknown) become null."""
    try:
        numbers = np.asarray(values, dtype=type_.to_pandas_dtype())
        return pa.array(numbers, mask=numbers < 0)
    except TypeError:  # a None among them: Arrow reads it as null, slightly slower
        column = pa.array(values, type_)
        return pc.if_else(pc.less(column, 0), pa.scalar(None, type_), column)


def _int_or_none(value: Any, bits: int) -> int | None:
    """`value` when it is a non-negative int that fits in `bits`, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << bits:
        return value
    return None


def _latency_us(latency: Any) -> int | None:
    """librdkafka's latency (seconds) in µs; None when unknown or not a plausible number."""
    if isinstance(latency, int | float) and 0 <= latency < 1e9:
        return int(latency * 1e6)
    return None


def _error_name(error: Any) -> str:
    """The error's name (e.g. `_MSG_TIMED_OUT`), or its text when it has none."""
    if error is None:  # the callback was given an error the report itself does not carry
        return "unknown error"
    try:
        return str(error.name())
    except Exception:
        try:
            return f"unnamed error: {error!r}"
        except Exception:
            return "unnamed error"


def id_of(value: Any) -> int | None:
    """The message id at the head of one value; None when the value is not ours."""
    if not isinstance(value, bytes | bytearray):
        return None
    head, colon, _ = bytes(value[: ID_DIGITS + 4]).partition(b":")
    return int(head) if colon and head.isdigit() and len(head) <= 18 else None


def parse_ids(values: list[bytes | None]) -> pa.Array:
    """Message ids from record values; null for a value that is not ours (never expected).

    Fast path: the harness's values all have one length and start with 15 digits and ':',
    so the ids come from one numpy pass over the joined bytes.
    """
    n = len(values)
    if n and values[0] is not None and len(values[0]) > ID_DIGITS:
        try:
            joined = b"".join(cast("list[bytes]", values))
        except TypeError:  # a None among them
            joined = b""
        if len(joined) == n * len(values[0]):
            grid = np.frombuffer(joined, np.uint8).reshape(n, -1)
            digits = grid[:, :ID_DIGITS] - np.uint8(48)  # wraps around below '0'
            if (digits <= 9).all() and (grid[:, ID_DIGITS] == ord(":")).all():
                ids = np.zeros(n, dtype=np.int64)
                for column in range(ID_DIGITS):  # 15 vector steps beat a per-value int()
                    ids = ids * 10 + digits[:, column]
                return pa.array(ids)
    return pa.array([id_of(value) for value in values], pa.int64())
