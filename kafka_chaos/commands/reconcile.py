"""`kafka-chaos reconcile RUNS...`: the Spark stage alone. Reconcile the runs, write each
results.json and a Markdown table of summed counts per cell (no judgement, no report)."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.model.anomalies import ANOMALY_NAMES, CountKey, CountName
from analysis.model.results import RunResult, RunStatus
from harness.rundir import layout
from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK, add_spark_chunk_rows, require_java
from kafka_chaos.commands.preflight import folder_problem, master_problem

if TYPE_CHECKING:
    from analysis.judge.outcomes import CellStats

NAME = "reconcile"
HELP = "reconcile run directories only: results.json per run and a table of counts per cell"

# The table's counts, by name: acked, every anomaly class, then the one loss figure.
TABLE_COUNTS: tuple[CountKey, ...] = (CountName.ACKED, *ANOMALY_NAMES, CountName.LOSS)
CELL_TABLE = "cells.md"  # written by the command line beside its printout


def cell_table(results: Sequence[RunResult]) -> str:
    """A Markdown table of summed counts per cell; reps shows complete/total if they differ."""
    from analysis.judge.cell import cell_stats

    groups: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
    for result in results:
        groups[(result.experiment, result.cell)].append(result)
    several_experiments = len({experiment for experiment, _ in groups}) > 1
    header = ["cell", "reps", *TABLE_COUNTS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (experiment, cell), reps in sorted(groups.items()):
        name = f"{experiment}/{cell}" if several_experiments else cell
        lines.append(
            "| " + " | ".join([name.replace("|", r"\|"), *_table_row(cell_stats(reps))]) + " |"
        )
    return "\n".join(lines) + "\n"


def _table_row(stats: CellStats) -> list[str]:
    """reps, then the sum of each TABLE_COUNTS count over the cell's counted repetitions."""
    reps = str(stats.repetitions)
    if stats.counted != stats.repetitions:
        reps = f"{stats.counted}/{reps}"
    sums = [str(stats.counts[k].total) if k in stats.counts else "n/a" for k in TABLE_COUNTS]
    return [reps, *sums]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The runs, the Spark master, where the table goes."""
    parser.add_argument("runs", nargs="+", metavar="RUN_GLOB", help="run dirs or any parent")
    parser.add_argument("--master", help="Spark master (default $KCHAOS_SPARK_MASTER, local[*])")
    parser.add_argument("--out", type=Path, help="folder of cells.md (default reports/latest)")
    add_spark_chunk_rows(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Reconcile the runs matching the globs, write results.json and the cell table; exit 2
    when no run matches."""
    from analysis.spark.reconcile import find_runs, reconcile_runs, write_results

    run_dirs = find_runs(args.runs)
    if not run_dirs:
        print(
            f"no run directory matches {' '.join(args.runs)}: a run directory holds "
            f"{layout.SPEC} and {layout.ACKED}. Fix: name runs/<experiment>/... or a parent of it "
            "(quote globs so the shell leaves them alone), or run an experiment first (make run).",
            file=sys.stderr,
        )
        return EXIT_ERROR
    out = args.out or settings.reports_dir / "latest"
    problem = master_problem(args.master, settings) or folder_problem(out, "--out")
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_ERROR
    if not require_java():
        return EXIT_ERROR
    results = reconcile_runs(run_dirs, args.master or settings.spark_master, args.spark_chunk_rows)
    write_results(results)
    table = cell_table(results)
    out.mkdir(parents=True, exist_ok=True)
    md_path = out / CELL_TABLE
    md_path.write_text(table)
    print(table, end="")
    tally = {s.value: sum(r.status == s for r in results) for s in RunStatus}
    print(
        f"{len(results)} runs ({', '.join(f'{n} {s}' for s, n in tally.items())}); wrote {md_path}",
        file=sys.stderr,
    )
    return EXIT_OK
