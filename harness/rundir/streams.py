"""The Arrow IPC stream files of the harness's journals (producer, consumer and transaction
journals), written and read the one way: `StreamWriter` appends batches (`write`) or rows
(`append`), each in the OS's hands when the call returns, so a SIGKILL of the writer loses no
written batch; `read_stream` reads every complete batch and nothing of a torn tail,
`iter_stream` the same batch by batch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import ipc


class StreamWriter:
    """An Arrow IPC stream file for `schema`, opened (truncated) at once, appended batch by
    batch and closed once.

    pa.OSFile is unbuffered: a batch reaches the OS when `write` returns, with nothing left to
    flush. The first failure to write or close is kept in `error`; a failed write may leave a
    torn message, after which nothing appended would be readable, so every later write is a
    no-op that answers False. Opening raises (there is no journal to keep an error in).
    """

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.schema = path, schema
        self.error: str | None = None
        self._writer = ipc.new_stream(pa.OSFile(str(path), "wb"), schema)
        self._closed = False

    def write(self, batch: pa.RecordBatch) -> bool:
        """Append `batch`; False (and `error` set, if this write failed) when it was not
        written: after an earlier failure, or once closed."""
        if self.error is not None or self._closed:
            return False
        try:
            self._writer.write_batch(batch)
        except Exception as exc:
            self.error = f"writing {self.path.name} failed: {type(exc).__name__}: {exc}"
            return False
        return True

    def append(self, **columns: Any) -> bool:
        """Append the rows `columns` give, as one batch of the schema: a list or tuple is a
        column (all of one length), any other value that column on every row (only such values:
        one row). Zero rows write nothing and answer True; else as `write`."""
        lengths = [len(v) for v in columns.values() if isinstance(v, list | tuple)]
        rows = max(lengths, default=1)
        if not rows:
            return True
        data = {k: v if isinstance(v, list | tuple) else [v] * rows for k, v in columns.items()}
        return self.write(pa.record_batch(data, schema=self.schema))

    def close(self) -> str | None:
        """Close the file once; a failure to close is kept in `error` like a write's (the first
        error stays). Returns `error`."""
        if not self._closed:
            self._closed = True
            try:
                self._writer.close()
            except Exception as exc:
                self.error = self.error or f"closing {self.path.name} failed: {exc}"
        return self.error


def stream_to_parquet(
    stream: Path, schema: pa.Schema, parquet: Path, sort_by: str | None = None
) -> pa.Table | None:
    """Write the stream at `stream` (read as read_stream does, sorted by `sort_by` if given) to
    the Parquet file `parquet`, and return it; None, writing nothing, when there is no stream."""
    if not stream.exists():
        return None
    table = read_stream(stream, schema)
    if sort_by is not None:
        table = table.sort_by(sort_by)
    pq.write_table(table, parquet)
    return table


def read_stream(path: Path, schema: pa.Schema) -> pa.Table:
    """Every complete batch of the stream at `path`, as a table of `schema`.

    A writer killed mid-batch leaves a torn last batch, which is not read; a file that is
    missing, empty or whose header never reached the disk reads as no rows."""
    batches: list[pa.RecordBatch] = []
    if not path.exists() or not path.stat().st_size:
        return pa.Table.from_batches([], schema=schema)
    with contextlib.suppress(pa.ArrowInvalid, OSError):
        for batch in ipc.open_stream(pa.memory_map(str(path))):
            batches.append(batch)
    return pa.Table.from_batches(batches, schema=schema)


def iter_stream(path: Path, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches `read_stream` reads, one at a time, for a journal too large to hold whole.

    The file is read, not memory-mapped, so what stays resident is the batch being used. A
    torn last batch ends the iteration, as it ends `read_stream`; a stream of another schema
    raises pa.ArrowInvalid, as `read_stream` does."""
    if not path.exists() or not path.stat().st_size:
        return
    with pa.OSFile(str(path)) as source:
        try:
            reader = ipc.open_stream(source)
        except (pa.ArrowInvalid, OSError):  # the header never reached the disk
            return
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError):  # a torn tail: the writer died mid-batch
                return
            if not batch.schema.equals(schema):
                raise pa.ArrowInvalid(f"{path.name} holds {batch.schema}, not {schema}")
            yield batch
