"""Time the whole analysis of finished runs (what `make run` does after the last repetition),
apart from starting Spark.

    .venv/bin/python bench/analysis_bench.py [RUN_GLOB ...] [--repeat 3]

Default RUN_GLOB: runs/default/latest, which `make run` leaves. Spark is started once and
timed alone; then analysis.pipeline.analyse (reconcile in one Spark job, the price of safety,
verdicts, cross-run summary, HTML/Markdown/JSON/JUnit reports, results dataset) runs --repeat
times in that session, into a temporary folder, and each time is printed with the median.
Target: <= 10 s beyond starting Spark for the default experiment.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from analysis.pipeline import analyse
from analysis.spark.reconcile import find_runs, spark_session

TARGET_S = 10.0


def main(argv: list[str] | None = None) -> int:
    """Print Spark's start time, each analysis time and their median."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("globs", nargs="*", default=["runs/default/latest"], metavar="RUN_GLOB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    runs = find_runs(args.globs)
    if not runs:
        where = " ".join(args.globs)
        print(f"no run directory under {where}: run `make run` first", file=sys.stderr)
        return 2
    started = time.perf_counter()
    spark = spark_session(args.master)
    spark.sparkContext.parallelize([0], 1).count()  # the first task starts a Python worker
    start_s = time.perf_counter() - started
    print(f"{len(runs)} runs; starting Spark ({args.master}): {start_s:.1f} s")
    seconds = []
    for attempt in range(args.repeat):
        out = Path(tempfile.mkdtemp(prefix="analysis-bench-"))
        try:
            started = time.perf_counter()
            analyse(args.globs, out, master=args.master)
            seconds.append(time.perf_counter() - started)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        print(f"analysis {attempt + 1}: {seconds[-1]:.1f} s", flush=True)
    median = statistics.median(seconds)
    verdict = "met" if median <= TARGET_S else "missed"
    print(
        f"analysis beyond starting Spark, median of {len(seconds)}: {median:.1f} s "
        f"(target <= {TARGET_S:.0f} s: {verdict})"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
