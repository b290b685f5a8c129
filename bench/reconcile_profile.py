"""Where the reconciliation's time goes: each stage of analysis.checks.messages on one
synthetic run, and, for comparison, what the same core questions cost as Spark SQL on two cores.

    .venv/bin/python bench/reconcile_profile.py [--rows 10000000] [--spark-sql]
        [--core-only] [--conf KEY=VALUE ...]

The run is bench/reconcile_bench.py's (about 0.1 % of messages in each anomaly class). Each
checker stage is timed once, in order, in this process, with the peak resident memory after
it. --spark-sql also times, on local[2], the three Spark SQL steps the checker replaced: a
union of acked and read-back ids grouped by msg_id, the read-back deduplicated by
(partition, offset), and the join of acked rows with the records at their offsets; then the
same core as one query, as a JVM-only checker would run it (records made distinct, each acked
row joined with the record at its slot, one group by msg_id over both sides, the core counts),
in a session tuned for two cores (4 shuffle partitions, shuffled hash joins). Nothing crosses
into Python there, so it is the floor of a checker in Spark's DataFrames on this machine.
--core-only times only that query and the reference; --conf passes a Spark setting to the JVM
the query runs in (repeatable), to try what else might lower the floor.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from reconcile_bench import arrow_reference, bench_session, write_runs

from analysis.checks.messages import RunInput, classes, columns, examples, index, probe, timeline
from harness.rundir import layout


def timed(name: str, step: Callable[..., Any], *args: Any) -> Any:
    """step(*args), printing its seconds and the process's peak resident MB so far."""
    started = time.perf_counter()
    value = step(*args)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {name:<28} {time.perf_counter() - started:>7.2f} s   peak {peak_mb:>7,.0f} MB")
    return value


def checker_stages(run_dir: Path) -> None:
    """Time each stage of check_run on run_dir."""
    run = RunInput(run_dir, complete=True, unlocated_acks=False)
    acked = timed("read acked.parquet", columns.Acked.read, run_dir / layout.ACKED)
    timed("send timeline and counts", timeline.send_facts, acked)
    reads = timed("read + dedup read-back", columns.Reads.read, run_dir / layout.READBACK)
    joined = timed("index (sorts, searches)", index.Index.build, acked, reads)
    progress = timed("read-back progress", index.Progress.of, joined, run)
    messages = timed("message table", index.messages_of, joined, None)
    found = timed("anomaly classes", classes.classify, messages, progress, {})
    reordered = timed("order check", classes.reordered, reads)
    timed("examples", examples.examples_of, found, messages, reads, reordered)
    loss = classes.loss_mask(found)
    timed("sensitivity probe", probe.run_probe, joined, run, messages, loss, progress)


def spark_sql_floor(run_dir: Path) -> None:
    """Time the three Spark SQL steps the checker replaced, each collected alone."""
    spark = bench_session("local[2]", "6g")
    acked = spark.read.parquet(str(run_dir / layout.ACKED))
    read = spark.read.parquet(str(run_dir / layout.READBACK))
    acked.count(), read.count()  # warm the JVM and the file cache
    ids = acked.select("msg_id", F.lit(1).alias("a"), F.lit(0).alias("r")).unionByName(
        read.select("msg_id", F.lit(0).alias("a"), F.lit(1).alias("r"))
    )
    grouped = ids.groupBy("msg_id").agg(F.sum("a").alias("a"), F.sum("r").alias("r"))
    timed("union, group by msg_id", grouped.filter("a = 1 and r = 0").count)
    timed("dedup read-back", read.dropDuplicates(["partition", "offset"]).count)
    holders = read.select("partition", "offset", F.col("msg_id").alias("holder"))
    at_offset = acked.join(holders, ["partition", "offset"], "left")
    timed("join at acked offsets", at_offset.filter("holder is null or holder != msg_id").count)
    spark.stop()


def spark_sql_core(run_dir: Path, conf: dict[str, str]) -> float:
    """Time the checker's core as one Spark query in a session tuned for two cores (and `conf`,
    when this call starts the JVM); its seconds."""
    spark = bench_session("local[2]", "6g", conf)  # the JVM the floor started, if it did
    # SQL settings of the session, so they hold in a JVM already running.
    tuning = {"spark.sql.shuffle.partitions": "4", "spark.sql.join.preferSortMergeJoin": "false"}
    for key, value in {**tuning, **conf}.items():
        if key.startswith("spark.sql."):  # the others hold from the JVM's start only
            spark.conf.set(key, value)
    acked = spark.read.parquet(str(run_dir / layout.ACKED))
    read = spark.read.parquet(str(run_dir / layout.READBACK))
    acked.count(), read.count()  # warm the JVM and the file cache
    records = read.select("msg_id", "partition", "offset").dropDuplicates(["partition", "offset"])
    held = records.select(
        "partition", "offset", F.col("msg_id").alias("held_by"), F.lit(1).alias("held")
    )
    acked_side = acked.join(held, ["partition", "offset"], "left").select(
        "msg_id",
        F.lit(1).alias("acked"),
        F.lit(0).alias("reads"),
        (F.col("status") == "ok").cast("int").alias("ok"),
        F.coalesce("held", F.lit(0)).alias("held"),
        "held_by",
    )
    records_side = records.select(
        "msg_id",
        F.lit(0).alias("acked"),
        F.lit(1).alias("reads"),
        F.lit(0).alias("ok"),
        F.lit(0).alias("held"),
        F.lit(None).cast("bigint").alias("held_by"),
    )
    messages = (
        acked_side.unionByName(records_side)
        .groupBy("msg_id")
        .agg(
            F.sum("acked").alias("acked"),
            F.sum("reads").alias("reads"),
            F.max("ok").alias("ok"),
            F.max("held").alias("held"),
            F.min("held_by").alias("holder"),
        )
    )
    ok = F.col("ok") > 0
    counts = messages.agg(
        F.sum((ok & (F.col("reads") == 0)).cast("int")).alias("missing"),
        F.sum((ok & (F.col("reads") > 1)).cast("int")).alias("duplicated"),
        F.sum(
            (ok & (F.col("held") > 0) & ~F.col("holder").eqNullSafe(F.col("msg_id"))).cast("int")
        ).alias("offset_divergent"),
    )
    started = time.perf_counter()
    timed("the core as one query", counts.collect)
    seconds = time.perf_counter() - started
    spark.stop()
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Write one run, profile it, remove it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--spark-sql", action="store_true", help="also time the Spark SQL steps")
    parser.add_argument(
        "--core-only", action="store_true", help="time only the core query and the reference"
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    root = Path(tempfile.mkdtemp(prefix="reconcile-profile-"))
    try:
        (run_dir,) = write_runs(root, args.rows, 1)
        if not args.core_only:
            print(f"checker stages, {args.rows:,} acked rows")
            checker_stages(run_dir)
        if args.spark_sql or args.core_only:
            if not args.core_only:
                print(f"Spark SQL on local[2], {args.rows:,} acked rows")
                spark_sql_floor(run_dir)
            print(f"the core as one Spark query on local[2], tuned, {args.rows:,} acked rows")
            print(f"  settings: {conf or 'none beyond the tuning'}")
            core_s = spark_sql_core(run_dir, conf)
            started = time.perf_counter()
            arrow_reference(run_dir)
            reference_s = time.perf_counter() - started
            print(f"  {'Arrow reference (one process)':<28} {reference_s:>7.2f} s")
            print(f"the core query / the Arrow reference: {core_s / reference_s:.1f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
