"""The Arrow IPC stream files of the harness's journals (producer, consumer and transaction
journals), written and read the one way: `StreamWriter` appends batches, each in the OS's hands
when `write` returns, so a SIGKILL of the writer loses no written batch; `read_stream`
reads every complete batch and nothing of a torn tail."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyarrow as pa
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
        self.path = path
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

    def close(self) -> None:
        """Close the file once; a failure to close is kept in `error` like a write's (the first
        error stays)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
        except Exception as exc:
            self.error = self.error or f"closing {self.path.name} failed: {exc}"


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
