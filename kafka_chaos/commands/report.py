"""`kafka-chaos report RUNS...`: reconcile and judge run directories, print the verdict table
and write the report; also the analysis step at the end of `kafka-chaos run`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.checks.messages.facts import CHUNK_ROWS
from harness.rundir import layout
from harness.settings import Settings
from kafka_chaos.commands.common import (
    EXIT_ERROR,
    add_fail_on,
    add_spark_chunk_rows,
    fail_on,
    require_java,
)
from kafka_chaos.commands.preflight import analysis_problem

if TYPE_CHECKING:
    from analysis.report.publish import Destination

NAME = "report"
HELP = "reconcile and judge run directories (any number)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The runs, where the report goes, the Spark master, the JUnit file."""
    parser.add_argument(
        "runs",
        nargs="+",
        help="run directories or globs (any parent works), local or a URI such as "
        "s3a://bucket/runs/* (copied to a local mirror under the cache folder first)",
    )
    add_out(parser, "reports/latest")
    parser.add_argument("--master", help="Spark master (default $KCHAOS_SPARK_MASTER, local[*])")
    add_junit(parser)
    add_fail_on(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (exit code, each cell's verdict and counts, the report's "
        "files) instead of the table",
    )
    add_spark_chunk_rows(parser)
    add_results_to(parser)


def add_out(parser: argparse.ArgumentParser, default: str) -> None:
    """--out DIR: where the report goes."""
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="report folder, local or a URI such as s3a://bucket/reports/nightly "
        f"(default {default})",
    )


def add_junit(parser: argparse.ArgumentParser) -> None:
    """--junit FILE: a copy of the report's junit.xml where CI collects test results."""
    parser.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also copy the report's junit.xml to FILE (where CI collects test results); "
        "<out>/junit.xml is written either way",
    )


