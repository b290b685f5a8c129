"""acked.parquet as the tests read it: `finalize` writes the file and returns its row count."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.rundir import layout
from harness.workload.finalize import CHUNK_IDS, finalize


def finalized(run_dir: Path, chunk_ids: int = CHUNK_IDS) -> pa.Table:
    """Finalize `run_dir` and read back the acked.parquet written, whose rows must number
    what `finalize` returned."""
    rows = finalize(run_dir, chunk_ids)
    table = pq.read_table(run_dir / layout.ACKED)
    assert table.num_rows == rows
    return table
