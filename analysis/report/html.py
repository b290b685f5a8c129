"""report.html: one self-contained page (CSS embedded, charts inline SVG) that works offline."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Final

from jinja2 import Environment, FileSystemLoader

from analysis.crossrun.summary import CrossRunSummary
from analysis.judge.guarantees import SOURCE
from analysis.judge.outcomes import VERDICT_MEANING, CellVerdict, Events, Verdict
from analysis.judge.verdicts import DEFAULT_FAIL_ON, exit_code
from analysis.model.anomalies import COUNT_LABELS, CountName
from analysis.model.results import RunResult
from analysis.report.cells import MAX_TIMELINES_PER_CELL, cell_view
from analysis.report.charts import VERDICT_COLOURS
from analysis.report.loss_charts import loss_chart_svg, loss_probability_svg
from analysis.report.matrix import PRICE_LABELS, matrix_counts, matrix_row
from analysis.report.provenance import ProvenanceView
from analysis.report.safe import PartFailure, safely, safely_from
from analysis.report.summary_view import summary_view
from analysis.report.views import (
    css_class,
    verdict_counts,
    verdict_summary,
)

__all__ = ["render_html"]

TEMPLATES: Final = Path(__file__).parent / "templates"
OUTCOME_CSS: Final = {0: "v-pass", 1: "v-violation", 2: "v-unknown"}  # by exit code


def generated_at() -> str:
    """The time a report is made, as "YYYY-MM-DD HH:MM UTC": now, or SOURCE_DATE_EPOCH when set
    (the reproducible-builds convention), so the same runs can make the same page twice."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def render_html(
    cells: Sequence[CellVerdict],
    results_by_run: Mapping[str, RunResult],
    events_by_run: Mapping[str, Events],
    provenance: Sequence[ProvenanceView],
    title: str,
    summary: CrossRunSummary | PartFailure | None = None,
    *,
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON,
) -> str:
    """The self-contained HTML page (with the cross-run summary when given, or in its place
    the failure that kept it out); its headline follows `fail_on`, the verdicts that fail."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    columns = matrix_counts(cells)
    return env.get_template("report.html.j2").render(
        title=title,
        generated_at=generated_at(),
        outcome=verdict_summary(cells, fail_on),
        outcome_css=OUTCOME_CSS[exit_code(cells, fail_on=fail_on)],
        counts=verdict_counts(cells),
        legend=[(v.value, css_class(v), VERDICT_MEANING[v]) for v in Verdict],
        colours={css_class(v): colour for v, colour in VERDICT_COLOURS.items()},
        source=SOURCE,
        loss_header=COUNT_LABELS[CountName.LOSS],
        headers=[(name, *COUNT_LABELS[name]) for name in columns.shown],
        folded=[COUNT_LABELS[name][0] for name in columns.folded],
        price_headers=PRICE_LABELS,
        rows=[
            safely(
                f"the matrix row of {c.cell}",
                partial(matrix_row, c, results_by_run, columns.shown),
            )
            for c in cells
        ],
        loss_chart=safely("the loss chart", lambda: loss_chart_svg(cells, results_by_run))
        if cells
        else None,
        cells=[
            safely(f"cell {c.cell}", partial(cell_view, c, results_by_run, events_by_run))
            for c in cells
        ],
        experiments=sorted({c.experiment for c in cells}),
        repetitions=sum(len(c.repetitions) for c in cells),
        max_timelines=MAX_TIMELINES_PER_CELL,
        provenance=provenance,
        summary=safely_from("the cross-run summary", summary, summary_view),
        summary_chart=safely("the loss probability chart", partial(loss_probability_svg, summary))
        if isinstance(summary, CrossRunSummary) and summary.groups
        else None,
    )