def add_results_to(parser: argparse.ArgumentParser) -> None:
    """--results-to: a shared results dataset this report's rows are added to."""
    parser.add_argument(
        "--results-to",
        metavar="URI",
        help="also add the results dataset's rows to the dataset at URI (a folder, "
        "s3a://bucket/prefix, gs://..., hdfs://...); reporting the same runs again replaces "
        "their rows",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every verdict is consistent, 1 on a violation, 2 when nothing to judge."""
    from analysis.pipeline import NoRunsFound
    from analysis.report.publish import DestinationError, destination, is_uri
    from analysis.report.remote_runs import stage_runs

    out = args.out or str(settings.reports_dir / "latest")
    # Before Java and Spark: a mistyped master or a file where the report goes fails now.
    if problem := analysis_problem(args.master, settings, out, args.junit):
        print(problem, file=sys.stderr)
        return EXIT_ERROR
    if not require_java():
        return EXIT_ERROR
    try:  # before Spark starts: a destination nobody can write fails in a second
        published = destination(out) if is_uri(out) else None
        lake = destination(args.results_to) if args.results_to else None
        runs = stage_runs(args.runs, settings.cache_dir)
    except DestinationError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    try:
        return analyse_into(
            out,
            published,
            runs,
            args.master or settings.spark_master,
            "kafka-chaos report",
            args.junit,
            failing=fail_on(args),
            as_json=args.json,
            chunk_rows=args.spark_chunk_rows,
            lake=lake,
        )
    except NoRunsFound as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR


def analyse_into(
    out: str | Path,
    published: Destination | None,
    patterns: Sequence[str],
    master: str,
    title: str,
    junit: Path | None = None,
    **options: Any,
) -> int:
    """analyse_and_print into the folder `out`, or, when `published` (the destination of the
    URI `out`) is given, into a temporary folder then copied there."""
    if published is None:
        return analyse_and_print(patterns, Path(out), master, title, junit, **options)
    with tempfile.TemporaryDirectory(prefix="kafka-chaos-report-") as staging:
        return analyse_and_print(
            patterns, Path(staging), master, title, junit, published=published, **options
        )


def analyse_and_print(
    patterns: Sequence[str],
    out: Path,
    master: str,
    title: str,
    junit: Path | None = None,
    *,
    failing: frozenset[Any] | None = None,
    as_json: bool = False,
    json_context: dict[str, str] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    published: Destination | None = None,
    lake: Destination | None = None,
) -> int:
    """Run the analysis into `out`, copy that folder to `published`, its junit.xml to `junit`
    and add the results dataset's rows to `lake` where given, print the verdict table and
    where the report is;
    return the exit code (analysis.judge.verdicts.EXIT_CODES of the cells whose verdict is in
    `failing`, the default when None; 2 when no report file could be written or published)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from analysis.judge.verdicts import DEFAULT_FAIL_ON
    from analysis.pipeline import VERDICT_COLUMNS, analyse, verdict_table
    from harness.workload.consumer_group.java import convert_journals
    from harness.workload.finalize import finalize

    for run_dir in unfinished_runs(patterns):
        finalize(run_dir)  # a crashed harness left only the journal: rebuild acked.parquet
        convert_journals(run_dir)  # and its Java consumers' journals unconverted
    gate = DEFAULT_FAIL_ON if failing is None else failing
    result = analyse(patterns, out, master=master, title=title, chunk_rows=chunk_rows, fail_on=gate)
    code = result.exit_code
    for failure in result.failures:  # shown in place in the report too; the verdicts stand
        print(f"warning: {failure}", file=sys.stderr)
    shown = None
    if not result.written:  # verdicts nobody can read: a harness error, whatever they say
        print(f"error: no report file could be written under {out}", file=sys.stderr)
        code = EXIT_ERROR
    else:
        try:
            shown = _publish(out, result.dataset, published, lake)
        except OSError as exc:
            print(f"error: the report could not be published: {exc}", file=sys.stderr)
            code = EXIT_ERROR
    if junit is not None and not _copy_junit(result, junit):
        code = EXIT_ERROR
        junit = None
    if as_json:
        _print_json(result, code, shown, json_context or {}, junit)
        return code
    table = Table(title=escape(title))  # user text: square brackets are not markup
    for column in VERDICT_COLUMNS:
        table.add_column(column, justify="left" if column in ("cell", "verdict") else "right")
    for row in verdict_table(result.cells):
        table.add_row(*(escape(value) for value in row))
    console = Console(width=160)
    console.print(table)
    if shown is None:
        return code
    for label, path in (
        ("HTML report", result.html),
        ("Markdown", result.markdown),
        ("JUnit XML", result.junit),
        ("Dataset", result.dataset),
    ):
        note = " (Parquet, one row per repetition)" if label == "Dataset" else ""
        console.print(f"{label + ':':<12} {shown(path)}{note}", soft_wrap=True)
    if junit is not None:
        console.print(f"{'JUnit copy:':<12} {junit}", soft_wrap=True)
    runs = sum(Path(r.run_dir).is_dir() for cell in result.cells for r in cell.repetitions)
    if runs:  # the analysis writes into its input: said, so nobody is surprised by it
        console.print(
            f"{'Per run:':<12} results.json written (or replaced) in each of the {runs} run "
            "directories analysed (docs/run-directory.md)",
            soft_wrap=True,
        )
    if lake is not None:
        console.print(f"Results:     {lake.uri} (rows added)", soft_wrap=True)
    return code


def _copy_junit(result: Any, junit: Path) -> bool:
    """Copy the report's junit.xml to `junit` (its folders made), unless it is that file;
    False, said on stderr, when there is none or the copy fails."""
    import shutil

    if result.junit not in result.written:
        print(f"error: no junit.xml was written, so none is copied to {junit}", file=sys.stderr)
        return False
    try:
        if junit.resolve() != result.junit.resolve():
            junit.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(result.junit, junit)
    except OSError as exc:
        print(f"error: junit.xml could not be copied to {junit}: {exc}", file=sys.stderr)
        return False
    return True


def _print_json(
    result: Any, code: int, shown: Any, context: dict[str, str], junit: Path | None
) -> None:
    """`report --json`: one JSON object on stdout (docs/cli.md): the exit code, each cell's
    verdict with its acked and loss sums, and where the report's files are (none when they
    could not be written or published; the error went to stderr), the --junit copy too."""
    import json

    paths = (result.html, result.markdown, result.json, result.junit, result.dataset)
    names = ("html", "markdown", "json", "junit", "dataset")
    files = {} if shown is None else {n: str(shown(p)) for n, p in zip(names, paths, strict=True)}
    if files and junit is not None:
        files["junit_copy"] = str(junit)
    cells = [
        {
            "experiment": cell.experiment,
            "cell": cell.cell,
            "verdict": cell.verdict.value,
            "repetitions": len(cell.repetitions),
            # The cell's sums over the repetitions that have counts (the table's columns).
            **{name: _sum(cell.stats.counts.get(name)) for name in ("acked", "loss")},
            "loss_rate": cell.stats.loss_rate,
        }
        for cell in result.cells
    ]
    print(json.dumps({"exit_code": code, **context, "cells": cells, "files": files}, indent=2))


def _sum(stat: Any) -> int | None:
    """A count's sum over a cell's repetitions (CountStats.total), None when none has it."""
    return None if stat is None else int(stat.total)


def _publish(
    out: Path, dataset: Path, published: Destination | None, lake: Destination | None
) -> Callable[[Path], str]:
    """Copy `out` to `published` and add `dataset` to `lake` where given; return how a report
    file's path is shown (its URI once published)."""
    from analysis.report.publish import append_results, publish_folder

    if lake is not None:
        append_results(dataset, lake)
    if published is None:
        return str
    publish_folder(out, published)

    def shown(path: Path) -> str:
        if not path.resolve().is_relative_to(out.resolve()):
            return str(path)
        return published.child(path.resolve().relative_to(out.resolve()).as_posix())

    return shown


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
