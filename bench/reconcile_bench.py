"""Time analysis.spark.reconcile on synthetic runs of growing size and print rows/s per size,
beside a single-process Arrow reference that answers the three core questions on the same files.

    .venv/bin/python bench/reconcile_bench.py [--sizes 1000000,10000000,30000000] [--master M]

Each size is N acked rows (split over --runs runs) and about N read-back rows, with roughly
0.1 % of messages in each anomaly class. Data is written in chunks with pyarrow to a temporary
directory, removed after each size; only reconcile() is timed, after an untimed warm-up run.
Specs say acks=all, so the acks=0 send-order proof (an extra search) is not exercised. growth is
seconds over the previous size's seconds. task peak MB is the peak resident memory of one
process running the checker on the size's largest run (what one Spark task's Python worker
needs); the driver collects only each run's facts, so its JVM runs in --driver-memory (1g).
The reference (pyarrow, one process) reads the
same acked and read-back files and counts the acknowledged messages missing, the duplicated
ones and the acknowledged offsets holding another message; the last line is the ratio of the
two at 10M rows. Target: <= 30 s and <= 2x the reference at 10M rows on local[2] (the
project's reconciliation target, as in scale_bench.py).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from analysis.checks.messages import RunInput, check_run
from analysis.model.anomalies import COUNT_NAMES
from analysis.model.results import RunResult
from analysis.spark.reconcile import reconcile, spark_session
from harness.rundir.records import ACKED_SCHEMA, READBACK_SCHEMA

CHUNK_ROWS = 1_000_000
PARTITIONS = 6
KEYS_PER_PARTITION = 100
TAIL_UNSEEN = 60
PHANTOM_BASE = 10**12
T0_US = 1_700_000_000_000_000
TARGET_ROWS, TARGET_S, TARGET_RATIO = 10_000_000, 30.0, 2.0
WARMUP_ROWS = 200_000

# The schemas the harness writes: the fixtures must look like real run directories.
ACKED = ACKED_SCHEMA
READBACK = READBACK_SCHEMA


@dataclass(frozen=True)
class Chunk:
    """Consecutive messages of one run of n: message i sits at offset i // 6 of partition i % 6."""

    i: np.ndarray
    n: int
    partition: np.ndarray
    offset: np.ndarray
    key_seq: np.ndarray
    key: pa.Array
    send_ts_us: np.ndarray

    def marks(self, residue: int, modulus: int = 1000) -> np.ndarray:
        """Messages in the anomaly slice numbered residue."""
        return self.i % modulus == residue


def chunks(n: int) -> Iterator[Chunk]:
    """The messages of a run of n messages, CHUNK_ROWS at a time."""
    for start in range(0, n, CHUNK_ROWS):
        i = np.arange(start, min(start + CHUNK_ROWS, n), dtype=np.int64)
        partition, offset = (i % PARTITIONS).astype(np.int32), i // PARTITIONS
        within = pa.array(offset % KEYS_PER_PARTITION).cast(pa.string())
        key = pc.binary_join_element_wise(
            "p", pa.array(partition).cast(pa.string()), "-k", within, ""
        )
        yield Chunk(
            i=i,
            n=n,
            partition=partition,
            offset=offset,
            key_seq=offset // KEYS_PER_PARTITION,
            key=key,
            send_ts_us=T0_US + i * 10,
        )


def acked_table(c: Chunk) -> pa.Table:
    """acked.parquet rows: 0.1 % failed, 0.1 % indeterminate, 0.1 % acked at a wrong offset."""
    failed, indeterminate = c.marks(1), c.marks(2)
    status = np.where(failed, "failed", np.where(indeterminate, "indeterminate", "ok"))
    offset = np.where(c.marks(7), c.offset + PHANTOM_BASE, c.offset)
    ok = ~failed & ~indeterminate
    send = c.send_ts_us
    columns = {
        "msg_id": c.i,
        "key": c.key,
        "key_seq": c.key_seq,
        "status": status,
        "partition": pa.array(c.partition, mask=failed),
        "offset": pa.array(offset, mask=~ok),
        "error": pa.array(np.where(ok, "", "timed out"), mask=ok),
        "send_ts_us": send,
        "ack_ts_us": pa.array(send + 1000 + (c.i % 97) * 50, mask=~ok),
    }
    return pa.table(columns, schema=ACKED)


