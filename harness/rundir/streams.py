"""Reading the Arrow IPC stream files the harness's journals write (producer, consumer and
transaction journals), the one way: every complete batch, and nothing of a torn tail."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyarrow as pa
from pyarrow import ipc


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
