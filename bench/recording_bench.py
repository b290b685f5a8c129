"""finalize's peak memory and time over journals of growing size: the point is a flat peak RSS.

For each size N a journal of N sends is written to disk with the recorder's own stream writer
(journal-meta.json, the send checkpoints, the delivery reports batch by batch as a 100,000
msg/s recorder flushes them every 0.2 s): most reports ok, a few failed or indeterminate,
a few sends without a report, a few reports arriving far later than their send (across id
ranges) and a few whose value names no send. Then finalize runs in a child process, alone,
and its peak RSS (wait4's ru_maxrss), its wall time and acked.parquet's size are printed.
No Docker, no Kafka. The read-back's memory needs a real broker: not measured here.

    .venv/bin/python bench/recording_bench.py [N ...] [--chunk-ids 1000000] [--dir DIR]
        [--baseline FILE]

N defaults to 1000000 5000000 20000000. --baseline also runs the finalize of another
version of harness/workload/finalize.py (`git show REV:harness/workload/finalize.py > FILE`)
on the same journals, for comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa

from harness.rundir import layout
from harness.rundir.records import ACK_SCHEMA, CHECKPOINT_SCHEMA, STATUSES
from harness.rundir.streams import StreamWriter
from harness.workload.journal import SOLE, write_meta

SIZES: Final = (1_000_000, 5_000_000, 20_000_000)
FLUSH_SENDS: Final = 20_000  # sends per journal flush: 0.2 s at 100,000 msg/s
KEYS: Final = 1_000
T0_US: Final = 1_700_000_000_000_000
LATE_SHARE, LATE_FLUSHES = 0.01, 100  # reports that come 2 M sends after their send
UNREPORTED_SHARE, ORPHANS_PER_FLUSH = 0.002, 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES), metavar="N")
    parser.add_argument("--chunk-ids", type=int, default=None, help="finalize's chunk_ids")
    parser.add_argument("--dir", type=Path, default=None, help="where the journals go")
    parser.add_argument("--baseline", type=Path, default=None, help="another finalize.py")
    parser.add_argument("--child", nargs=2, metavar=("FINALIZE_PY", "RUN_DIR"), help="internal")
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), args.chunk_ids)
        return
    finalizers = {"finalize": Path(__file__).parents[1] / "harness/workload/finalize.py"}
    if args.baseline:
        finalizers["baseline"] = args.baseline
    print(f"idle child (python + pyarrow imported): peak RSS {idle_rss_mb():.0f} MB")
    print(
        f"{'N':>12} {'version':>9} {'journal MB':>11} {'seconds':>8} {'peak RSS MB':>12} "
        f"{'acked MB':>9} {'rows':>12}"
    )
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="recording-bench-", dir=args.dir) as folder:
            run_dir = Path(folder)
            write_journal(run_dir, n, np.random.default_rng(n))
            journal_mb = sum(p.stat().st_size for p in run_dir.glob(layout.JOURNAL_GLOB)) / 1e6
            for name, source in finalizers.items():
                seconds, rss_mb, rows = measure(source, run_dir, args.chunk_ids)
                acked_mb = (run_dir / layout.ACKED).stat().st_size / 1e6
                print(
                    f"{n:>12,} {name:>9} {journal_mb:>11,.0f} {seconds:>8.1f} "
                    f"{rss_mb:>12,.0f} {acked_mb:>9,.0f} {rows:>12,}",
                    flush=True,
                )
                (run_dir / layout.ACKED).unlink()


def write_journal(run_dir: Path, sends: int, rng: np.random.Generator) -> None:
    """A one-producer journal of `sends` sends, written flush by flush as the recorder does."""
    write_meta(run_dir, SOLE, KEYS)
    checkpoints = StreamWriter(run_dir / layout.JOURNAL_SENDS, CHECKPOINT_SCHEMA)
    acks = StreamWriter(run_dir / layout.JOURNAL_ACKS, ACK_SCHEMA)
    for flush, batch in enumerate(report_batches(sends, rng)):
        if flush * FLUSH_SENDS < sends:  # the checkpoint is written when it moved
            upto = min(sends, (flush + 1) * FLUSH_SENDS)
            now = T0_US + flush * 200_000
            checkpoints.write(pa.record_batch([[upto], [now]], schema=CHECKPOINT_SCHEMA))
        assert acks.write(batch)
    checkpoints.close()
    acks.close()
    assert checkpoints.error is None and acks.error is None


def report_batches(sends: int, rng: np.random.Generator) -> Iterator[pa.RecordBatch]:
    """The delivery reports of `sends` sends, a flush's worth at a time; late ones held back
    LATE_FLUSHES flushes, some sends never reported, some reports naming no send."""
    late: list[np.ndarray] = []
    flushes = -(-sends // FLUSH_SENDS)
    for flush in range(flushes + LATE_FLUSHES):
        ids = np.arange(flush * FLUSH_SENDS, min(sends, (flush + 1) * FLUSH_SENDS))
        ids = ids[rng.random(len(ids)) >= UNREPORTED_SHARE]
        held = rng.random(len(ids)) < LATE_SHARE
        if flush < flushes:
            late.append(ids[held])
        due = late.pop(0) if late and (len(late) > LATE_FLUSHES or flush >= flushes) else ids[:0]
        yield reports(np.concatenate([ids[~held], due]), flush, rng)


def reports(ids: np.ndarray, flush: int, rng: np.random.Generator) -> pa.RecordBatch:
    """One flush's reports for `ids` (plus ORPHANS_PER_FLUSH naming no send)."""
    n = len(ids) + ORPHANS_PER_FLUSH
    named = np.arange(n) < len(ids)
    msg_id = pa.array(np.concatenate([ids, np.zeros(ORPHANS_PER_FLUSH, np.int64)]), mask=~named)
    status = rng.choice(STATUSES, n, p=[0.98, 0.01, 0.01])
    ok = status == STATUSES[0]
    latency = rng.integers(1_000, 50_000, n)
    return pa.record_batch(
        [
            msg_id,
            pa.array(status),
            pa.array(rng.integers(0, 6, n).astype(np.int32)),
            pa.array(np.arange(n) + flush * FLUSH_SENDS, mask=~ok),
            pa.array(np.where(ok, None, "_MSG_TIMED_OUT"), pa.string()),
            pa.array(np.full(n, T0_US + flush * 200_000)),
            pa.array(latency, mask=rng.random(n) < 0.01),
        ],
        schema=ACK_SCHEMA,
    )