def readback_table(c: Chunk) -> pa.Table:
    """readback.parquet rows, one per offset slot, with lost, duplicated, reordered, phantoms."""
    msg_id = c.i.copy()
    failed_slot = c.marks(1) & ~c.marks(1, 10_000)
    msg_id[failed_slot] += 3
    msg_id[c.marks(6)] += PHANTOM_BASE
    key_seq = np.where(c.marks(8), c.key_seq - 5, c.key_seq)
    dropped = c.marks(3) | (c.i >= c.n - TAIL_UNSEEN)
    columns = {
        "msg_id": pa.array(msg_id, mask=c.marks(9, 10_000)),
        "key": c.key,
        "key_seq": key_seq,
        "partition": c.partition,
        "offset": c.offset,
        "ts_us": c.send_ts_us,
    }
    return pa.table(columns, schema=READBACK).filter(pa.array(~dropped))


def write_run(run_dir: Path, n: int, cell: str) -> None:
    """One repetition directory of n messages, written chunk by chunk."""
    run_dir.mkdir(parents=True)
    config = {"acks": "all"}
    spec = {"experiment": "bench", "cell": cell, "repetition": 0, "config": config, "axes": config}
    (run_dir / "spec.json").write_text(json.dumps(spec))
    (run_dir / "events.jsonl").write_text("")
    with (
        pq.ParquetWriter(run_dir / "acked.parquet", ACKED) as acked,
        pq.ParquetWriter(run_dir / "readback.parquet", READBACK) as readback,
    ):
        for c in chunks(n):
            acked.write_table(acked_table(c))
            readback.write_table(readback_table(c))


def write_runs(root: Path, rows: int, runs: int) -> list[Path]:
    """runs repetition directories under root holding rows acked rows in total."""
    dirs = [root / "bench" / "ts" / f"cell-{r}" / "0" for r in range(runs)]
    for r, run_dir in enumerate(dirs):
        write_run(run_dir, rows // runs + (r < rows % runs), run_dir.parent.name)
    return dirs


def bench_session(
    master: str, driver_memory: str, conf: dict[str, str] | None = None
) -> SparkSession:
    """reconcile's own session, with driver memory and `conf` passed to the JVM before it
    starts (a JVM already running keeps its own)."""
    settings = "".join(f" --conf {key}={value}" for key, value in (conf or {}).items())
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {driver_memory}{settings} pyspark-shell"
    return spark_session(master)


@dataclass(frozen=True)
class Timing:
    """One size: reconcile's seconds and counts, and the Arrow reference's seconds and counts."""

    seconds: float
    counts: dict
    reference_s: float
    reference: dict
    task_peak_mb: float


def timed_reconcile(spark: SparkSession, rows: int, runs: int, tmp: Path) -> Timing:
    """Seconds reconcile and the reference take on fresh synthetic runs of rows rows."""
    root = Path(tempfile.mkdtemp(prefix=f"reconcile-bench-{rows}-", dir=tmp))
    try:
        dirs = write_runs(root, rows, runs)
        started = time.perf_counter()
        results = reconcile(spark, dirs)
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        reference = [arrow_reference(d) for d in dirs]
        reference_s = time.perf_counter() - started
        summed = {k: sum(r[k] for r in reference) for k in reference[0]}
        peak = task_peak_mb(dirs[0])  # the first run is the largest (rows are split evenly)
        return Timing(seconds, summed_counts(results), reference_s, summed, peak)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def arrow_reference(run_dir: Path) -> dict[str, int]:
    """The three core questions in one process with pyarrow: acknowledged messages missing from
    the read-back, acknowledged messages read more than once, acknowledged offsets holding
    another message. One record read twice counts once, as in reconcile."""
    acked = pq.read_table(
        run_dir / "acked.parquet", columns=["msg_id", "status", "partition", "offset"]
    )
    acked = acked.filter(pc.equal(acked["status"], "ok"))
    read = pq.read_table(run_dir / "readback.parquet", columns=["msg_id", "partition", "offset"])
    read = read.group_by(["partition", "offset"]).aggregate([("msg_id", "min")])
    read = read.rename_columns(["partition", "offset", "msg_id"])
    reads = read.group_by("msg_id").aggregate([("msg_id", "count")])
    per_id = acked.select(["msg_id"]).join(reads, "msg_id", join_type="left outer")
    count = pc.fill_null(per_id["msg_id_count"], 0)
    located = acked.filter(pc.is_valid(acked["offset"]))
    at_slot = located.join(
        read.rename_columns(["partition", "offset", "holder"]),
        ["partition", "offset"],
        join_type="inner",  # only acknowledged offsets that were read can hold another message
    )
    return {
        "missing": pc.sum(pc.equal(count, 0)).as_py() or 0,
        "duplicated": pc.sum(pc.greater(count, 1)).as_py() or 0,
        # A record without a msg_id at the acked offset is another message too.
        "offset_divergent": pc.sum(
            pc.fill_null(pc.not_equal(at_slot["holder"], at_slot["msg_id"]), True)
        ).as_py()
        or 0,
    }


def task_peak_mb(run_dir: Path) -> float:
    """Peak resident MB of a fresh process that runs the checker on run_dir, as a task does."""
    run = RunInput(run_dir, complete=True, unlocated_acks=False)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_checked_peak_mb, (run,))


