"""Reconcile one synthetic run of growing size as Spark DataFrame operations, and print what it
costs: seconds, the peak memory of Spark's JVM, and the ratio to a single-process Arrow reference
measured on the same files in the same run; beside it, the whole-run check (one task) up to
--whole-max.

    .venv/bin/python bench/scale_bench.py [--sizes 1000000,10000000,30000000,100000000]
        [--whole-max 30000000] [--master local[2] | --standalone 2]

The runs are bench/reconcile_bench.py's (about 0.1 % of messages in each anomaly class: lost,
duplicated, reordered, failed, indeterminate, phantoms, offsets rewritten, an unseen tail),
written chunk by chunk to --tmp and removed after each size. The DataFrame check
(analysis.spark.messages) runs in the JVM: its memory is the JVM's peak resident memory
(VmHWM, reset before each size; on local[2] the driver runs the tasks). The whole-run figure is
a fresh process checking the run, as its one task would. --standalone N starts a standalone
Spark cluster of N one-core workers on 127.0.0.1 (pyspark's own jars,
analysis/spark/spark_cluster.py; default executor memory) and reconciles there instead (the
memory column is then the driver's). Targets on a 2-core machine: within 2x the reference at
10M and at 100M rows; time linear in rows from 10M to 100M (within 15 %); the JVM's peak memory
flat across sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from reconcile_bench import arrow_reference, task_peak_mb, write_runs

from analysis.checks.messages import RunInput
from analysis.spark.messages import check_in_spark
from analysis.spark.reconcile import reconcile, spark_session
from analysis.spark.spark_cluster import StandaloneCluster

TARGET_ROWS, TARGET_RATIO, LINEAR_TOLERANCE = 10_000_000, 2.0, 0.15


@dataclass(frozen=True)
class Size:
    """One size's figures."""

    rows: int
    spark_s: float
    jvm_peak_mb: float
    reference_s: float | None
    whole_s: float | None
    whole_peak_mb: float | None
    agree: bool


def _jvm_status(spark: SparkSession) -> Path:
    """/proc/<pid>/status of the session's JVM."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    return Path(f"/proc/{pid}/status")


def _reset_jvm_peak(spark: SparkSession) -> None:
    """Start the JVM's peak resident memory afresh (Linux: clear_refs 5)."""
    with contextlib.suppress(OSError):
        _jvm_status(spark).with_name("clear_refs").write_text("5")


