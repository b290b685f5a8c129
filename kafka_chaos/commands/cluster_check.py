"""`kafka-chaos cluster-check RUNS...`: reconcile runs on a Spark standalone cluster started
here and in local mode, and compare the results."""

from __future__ import annotations

import argparse
import sys

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK, require_java

NAME = "cluster-check"
HELP = "reconcile runs on a Spark standalone cluster started here; compare with local mode"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The runs, and the cluster's shape."""
    parser.add_argument("runs", nargs="+", help="run directories or globs (any parent works)")
    parser.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--worker-cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--worker-memory", default="1g", help="executor memory per worker")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Start a master and workers on 127.0.0.1, reconcile through it and in local mode, compare;
    exit 0 when every run's result is the same, 2 otherwise (an analysis fault, not Kafka's)."""
    from analysis.spark.reconcile import find_runs
    from analysis.spark.spark_cluster import ClusterError, StandaloneCluster, compare_with_local

    if not require_java():
        return EXIT_ERROR
    run_dirs = find_runs(args.runs)
    if not run_dirs:
        print(f"no run directory under {' '.join(args.runs)}", file=sys.stderr)
        return EXIT_ERROR
    try:
        with StandaloneCluster(args.workers, args.worker_cores, args.worker_memory) as cluster:
            print(f"{cluster.master_url}: {cluster.alive_workers()} workers alive")
            report = compare_with_local(run_dirs, cluster)
    except ClusterError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(
        f"{len(report.run_dirs)} runs: local[2] {report.local_s:.1f} s, "
        f"{report.master_url} {report.cluster_s:.1f} s (each with its session start)"
    )
    for run_dir in report.differing:
        print(f"  differs: {run_dir}")
    print("identical results" if report.identical else f"{len(report.differing)} runs differ")
    return EXIT_OK if report.identical else EXIT_ERROR