def _checked_peak_mb(run: RunInput) -> float:
    """Check run in this process and return this process's peak resident MB (Linux: KiB)."""
    check_run(run)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summed_counts(results: list[RunResult]) -> dict:
    """Counts summed over runs; raises when a run did not reconcile."""
    broken = [r for r in results if r.status != "complete"]
    if broken:
        raise RuntimeError(f"{broken[0].run_dir}: {broken[0].status}: {broken[0].error}")
    return {key: sum(r.counts[key] for r in results if r.counts) for key in COUNT_NAMES}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table: rows, seconds, rows/s, growth vs the previous size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,30000000")
    parser.add_argument("--runs", type=int, default=1, help="runs the rows are split over")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    spark = bench_session(args.master, args.driver_memory)
    timed_reconcile(spark, WARMUP_ROWS, 1, args.tmp)
    print(f"master {args.master}, driver memory {args.driver_memory}, runs per size {args.runs}")
    print(
        f"{'rows':>12} {'seconds':>9} {'rows/s':>12} {'growth':>8} {'arrow ref s':>12} "
        f"{'task peak MB':>13}"
    )
    previous: float | None = None
    for rows in sizes:
        t = timed_reconcile(spark, rows, args.runs, args.tmp)
        growth = f"{t.seconds / previous:.2f}x" if previous else "-"
        print(
            f"{rows:>12,} {t.seconds:>9.1f} {rows / t.seconds:>12,.0f} {growth:>8} "
            f"{t.reference_s:>12.1f} {t.task_peak_mb:>13,.0f}",
            flush=True,
        )
        print(f"{'':>12} counts {t.counts}", file=sys.stderr)
        print(f"{'':>12} reference {t.reference}", file=sys.stderr)
        agree = (t.counts["lost"] + t.counts["unseen"], t.counts["duplicated"]) == (
            t.reference["missing"],
            t.reference["duplicated"],
        ) and t.counts["offset_divergent"] == t.reference["offset_divergent"]
        if not agree:
            print(f"{'':>12} reference DISAGREES: {t.reference}")
        if rows == TARGET_ROWS:
            ratio = t.seconds / t.reference_s
            print(f"ratio to arrow reference at 10M: {ratio:.1f}x")
            met = t.seconds <= TARGET_S and ratio <= TARGET_RATIO
            print(
                f"{'':>12} target <= {TARGET_S:.0f} s and <= {TARGET_RATIO:.0f}x at "
                f"{TARGET_ROWS:,} rows: {'met' if met else 'MISSED'}"
            )
        previous = t.seconds
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
