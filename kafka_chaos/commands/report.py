"""`kafka-chaos report RUNS...`: reconcile and judge run directories, print the verdict table
and write the report; also the analysis step at the end of `kafka-chaos run`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.checks.messages.facts import SHARD_ROWS
from harness.rundir import layout
from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, KNOWN_BUG_HELP, add_shard_rows, require_java

NAME = "report"
HELP = "reconcile and judge run directories (any number)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The runs, where the report goes, the Spark master, the JUnit file."""
    parser.add_argument("runs", nargs="+", help="run directories or globs (any parent works)")
    parser.add_argument("--out", type=Path, help="report folder (default reports/latest)")
    parser.add_argument("--master", help="Spark master (default $KCHAOS_SPARK_MASTER, local[*])")
    parser.add_argument("--junit", type=Path, help="JUnit XML path (default <out>/junit.xml)")
    parser.add_argument("--fail-on-known-bug", action="store_true", help=KNOWN_BUG_HELP)
    add_shard_rows(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every verdict is consistent, 1 on a violation, 2 when nothing to judge."""
    from analysis.pipeline import NoRunsFound

    if not require_java():
        return EXIT_ERROR
    out = args.out or settings.reports_dir / "latest"
    try:
        return analyse_and_print(
            args.runs,
            out,
            args.master or settings.spark_master,
            "kafka-chaos report",
            args.junit,
            known_bug_fails=args.fail_on_known_bug,
            shard_rows=args.shard_rows,
        )
    except NoRunsFound as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR


def analyse_and_print(
    patterns: Sequence[str],
    out: Path,
    master: str,
    title: str,
    junit: Path | None = None,
    *,
    known_bug_fails: bool = False,
    shard_rows: int = SHARD_ROWS,
) -> int:
    """Run the analysis, print the verdict table and the report paths; return the exit code
    (1 for a KNOWN-BUG cell too when `known_bug_fails`)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from analysis.judge.verdicts import exit_code
    from analysis.pipeline import VERDICT_COLUMNS, analyse, verdict_table
    from harness.workload.finalize import finalize

    for run_dir in unfinished_runs(patterns):
        finalize(run_dir)  # a crashed harness left only the journal: rebuild acked.parquet
    result = analyse(patterns, out, master=master, title=title, junit=junit, shard_rows=shard_rows)
    table = Table(title=escape(title))  # user text: square brackets are not markup
    for column in VERDICT_COLUMNS:
        table.add_column(column, justify="left" if column in ("cell", "verdict") else "right")
    for row in verdict_table(result.cells):
        table.add_row(*(escape(value) for value in row))
    console = Console(width=160)
    console.print(table)
    console.print(f"HTML report: {result.html}")
    console.print(f"Markdown:    {result.markdown}")
    console.print(f"JUnit XML:   {result.junit}")
    console.print(f"Dataset:     {result.dataset} (Parquet, one row per repetition)")
    for failure in result.failures:  # shown in place in the report too; the verdicts stand
        print(f"warning: {failure}", file=sys.stderr)
    if not result.written:  # verdicts nobody can read: a harness error, whatever they say
        print(f"error: no report file could be written under {out}", file=sys.stderr)
        return EXIT_ERROR
    return exit_code(result.cells, known_bug_fails=known_bug_fails)


def unfinished_runs(patterns: Sequence[str]) -> list[Path]:
    """Run directories with a journal but no acked.parquet (the harness died mid-run)."""
    import glob

    found = []
    for pattern in patterns:
        for match in glob.glob(pattern):
            for spec in Path(match).rglob(layout.SPEC):
                run_dir = spec.parent
                if not (run_dir / layout.ACKED).exists() and any(run_dir.glob(layout.JOURNAL_GLOB)):
                    found.append(run_dir)
    return found