def _jvm_peak_mb(spark: SparkSession) -> float:
    """The JVM's peak resident memory since the reset, MB (VmHWM); 0 where unreadable."""
    with contextlib.suppress(OSError, ValueError):
        for line in _jvm_status(spark).read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(spark: SparkSession, rows: int, whole_max: int, reference_max: int, tmp: Path) -> Size:
    """Write one run of `rows`, reconcile it as DataFrame operations (and whole, up to
    whole_max), time the reference (up to reference_max: it holds the whole run in one process,
    22 GB was not enough at 100M), and check the counts against the reference's."""
    root = Path(tempfile.mkdtemp(prefix=f"scale-bench-{rows}-", dir=tmp))
    try:
        (run_dir,) = write_runs(root, rows, 1)
        run = RunInput(run_dir, complete=True, unlocated_acks=False)
        _reset_jvm_peak(spark)
        started = time.perf_counter()
        facts = check_in_spark(spark, run)
        spark_s = time.perf_counter() - started
        jvm_peak = _jvm_peak_mb(spark)
        reference, reference_s = None, None
        if rows <= reference_max:
            started = time.perf_counter()
            reference = arrow_reference(run_dir)
            reference_s = time.perf_counter() - started
        whole_s = whole_peak = None
        if rows <= whole_max:
            started = time.perf_counter()
            reconcile(spark, [run_dir], chunk_rows=max(rows, 1) * 2)
            whole_s = time.perf_counter() - started
            whole_peak = task_peak_mb(run_dir)
        counts = facts.counts
        agree = reference is None or (
            counts.get("lost", 0) + counts.get("unseen", 0) == reference["missing"]
            and counts.get("duplicated", 0) == reference["duplicated"]
            and counts.get("offset_divergent", 0) == reference["offset_divergent"]
        )
        return Size(rows, spark_s, jvm_peak, reference_s, whole_s, whole_peak, agree)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _ratio(size: Size) -> float | None:
    """DataFrame seconds over the reference's, None without a reference."""
    return None if size.reference_s is None else size.spark_s / size.reference_s


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def main(argv: list[str] | None = None) -> int:
    """Run the sizes and print the table, then each target with met or MISSED."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,30000000,100000000")
    parser.add_argument("--whole-max", type=int, default=30_000_000)
    parser.add_argument("--reference-max", type=int, default=30_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--standalone", type=int, metavar="N", help="N one-core workers instead")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    os.environ["PYSPARK_SUBMIT_ARGS"] = "--conf spark.python.worker.reuse=false pyspark-shell"
    if not args.standalone:
        return _run(args, args.master)
    with StandaloneCluster(workers=args.standalone) as cluster:
        args.master = f"{cluster.master_url} ({args.standalone} one-core workers)"
        return _run(args, cluster.master_url)


def _run(args: argparse.Namespace, master: str) -> int:
    """Measure every size on `master` and print the table and the targets."""
    spark = spark_session(master)
    measure(spark, 300_000, 0, 0, args.tmp)  # warm-up: JIT, Python workers, file cache
    print(f"master {args.master}, default memory settings")
    print(
        f"{'rows':>12} {'spark s':>10} {'JVM MB':>8} {'arrow s':>8} "
        f"{'ratio':>6} {'whole s':>8} {'whole MB':>9} {'counts':>7}"
    )
    sizes = []
    for rows in (int(s) for s in args.sizes.split(",")):
        s = measure(spark, rows, args.whole_max, args.reference_max, args.tmp)
        sizes.append(s)
        print(
            f"{s.rows:>12,} {s.spark_s:>10.1f} {s.jvm_peak_mb:>8,.0f} "
            f"{_cell(s.reference_s, '.1f'):>8} {_cell(_ratio(s), '.1f'):>5}x "
            f"{_cell(s.whole_s, '.1f'):>8} {_cell(s.whole_peak_mb, ',.0f'):>9} "
            f"{'agree' if s.agree else 'DIFFER':>7}",
            flush=True,
        )
    spark.stop()
    _targets(sizes)
    return 0 if all(s.agree for s in sizes) else 1


def _targets(sizes: list[Size]) -> None:
    """Print each target the sizes measured, met or MISSED."""
    for size in sizes:
        if size.rows >= TARGET_ROWS and (ratio := _ratio(size)) is not None:
            print(
                f"{size.rows:,} rows within {TARGET_RATIO:.0f}x the reference: {ratio:.1f}x "
                f"{_met(ratio <= TARGET_RATIO)}"
            )
    big = [s for s in sizes if s.rows >= TARGET_ROWS]
    if len(big) >= 2:
        low, high = big[0], big[-1]
        per_row = (high.spark_s / high.rows) / (low.spark_s / low.rows)
        print(
            f"time linear from {low.rows:,} to {high.rows:,} rows (per-row time ratio within "
            f"{LINEAR_TOLERANCE:.0%}): {per_row:.2f} {_met(abs(per_row - 1) <= LINEAR_TOLERANCE)}"
        )
    peaks = [s.jvm_peak_mb for s in sizes if s.rows >= TARGET_ROWS and s.jvm_peak_mb]
    if len(peaks) >= 2:
        spread = max(peaks) / min(peaks)
        print(f"JVM peak memory flat across sizes: max/min {spread:.2f} {_met(spread <= 1.25)}")


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


if __name__ == "__main__":
    sys.exit(main())