def measure(source: Path, run_dir: Path, chunk_ids: int | None) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, rows) of the finalize in `source` run alone in a child."""
    command = [sys.executable, __file__, "--child", str(source), str(run_dir)]
    if chunk_ids is not None:
        command += ["--chunk-ids", str(chunk_ids)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"finalize failed in the child (exit {process.returncode})")
    result = json.loads(output)
    return result["seconds"], usage.ru_maxrss / 1024, result["rows"]  # ru_maxrss: KB on Linux


def idle_rss_mb() -> float:
    """The peak RSS of a child that only imports what finalize imports: the floor."""
    code = "import numpy, pyarrow, pyarrow.parquet, pyarrow.compute"
    process = subprocess.Popen([sys.executable, "-c", code])
    _, _, usage = os.wait4(process.pid, 0)
    return usage.ru_maxrss / 1024


def child(source: Path, run_dir: Path, chunk_ids: int | None) -> None:
    """Run the finalize of `source` on `run_dir`; print its time and rows as JSON."""
    spec = importlib.util.spec_from_file_location("finalize_under_test", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    started = time.monotonic()
    result = module.finalize(run_dir) if chunk_ids is None else module.finalize(run_dir, chunk_ids)
    rows = result if isinstance(result, int) else result.num_rows  # the whole-table version
    print(json.dumps({"seconds": time.monotonic() - started, "rows": rows}))


if __name__ == "__main__":
    main()
