"""Crash-safe records of a run: the send/ack journal and the event log.

Both are appended while the run goes on and flushed at least every ~0.2 s, so a SIGKILL of
the harness loses at most the last fraction of a second. The journal is Arrow IPC streams
(a truncated last batch is simply not read); `finalize` turns them into acked.parquet.

The hot path stays tiny: a delivery callback appends the message object to a list, and the
thread that serves delivery reports hands that list over with `commit()` after each poll,
stamped once with the time (the ack time of every report it holds). The writer thread reads
the fields column-wise. Sends are not journalled one by one: ids are sequential and keys
assigned round-robin, so key and key sequence follow from the id; the writer checkpoints the
highest id sent every flush, and a send's time is its ack time minus librdkafka's measured
latency (interpolated from the checkpoints for sends without a report).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from operator import methodcaller
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from harness import rundir
from harness.rundir import ACK_SCHEMA, ACKED_SCHEMA, CHECKPOINT_SCHEMA

log = logging.getLogger("kafka_chaos.journal")


def now_us() -> int:
    """Wall-clock time as int64 epoch microseconds."""
    return time.time_ns() // 1000


def key_of(key_index: int) -> str:
    """The record key of the `key_index`-th key."""
    return f"k{key_index}"


class EventLog:
    """events.jsonl: one JSON object a line, each flushed as it is written (thread-safe)."""

    def __init__(self, path: Path):
        self.path = path
        self._file = path.open("a", buffering=1)
        self._lock = threading.Lock()

    def write(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append an event with `ts_us` (now unless given) and `type`; return it."""
        event = {"ts_us": fields.pop("ts_us", None) or now_us(), "type": type_, **fields}
        line = json.dumps(event, default=str)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Report(Protocol):
    """A delivery report: confluent_kafka.Message as the delivery callback receives it."""

    def value(self) -> bytes | None: ...
    def error(self) -> Any: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def latency(self) -> float | None: ...


# A committed page: (time_ns of the commit, reports without error, reports with an error).
Page = tuple[int, list[Report], list[Report]]
ID_DIGITS = 15  # values start with the id zero-padded to 15 digits (see recorder.encode_value)


