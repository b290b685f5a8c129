"""report.md: the matrix as a Markdown table, each cell's guarantee and reasons, provenance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from analysis.judge.guarantees import SOURCE
from analysis.judge.outcomes import CellVerdict, Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON, exit_code
from analysis.model.anomalies import COUNT_LABELS, CountKey, CountName
from analysis.model.results import RunResult
from analysis.report.matrix import PRICE_LABELS, matrix_counts, matrix_row
from analysis.report.provenance import ProvenanceView
from analysis.report.safe import PartFailure, safely
from analysis.report.views import (
    config_summary,
    verdict_counts,
    verdict_summary,
    with_range,
)

__all__ = ["render_markdown"]


def _md(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(
    cells: Sequence[CellVerdict],
    provenance: Sequence[ProvenanceView],
    title: str,
    results_by_run: Mapping[str, RunResult] | None = None,
    *,
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> str:
    """The matrix as a Markdown table, then each cell's guarantee and reasons, then provenance;
    with the results, the matrix ends with the price of safety (PRICE_LABELS). The headline and
    exit code follow `fail_on`, the verdicts that fail."""
    priced = results_by_run is not None
    counts = " · ".join(f"{v} {n}" for v, n in verdict_counts(cells).items())
    columns = matrix_counts(cells)
    head = [
        "cell",
        "verdict",
        COUNT_LABELS[CountName.LOSS][0],
        "loss rate",
        *(label for label, _ in PRICE_LABELS if priced),
        *(COUNT_LABELS[n][0] for n in columns.shown),
        "configuration",
    ]
    lines = [
        f"# {title}",
        "",
        f"**{verdict_summary(cells, fail_on)}** Exit code {exit_code(cells, fail_on=fail_on)}. "
        f"Verdicts: {counts}.",
        "",
        "Counts are per repetition: mean (min–max) when repetitions disagree.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(_alignment(i, head) for i in range(len(head))) + "|",
    ]
    for cell in cells:
        row = safely(
            f"the matrix row of {cell.cell}",
            partial(_matrix_row, cell, results_by_run, columns.shown),
        )
        if isinstance(row, PartFailure):  # the cell's name, and why its figures are missing
            row = f"| `{_md(cell.cell)}` | {_md(row)} |"
        lines.append(row)
    if columns.folded:
        folded = ", ".join(COUNT_LABELS[n][0] for n in columns.folded)
        lines += ["", f"Zero in every cell, so not shown: {folded}."]
    lines += ["", "## Reasons", ""]
    for cell in cells:
        section = safely(f"cell {cell.cell}", partial(_markdown_cell, cell))
        if isinstance(section, PartFailure):  # its heading still, and why the rest is missing
            section = [f"### {cell.cell}", "", str(section), ""]
        lines += section
    lines += _markdown_provenance(provenance)
    return "\n".join(lines) + "\n"


def _matrix_row(
    cell: CellVerdict,
    results_by_run: Mapping[str, RunResult] | None,
    counts: Sequence[CountKey],
) -> str:
    """The cell's line of the matrix table: verdict, loss and its rate, the price of safety
    (when given the results), the `counts` columns, then the configuration; each value with
    its range or note in parentheses."""
    row = matrix_row(cell, results_by_run, counts)
    texts = [
        f"`{cell.cell}`",
        f"**{row.verdict}**",
        with_range(row.loss.text, row.loss.range),
        row.loss_rate,
        *(with_range(v.text, v.range) for v in row.price),
        *(with_range(v.text, v.range) for v in row.values),
        " · ".join(row.config),
    ]
    return "| " + " | ".join(_md(v) for v in texts) + " |"


def _alignment(index: int, head: Sequence[str]) -> str:
    """Left for the cell name, verdict and configuration, right for the numbers."""
    return "---" if head[index] in ("cell", "verdict", "configuration") else "---:"


def _markdown_cell(cell: CellVerdict) -> list[str]:
    """One cell's heading, guarantee and reasons in Markdown."""
    lines = [f"### {cell.cell}: {cell.verdict.value}", "", f"_{config_summary(cell.config)}_", ""]
    if cell.guarantee is not None:
        g = cell.guarantee
        lines += [
            f"Guarantee: loss {g.loss}, duplicates {g.duplicates}, order {g.order}. "
            f"{g.citation} ({SOURCE})",
            "",
        ]
    lines += [f"- {reason}" for reason in cell.reasons]
    return [*lines, "", *_repetition_notes(cell)]


def _repetition_notes(cell: CellVerdict) -> list[str]:
    """The reasons of the cell's repetitions that its own reasons do not quote (a PASS cell's
    note of a node that stopped on its own, the duplicates it allowed, a repetition's second
    finding), each as `rep N (VERDICT): reason`, folded in a <details> block that GitHub shows
    closed; [] when the cell's reasons quote them all."""
    quoted = set(cell.reasons)
    notes = [
        f"- rep {rep.repetition} ({rep.verdict.value}): {reason}"
        for rep in cell.repetitions
        for reason in rep.reasons
        if f"rep {rep.repetition}: {reason}" not in quoted
    ]
    if not notes:
        return []
    more = f"{len(notes)} more reason{'s' * (len(notes) != 1)}"
    head = f"<details><summary>{more} of its repetitions</summary>"
    return [head, "", *notes, "", "</details>", ""]


def _markdown_provenance(provenance: Sequence[ProvenanceView]) -> list[str]:
    """A provenance section: one table of what produced each experiment run."""
    lines = ["## Provenance", ""]
    for view in provenance:
        lines += [f"Runs under `{view.root}`:", "", "| | |", "|---|---|"]
        lines += [f"| {label} | {_md(text)} |" for label, text in view.lines]
        lines.append("")
    return lines
