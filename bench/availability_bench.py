"""Time analysis.checks.availability on one synthetic run directory; print one line with the figure.

    flock /tmp/docker.lock .venv/bin/python bench/availability_bench.py [--rows 1000000]

The run: --rows sends at 1,000/s over 6 partitions for rows/1000 seconds; partition 0
acknowledges nothing for 10 s in the middle (its sends there failed or are indeterminate), a
kill is healed at the end of that stall, and the workload window spans the sends. Written with
pyarrow to a temporary directory (removed after); only availability_of() is timed: the median
of --repeat calls after one untimed warm-up call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.checks.availability import availability_of
from analysis.model.evidence import RunEvidence
from harness.rundir import layout
from harness.rundir.records import ACKED_SCHEMA

PARTITIONS = 6
RATE = 1000  # sends per second
STALL_S = 10.0
T0_US = 1_700_000_000_000_000


def write_run(run_dir: Path, rows: int) -> None:
    """acked.parquet and events.jsonl of the synthetic run described in the module docstring."""
    ids = np.arange(rows, dtype=np.int64)
    send_us = T0_US + ids * (1_000_000 // RATE)
    partition = (ids % PARTITIONS).astype(np.int32)
    middle_us = T0_US + rows * (1_000_000 // RATE) // 2
    stalled = (partition == 0) & (send_us >= middle_us) & (send_us < middle_us + STALL_S * 1e6)
    status = np.where(stalled, np.where(ids % 2 == 0, "failed", "indeterminate"), "ok")
    ok = status == "ok"
    table = pa.table(
        {
            "msg_id": ids,
            "key": pa.array([f"k{k}" for k in range(PARTITIONS)]).take(pa.array(partition)),
            "key_seq": ids // PARTITIONS,
            "status": status,
            "partition": partition,
            "offset": pa.array(np.where(ok, ids // PARTITIONS, 0), mask=~ok),
            "error": pa.array(np.where(ok, "", "timed out"), mask=ok),
            "send_ts_us": send_us,
            "ack_ts_us": pa.array(send_us + 3000, mask=status == "indeterminate"),
        },
        schema=ACKED_SCHEMA,
    )
    pq.write_table(table, run_dir / layout.ACKED)
    end_us = int(send_us[-1]) + 5000
    events = [
        {"type": "phase", "phase": "workload-start", "ts_us": T0_US},
        {"type": "fault_end", "fault_id": 1, "fault": "kill", "ts_us": middle_us + STALL_S * 1e6},
        {"type": "phase", "phase": "workload-end", "ts_us": end_us},
    ]
    (run_dir / layout.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="availability-bench-") as tmp:
        run_dir = Path(tmp)
        write_run(run_dir, args.rows)
        availability = availability_of(RunEvidence.read(run_dir))  # warm-up: imports, page cache
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            availability = availability_of(RunEvidence.read(run_dir))
            seconds.append(time.perf_counter() - started)
    worst = availability.longest_partition_gap
    assert worst is not None
    print(
        f"availability of {args.rows:,} acked rows: {statistics.median(seconds):.3f} s "
        f"(median of {args.repeat}; longest stall p{worst.partition} "
        f"{worst.longest_gap.seconds:.1f} s, {availability.failed:,} failed)"
    )


if __name__ == "__main__":
    main()