class AckJournal:
    """Delivery reports and send checkpoints, written by a background thread every 0.2 s.

    The producer sets `sent_upto` (ids below it were handed to the client). Its delivery
    callback appends each report to `delivered` (no error) or `undelivered`, and right after
    every poll/flush the same thread calls `commit()`. `classify` maps an error to a status.
    """

    FLUSH_INTERVAL_S = 0.2

    def __init__(self, run_dir: Path, keys: int, classify: Callable[[Any], str]):
        (run_dir / rundir.JOURNAL_META).write_text(json.dumps({"keys": keys}))
        self.sent_upto = 0
        self.counts = {"ok": 0, "failed": 0, "indeterminate": 0}
        self._classify = classify
        self.offsets_known = True  # False: record no offsets (acks=0, see Recorder)
        # Owned by the thread serving delivery reports; the lists keep their identity so the
        # callback can bind their append once.
        self.delivered: list[Report] = []
        self.undelivered: list[Report] = []
        self._pages: deque[Page] = deque()  # committed, waiting for the writer
        self._last_checkpoint = -1
        self._checkpoints = ipc.new_stream(
            pa.OSFile(str(run_dir / rundir.JOURNAL_SENDS), "wb"), CHECKPOINT_SCHEMA
        )
        self._acks = ipc.new_stream(pa.OSFile(str(run_dir / rundir.JOURNAL_ACKS), "wb"), ACK_SCHEMA)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ack-journal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.FLUSH_INTERVAL_S):
            try:
                self.flush()
            except Exception:  # keep journalling: one bad batch must not end the record
                log.exception("journal flush failed")

    def flush(self) -> None:
        """Write the send checkpoint and every queued report (each batch hits the page cache)."""
        with self._lock:
            sent = self.sent_upto
            if sent != self._last_checkpoint:
                self._checkpoints.write_batch(
                    pa.record_batch(
                        [pa.array([sent], pa.int64()), pa.array([now_us()], pa.int64())],
                        schema=CHECKPOINT_SCHEMA,
                    )
                )
                self._last_checkpoint = sent
            pages = []
            while self._pages:
                pages.append(self._pages.popleft())
            if pages:
                for batch in self._decode(pages):
                    self._acks.write_batch(batch)

    def commit(self, now_ns: int | None = None) -> None:
        """Hand the reports served since the last commit to the writer, stamped `now_ns`.

        Call it on the thread that runs the delivery callback, right after poll/flush
        returns: every report in the page was served before that instant.
        """
        if self.delivered or self.undelivered:
            stamp = now_ns if now_ns is not None else time.time_ns()
            self._pages.append((stamp, self.delivered[:], self.undelivered[:]))
            self.delivered.clear()
            self.undelivered.clear()

    def _decode(self, pages: list[Page]) -> list[pa.RecordBatch]:
        """Record batches for the pages: one for the reports without error, one with."""
        batches = []
        for column in (1, 2):
            stamps = [page[0] for page in pages]
            counts = [len(page[column]) for page in pages]
            reports = [report for page in pages for report in page[column]]
            if reports:
                ack_ns = np.repeat(np.asarray(stamps, dtype=np.int64), counts)
                batches.append(self._batch(reports, ack_ns, with_errors=column == 2))
        return batches

    def _batch(
        self, reports: list[Report], ack_ns: np.ndarray, with_errors: bool
    ) -> pa.RecordBatch:
        n = len(reports)
        msg_ids = parse_ids(_fields(reports, "value"))
        if with_errors:
            errors = _fields(reports, "error")
            status = pa.array([self._classify(e) for e in errors], pa.string())
            error = pa.array([e.name() for e in errors], pa.string())
            for name, count in zip(*pc.value_counts(status).flatten(), strict=True):
                self.counts[name.as_py()] += count.as_py()
        else:
            status = pa.repeat(pa.scalar("ok"), n)
            error = pa.nulls(n, pa.string())
            self.counts["ok"] += n
        partitions = np.asarray(_fields(reports, "partition"), dtype=np.int32)
        partition = pa.array(partitions, mask=partitions < 0)
        if self.offsets_known:
            offsets = np.asarray(_fields(reports, "offset"), dtype=np.int64)
            offset = pa.array(offsets, mask=offsets < 0)
        else:
            offset = pa.nulls(n, pa.int64())
        # librdkafka gives no latency (None) for a message that never left the client.
        latencies = np.asarray(_fields(reports, "latency"), dtype=np.float64)
        unknown = np.isnan(latencies)
        latency = pa.array(np.where(unknown, 0, latencies * 1e6).astype(np.int64), mask=unknown)
        return pa.record_batch(
            [msg_ids, status, partition, offset, error, pa.array(ack_ns // 1000), latency],
            schema=ACK_SCHEMA,
        )

    def close(self) -> None:
        """Commit and write what is left, close both streams (on the reporting thread)."""
        self.commit()
        self._stop.set()
        self._thread.join()
        self.flush()
        self._checkpoints.close()
        self._acks.close()


def _fields(reports: list[Report], name: str) -> list[Any]:
    """`report.<name>()` of every report, at C speed when they share one class (they do)."""
    try:
        return list(map(getattr(type(reports[0]), name), reports))
    except TypeError:  # mixed classes: slower, still right
        return list(map(methodcaller(name), reports))


def parse_ids(values: list[bytes | None]) -> pa.Array:
    """Message ids from record values; null for a value that is not ours (never expected).

    Fast path: the harness's values all have one length and start with 15 digits and ':',
    so the ids come from one numpy pass over the joined bytes.
    """
    n = len(values)
    if n and values[0] is not None and len(values[0]) > ID_DIGITS:
        try:
            joined = b"".join(values)
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
    texts = pa.array(values, pa.binary()).cast(pa.string())
    return pc.struct_field(pc.extract_regex(texts, r"^(?P<id>\d+):"), 0).cast(pa.int64())


def read_stream(path: Path, schema: pa.Schema) -> pa.Table:
    """Every complete batch of an Arrow stream, tolerating a truncated tail (crashed writer)."""
    batches = []
    if not path.exists() or not path.stat().st_size:
        return pa.Table.from_batches([], schema=schema)
    with contextlib.suppress(pa.ArrowInvalid, OSError):
        reader = ipc.open_stream(pa.memory_map(str(path)))
        for batch in reader:
            batches.append(batch)
    return pa.Table.from_batches(batches, schema=schema)


def finalize(run_dir: Path) -> pa.Table:
    """Build acked.parquet from the journal; sends with no outcome become indeterminate."""
    keys = json.loads((run_dir / rundir.JOURNAL_META).read_text())["keys"]
    checkpoints = read_stream(run_dir / rundir.JOURNAL_SENDS, CHECKPOINT_SCHEMA)
    acks = read_stream(run_dir / rundir.JOURNAL_ACKS, ACK_SCHEMA)  # one delivery report per message
    sent = max(_max_or(checkpoints["sent_upto"], 0), _max_or(acks["msg_id"], -1) + 1)
    ids = np.arange(sent, dtype=np.int64)
    sends = pa.table(
        {
            "msg_id": ids,
            "key": pa.array([key_of(i) for i in range(keys)]).take(pa.array(ids % keys)),
            "key_seq": ids // keys,
            "estimated_send_us": _interpolated_send_times(ids, checkpoints),
        }
    )
    joined = sends.join(acks, keys="msg_id", join_type="left outer").sort_by("msg_id")
    no_report = pc.is_null(joined["status"])
    send_ts = pc.if_else(
        pc.is_null(joined["latency_us"]),
        joined["estimated_send_us"],
        pc.subtract(joined["ack_ts_us"], joined["latency_us"]),
    )
    table = pa.table({
        "msg_id": joined["msg_id"], "key": joined["key"], "key_seq": joined["key_seq"],
        "status": pc.fill_null(joined["status"], "indeterminate"),
        "partition": joined["partition"], "offset": joined["offset"],
        "error": pc.if_else(no_report, pa.scalar(rundir.NO_REPORT), joined["error"]),
        "send_ts_us": send_ts, "ack_ts_us": joined["ack_ts_us"],
    }, schema=ACKED_SCHEMA)  # fmt: skip
    pq.write_table(table, run_dir / rundir.ACKED)
    return table


def _max_or(column: pa.ChunkedArray, default: int) -> int:
    value = pc.max(column).as_py() if len(column) else None
    return default if value is None else value


def _interpolated_send_times(ids: np.ndarray, checkpoints: pa.Table) -> np.ndarray:
    """Send time estimates from the checkpoints (id count → time), for sends with no report."""
    if not len(ids):
        return np.array([], dtype=np.int64)
    upto = checkpoints["sent_upto"].to_numpy()
    ts = checkpoints["ts_us"].to_numpy()
    if not len(upto):
        return np.zeros(len(ids), dtype=np.int64)
    return np.interp(ids, upto, ts).astype(np.int64)
