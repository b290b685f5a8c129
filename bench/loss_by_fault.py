"""Where a run's missing acknowledgements came from: each acknowledged message absent from the
read-back, grouped by the last fault started before it was sent, and by partition.

    python bench/loss_by_fault.py RUN_DIR

Prints one line per (fault, partition) with the count, then the total. Reads acked.parquet,
readback.parquet and events.jsonl; one pass each, in memory (an hour's soak of 18M
acknowledgements takes ~1 GB and ~20 s).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq


def main(run_dir: Path) -> None:
    acked = pq.read_table(
        run_dir / "acked.parquet", columns=["msg_id", "status", "partition", "send_ts_us"]
    )
    acked = acked.filter(pc.equal(acked["status"], "ok"))
    read = pq.read_table(run_dir / "readback.parquet", columns=["msg_id"])["msg_id"].drop_null()
    missing = acked.filter(pc.invert(pc.is_in(acked["msg_id"], value_set=pc.unique(read))))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    faults = [
        (e["ts_us"], e["fault"], e.get("hosts")) for e in events if e["type"] == "fault_start"
    ]
    first = int(pc.min(acked["send_ts_us"]).as_py() or 0)
    starts = np.array([ts for ts, _, _ in faults], dtype=np.int64)
    which = np.searchsorted(starts, missing["send_ts_us"].to_numpy(), side="right") - 1
    counts = Counter(zip(which.tolist(), missing["partition"].to_numpy().tolist(), strict=True))
    for (index, partition), count in sorted(counts.items()):
        if index < 0:
            print(f"before any fault, p{partition}: {count}")
            continue
        ts, fault, hosts = faults[index]
        at, on = (ts - first) / 1e6, ",".join(hosts or [])
        print(f"fault {index + 1} ({fault} {on}, t={at:.0f} s), p{partition}: {count}")
    print(f"total missing: {missing.num_rows} of {acked.num_rows} acknowledged")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "acked.parquet").is_file():
        sys.exit(
            "usage: python bench/loss_by_fault.py RUN_DIR (a run directory with acked.parquet)"
        )
    main(Path(sys.argv[1]))
