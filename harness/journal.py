"""Crash-safe records of a run: the send/ack journal and the event log.

Both are appended while the run goes on and flushed at least every ~0.2 s, so a SIGKILL of
the harness loses at most the last fraction of a second. The journal is Arrow IPC streams
(a truncated last batch is simply not read); `finalize` turns them into acked.parquet.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

SENDS_FILE = "journal-sends.arrows"
ACKS_FILE = "journal-acks.arrows"

SEND_SCHEMA = pa.schema(
    [
        ("msg_id", pa.int64()),
        ("key", pa.string()),
        ("key_seq", pa.int64()),
        ("send_ts_us", pa.int64()),
    ]
)
ACK_SCHEMA = pa.schema(
    [
        ("msg_id", pa.int64()),
        ("status", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error", pa.string()),
        ("ack_ts_us", pa.int64()),
    ]
)
ACKED_SCHEMA = pa.schema(
    [
        ("msg_id", pa.int64()),
        ("key", pa.string()),
        ("key_seq", pa.int64()),
        ("status", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error", pa.string()),
        ("send_ts_us", pa.int64()),
        ("ack_ts_us", pa.int64()),
    ]
)


def now_us() -> int:
    """Wall-clock time as int64 epoch microseconds."""
    return time.time_ns() // 1000


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


class AckJournal:
    """Sends and delivery outcomes, queued by the hot path and written by a background thread.

    `sent` and `acked` only append tuples to deques (cheap, GIL-atomic), so delivery callbacks
    never touch the disk.
    """

    FLUSH_INTERVAL_S = 0.2

    def __init__(self, run_dir: Path):
        self._sends: deque[tuple] = deque()
        self._acks: deque[tuple] = deque()
        self._send_writer = ipc.new_stream(pa.OSFile(str(run_dir / SENDS_FILE), "wb"), SEND_SCHEMA)
        self._ack_writer = ipc.new_stream(pa.OSFile(str(run_dir / ACKS_FILE), "wb"), ACK_SCHEMA)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ack-journal", daemon=True)
        self._thread.start()

    def sent(self, msg_id: int, key: str, key_seq: int, send_ts_us: int) -> None:
        self._sends.append((msg_id, key, key_seq, send_ts_us))

    def acked(
        self,
        msg_id: int,
        status: str,
        partition: int | None,
        offset: int | None,
        error: str | None,
        ack_ts_us: int,
    ) -> None:
        self._acks.append((msg_id, status, partition, offset, error, ack_ts_us))

    def _run(self) -> None:
        while not self._stop.wait(self.FLUSH_INTERVAL_S):
            self.flush()
        self.flush()

    def flush(self) -> None:
        """Write everything queued so far as one batch per stream."""
        _drain(self._sends, self._send_writer, SEND_SCHEMA)
        _drain(self._acks, self._ack_writer, ACK_SCHEMA)

    def close(self) -> None:
        """Write what is left and close both streams."""
        self._stop.set()
        self._thread.join()
        self._send_writer.close()
        self._ack_writer.close()


def _drain(queue: deque[tuple], writer: ipc.RecordBatchStreamWriter, schema: pa.Schema) -> None:
    rows = []
    while queue:
        rows.append(queue.popleft())
    if not rows:
        return
    columns = list(zip(*rows, strict=True))
    writer.write_batch(
        pa.record_batch(
            [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)],
            schema=schema,
        )
    )
    # The OS file has no user-space buffer: each batch reaches the page cache here.


def read_stream(path: Path, schema: pa.Schema) -> pa.Table:
    """Every complete batch of an Arrow stream, tolerating a truncated tail (crashed writer)."""
    batches = []
    if path.exists() and path.stat().st_size:
        with (
            contextlib.suppress(pa.ArrowInvalid, OSError),
            ipc.open_stream(pa.memory_map(str(path))) as reader,
        ):
            for batch in reader:
                batches.append(batch)
    return pa.Table.from_batches(batches, schema=schema)


def finalize(run_dir: Path) -> pa.Table:
    """Build acked.parquet from the journal; sends with no outcome become indeterminate."""
    sends = read_stream(run_dir / SENDS_FILE, SEND_SCHEMA)
    acks = read_stream(run_dir / ACKS_FILE, ACK_SCHEMA)
    # A send whose delivery report the crash lost may still have an ack row: keep every
    # ack, and acks whose send row was lost keep what they know.
    joined = sends.join(acks, keys="msg_id", join_type="full outer")
    status = pc.fill_null(joined["status"], "indeterminate")
    error = pc.if_else(
        pc.is_null(joined["status"]), pa.scalar("no delivery report"), joined["error"]
    )
    table = pa.table(
        {
            "msg_id": joined["msg_id"],
            "key": joined["key"],
            "key_seq": joined["key_seq"],
            "status": status,
            "partition": joined["partition"],
            "offset": joined["offset"],
            "error": error,
            "send_ts_us": pc.fill_null(joined["send_ts_us"], joined["ack_ts_us"]),
            "ack_ts_us": joined["ack_ts_us"],
        },
        schema=ACKED_SCHEMA,
    ).sort_by("msg_id")
    pq.write_table(table, run_dir / "acked.parquet")
    return table
