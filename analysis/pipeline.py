"""From run directories to verdicts and reports in one call: reconcile (Spark), judge, render.

Needs only run directories, so it runs a month later, or over the shards of many CI jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from analysis.checks.messages.facts import CHUNK_ROWS
from analysis.crossrun.dataset import DATASET_DIR, write_dataset
from analysis.crossrun.summary import cross_run_summary
from analysis.judge.outcomes import CellVerdict, CountStats, Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON, exit_code, judge_all, read_evidence_by_run
from analysis.model.anomalies import COUNT_LABELS, LOSS_CLASSES, AnomalyName, CountKey, CountName
from analysis.report.junit import write_junit
from analysis.report.render import render_report
from analysis.report.safe import PartFailure, safely
from analysis.spark.reconcile import find_runs, reconcile_runs, unrun_results, write_results
from harness.rundir.provenance import read_provenance


class NoRunsFound(LookupError):
    """No run directory matched; the message says what a run directory is and the fix."""


@dataclass(frozen=True)
class Analysis:
    """What an analysis produced: judged cells, the exit code, and where the files are."""

    cells: tuple[CellVerdict, ...]
    exit_code: int
    html: Path
    markdown: Path
    json: Path
    junit: Path
    dataset: Path  # the results dataset (Parquet, one row per repetition)
    failures: tuple[PartFailure, ...] = ()  # parts of the report that could not be built

    @property
    def written(self) -> tuple[Path, ...]:
        """The report files written, in full or as a note naming what failed."""
        unwritten = {failure.unwritten for failure in self.failures}
        files = (self.html, self.markdown, self.json, self.junit, self.dataset)
        return tuple(path for path in files if path not in unwritten)


def analyse(
    patterns: Sequence[str],
    out_dir: Path,
    *,
    master: str | None = None,
    title: str = "kafka-chaos report",
    junit: Path | None = None,
    chunk_rows: int = CHUNK_ROWS,
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> Analysis:
    """Reconcile every run under `patterns` (one Spark job), judge each cell, and write all
    reports, the results dataset and the cross-run summary to `out_dir`. Runs above
    `chunk_rows` acked rows are reconciled as DataFrame operations (analysis.spark.messages).
    `fail_on`, the verdicts that fail, decides the exit code and what every report and the
    JUnit say of it."""
    run_dirs = find_runs(patterns)
    if not run_dirs:
        raise NoRunsFound(
            f"no run directory under {' '.join(patterns)} (a run directory holds spec.json and "
            "acked.parquet). Fix: pass runs/<experiment>/<timestamp> or a parent, or run an "
            "experiment first (make run)."
        )
    # A repetition the plans name but no run directory holds (a shard that died) is UNKNOWN.
    results = [*reconcile_runs(run_dirs, master, chunk_rows), *unrun_results(patterns, run_dirs)]
    write_results(results)
    events = read_evidence_by_run(results)
    cells = judge_all(results, events)
    provenance = read_provenance(run_dirs)
    summary = safely("the cross-run summary", lambda: cross_run_summary(results, cells))
    paths = render_report(
        cells,
        results,
        events,
        provenance,
        out_dir,
        title,
        summary,
        fail_on=fail_on,
    )
    junit_path = junit or out_dir / "junit.xml"
    failures = [
        *paths.failures,
        summary,
        safely("junit.xml", lambda: write_junit(cells, events, junit_path, fail_on), junit_path),
        safely(
            "the results dataset",
            lambda: write_dataset(results, cells, out_dir),
            out_dir / DATASET_DIR,
        ),
    ]
    return Analysis(
        tuple(cells),
        exit_code(cells, fail_on=fail_on),
        paths.html,
        paths.markdown,
        paths.json,
        junit_path,
        out_dir / DATASET_DIR,
        tuple(f for f in failures if isinstance(f, PartFailure)),
    )


# The counts the terminal's verdict table sums per cell: acked, the one loss figure and the
# classes it adds up, then duplicates and divergence, shown beside it and never added.
VERDICT_COUNTS: Final[tuple[CountKey, ...]] = (
    CountName.ACKED,
    CountName.LOSS,
    *LOSS_CLASSES,
    AnomalyName.DUPLICATED,
    AnomalyName.OFFSET_DIVERGENT,
)
# The verdict table's header, matching verdict_table's rows; the counts by their labels.
VERDICT_COLUMNS: Final = (
    "cell",
    "reps",
    *(COUNT_LABELS[name][0] for name in VERDICT_COUNTS),
    "loss rate",
    "verdict",
)


def verdict_table(cells: Sequence[CellVerdict]) -> list[tuple[str, ...]]:
    """One row per cell under VERDICT_COLUMNS: the cell, its repetitions, the sum of each
    VERDICT_COUNTS count ('-' when no repetition has it), the loss rate and the verdict."""
    rows: list[tuple[str, ...]] = []
    for cell in cells:
        rate = cell.stats.loss_rate
        rows.append(
            (
                cell.cell,
                str(cell.stats.repetitions),
                *(_total(cell.stats.counts.get(name)) for name in VERDICT_COUNTS),
                "-" if rate is None else f"{rate:.2%}",
                str(cell.verdict),
            )
        )
    return rows


def _total(stat: CountStats | None) -> str:
    """A count's sum over the cell's repetitions, with thousands separators; '-' for none."""
    return "-" if stat is None else f"{stat.total:,}"
