"""Where the sharded reconciliation's time goes: each Spark stage of analysis.spark.shards timed
alone on one synthetic run, beside the Python work of its shards measured in this process.

    .venv/bin/python bench/shards_profile.py [--rows 4000000] [--shard-rows 2000000]

The run is bench/reconcile_bench.py's. Each stage is timed as its own Spark job (so a stage's
time includes reading the Parquet files and its shuffles); "python: shard checks" runs
check_shard on every shard in this process (no Spark), "python: order check" check_order on the
whole read-back, so the rest of a stage is Spark's: reading, shuffling, moving rows to Python.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from reconcile_bench import write_runs

from analysis.checks.messages import RunInput
from analysis.checks.messages.columns import ACKED_COLUMNS, READBACK_COLUMNS, Acked, Reads
from analysis.checks.messages.index import Holders, Index, Progress
from analysis.checks.messages.shard import check_order, check_shard
from analysis.spark import shards
from analysis.spark.reconcile import spark_session
from harness.rundir import layout


def timed(label: str, work: Callable[[], object]) -> None:
    """Run work and print its seconds."""
    started = time.perf_counter()
    work()
    print(f"{label:<42} {time.perf_counter() - started:>7.1f} s", flush=True)


def python_shards(run: RunInput) -> None:
    """check_shard on each shard of the run, in this process, holders from the whole run."""
    acked = pq.read_table(run.run_dir / layout.ACKED, columns=list(ACKED_COLUMNS))
    reads = pq.read_table(run.run_dir / layout.READBACK, columns=list(READBACK_COLUMNS))
    whole = Index.build(Acked.of(acked), Reads.of(reads))
    progress = Progress.of(whole, run, hidden=None)
    held = np.zeros(acked.num_rows, dtype=bool)  # the holders' values do not change the work
    for shard in range(run.shards):
        a, r = _of_shard(acked, shard, run.shards), _of_shard(reads, shard, run.shards)
        ids = a["msg_id"].fill_null(0).to_numpy()
        check_shard(Acked.of(a), Reads.of(r), Holders(held[: len(ids)], ids), run, progress)


def _of_shard(table: pa.Table, shard: int, count: int) -> pa.Table:
    """The rows of a shard: msg_id mod count (null: shard 0)."""
    return table.filter(pc.equal(pc.fill_null(pc.remainder(table["msg_id"], count), 0), shard))


def main(argv: list[str] | None = None) -> int:
    """Write the run, time each stage, remove the run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--shard-rows", type=int, default=2_000_000)
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="shards-profile-", dir=args.tmp))
    try:
        (run_dir,) = write_runs(root, args.rows, 1)
        count = shards.shard_count(args.rows, args.shard_rows)
        run = RunInput(run_dir, complete=True, unlocated_acks=False, shards=count)
        spark = spark_session("local[2]")
        print(f"{args.rows:,} rows, {count} shards, local[2]")
        acked = shards._acked_frame(spark, 0, run)
        records = shards._records_frame(spark, 0, run)
        timed("warm-up: count the acked rows", acked.count)
        timed("send timeline, counts, contract", lambda: shards._send_facts(acked))
        timed("distinct records (count)", records.count)
        timed("progress per partition", lambda: shards._progress(acked, records, False))
        timed("order check", lambda: shards._reordering(records, count))
        timed("the whole sharded check", lambda: shards._check_one(spark, 0, run))
        timed("python: shard checks, no Spark", lambda: python_shards(run))
        reads = Reads.read(run_dir / layout.READBACK)
        timed("python: order check, no Spark", lambda: check_order(reads))
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
